"""A deployed agent driven over the generic HTTP protocol (the reference agent of
``examples/deployed_agent``) is graded exactly as a model candidate making the same calls, and
concurrent episodes keep their backends apart."""

from __future__ import annotations

import asyncio

import pytest
from tests.sim.deployed_helpers import reference_agent_module, scripted_brain, serve, starter

from callbench.grade.action_checks import grade_action_checks
from callbench.models.base import ModelSettings
from callbench.models.deployed import create_deployed
from callbench.models.deployed.base import WebhookConfig
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import EndReason, Trace
from waiting import scale

SCENARIOS = ["clinic_ortho_reschedule", "bank_stolen_wallet_emergency_block"]


async def _episode(candidate, scenario_id: str, episode_id: str) -> Trace:
    bundle = starter()
    agent, scen = bundle.scenario(scenario_id)
    return await run_episode(
        agent,
        scen,
        candidate=candidate,
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        episode_id=episode_id,
        run_seed=20260314,
        repeat=0,
    )


def _graded(trace: Trace) -> list[tuple[str, str]]:
    agent, scen = starter().scenario(trace.scenario_id)
    return [(i.id, i.label.value) for i in grade_action_checks(trace, scen, agent)]


def _calls(trace: Trace) -> list[tuple[str, str, object, str]]:
    return [(e.name, e.raw_arguments, e.result, e.outcome) for e in trace.tool_events]


@pytest.mark.parametrize("scenario_id", SCENARIOS)
async def test_generic_http_agent_graded_as_the_model(scenario_id: str) -> None:
    bundle = starter()
    model_trace = await _episode(create_scripted("scripted:reference", None, bundle), scenario_id, "m-r0")
    ref = reference_agent_module()
    async with serve(ref.make_app(scripted_brain(bundle))) as url:
        cand = create_deployed(f"deployed:http:{url}", f"http:{url}", ModelSettings(), WebhookConfig())
        try:
            dep_trace = await _episode(cand, scenario_id, "m-r0")
        finally:
            await cand.aclose()
    assert model_trace.tool_events, "the scenario must exercise tools"
    assert dep_trace.end_reason == model_trace.end_reason, dep_trace.skip_reason
    assert _calls(dep_trace) == _calls(model_trace)
    assert _graded(dep_trace) == _graded(model_trace)
    assert any(label == "met" for _, label in _graded(dep_trace))
    assert dep_trace.state == model_trace.state
    # the caller heard the same words
    assert [t.intended for t in dep_trace.caller_turns] == [t.intended for t in model_trace.caller_turns]
    rec = dep_trace.deployed
    assert rec is not None and rec.adapter == "http"
    assert "system_prompt" in rec.unobserved and "token_usage" in rec.unobserved
    assert len(rec.turns) == len([t for t in model_trace.messages if t.role == "user"]) + 1
    trips = [rt.tool_event for t in rec.turns for rt in t.tool_round_trips]
    assert trips == [e.index for e in dep_trace.tool_events]
    assert all(t.reply_s >= rt.arrived_s >= 0 for t in rec.turns for rt in t.tool_round_trips)
    assert model_trace.deployed is None
    # each reply's wall time over the adapter feeds the latency figures: one candidate turn each
    assert dep_trace.latency is not None
    turns = dep_trace.latency.turns
    assert [t.turn for t in turns] == [t.candidate_turn for t in rec.turns]
    for lat, dep in zip(turns, rec.turns, strict=True):
        assert not lat.streamed and lat.completion_s == pytest.approx(dep.reply_s, abs=0.05)
    # tool events sit between the caller's turn and the agent's reply, in arrival order
    for ev in dep_trace.tool_events:
        assert dep_trace.messages[ev.message_index].tool_calls
        assert dep_trace.messages[ev.result_message_index].tool_event == ev.index


async def test_concurrent_episodes_keep_their_backends_apart() -> None:
    bundle = starter()
    ref = reference_agent_module()
    async with serve(ref.make_app(scripted_brain(bundle))) as url:
        cand = create_deployed(f"deployed:http:{url}", f"http:{url}", ModelSettings(), WebhookConfig())
        try:
            traces = await asyncio.gather(
                *[_episode(cand, sid, f"c{i}-{sid}") for i, sid in enumerate(SCENARIOS * 3)]
            )
        finally:
            await cand.aclose()
    alone = {
        sid: await _episode(create_scripted("scripted:reference", None, bundle), sid, "x")
        for sid in SCENARIOS
    }
    for tr in traces:
        assert tr.end_reason != EndReason.SKIPPED, tr.skip_reason
        assert _calls(tr) == _calls(alone[tr.scenario_id]), tr.episode_id
        assert tr.state == alone[tr.scenario_id].state


async def test_an_agent_that_does_not_answer_in_time_is_a_timeout_fault_not_the_agents() -> None:
    from aiohttp import web

    from callbench.models.faults import collect_faults

    async def open_session(request: web.Request) -> web.Response:
        return web.json_response({"session_id": "s1", "messages": ["Hello, clinic."], "ended": False})

    release = asyncio.Event()
    limit_s = round(2.0 * scale(), 3)  # the greeting must arrive within it even on a loaded machine

    async def slow_turn(request: web.Request) -> web.Response:
        await release.wait()  # held until the test has seen the timeout
        return web.json_response({"messages": [], "ended": False})

    async def close(request: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.add_routes(
        [
            web.post("/sessions", open_session),
            web.post("/sessions/{sid}/turns", slow_turn),
            web.delete("/sessions/{sid}", close),
        ]
    )
    async with serve(app) as url:
        cand = create_deployed(
            f"deployed:http:{url}", f"http:{url}", ModelSettings(timeout_s=limit_s), WebhookConfig()
        )
        try:
            with collect_faults() as ledger:
                trace = await _episode(cand, SCENARIOS[0], "t-r0")
        finally:
            release.set()
            await cand.aclose()
    assert trace.end_reason == EndReason.SKIPPED
    assert trace.skip_reason is not None and f"no reply within {limit_s:g} s" in trace.skip_reason
    assert ledger.roles["candidate"].faults == {"timeout": 1}
    assert (ledger.skip_role, ledger.skip_kind) == ("candidate", "timeout")
    assert trace.messages[1].content == "Hello, clinic."
