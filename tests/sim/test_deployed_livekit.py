"""A real LiveKit Agents bot (``examples/deployed_agent/livekit_agent.py`` with a scripted LLM inside)
run in process and driven through LiveKit's own text interface is graded exactly as the model
candidate making the same calls: its tool calls go over loopback to callbench's webhook, so the
same dispatcher, fixtures, state engine and checks answer and grade them."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("livekit.agents")

from tests.sim.deployed_helpers import starter
from tests.sim.test_deployed import _calls, _episode, _graded

from callbench.models.base import ModelSettings
from callbench.models.deployed import create_deployed, split_deployed
from callbench.models.deployed.base import WebhookConfig
from callbench.models.deployed.livekit import LiveKitDeployed, LiveKitEpisode, load_factory
from callbench.models.faults import collect_faults
from callbench.models.scripted.models import create_scripted
from callbench.runs.deployment import DeploymentMismatch, check_deployments
from callbench.trace import EndReason

BOTS = {
    "clinic_ortho_reschedule": "tests.fakes.livekit_bot:clinic",
    "bank_stolen_wallet_emergency_block": "tests.fakes.livekit_bot:bank",
}
SECRET = "canary-livekit-hook-5f20a1"


def _bot(target: str, **settings: object) -> LiveKitDeployed:
    spec = f"deployed:livekit:{target}"
    cand = create_deployed(spec, f"livekit:{target}", ModelSettings(**settings), WebhookConfig(secret=SECRET))
    assert isinstance(cand, LiveKitDeployed)
    return cand


@pytest.mark.parametrize("scenario_id", sorted(BOTS))
async def test_livekit_bot_graded_as_the_model(scenario_id: str, caplog: pytest.LogCaptureFixture) -> None:
    bundle = starter()
    model_trace = await _episode(create_scripted("scripted:reference", None, bundle), scenario_id, "m-r0")
    cand = _bot(BOTS[scenario_id])
    caplog.set_level(logging.DEBUG)
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
    assert [t.intended for t in dep_trace.caller_turns] == [t.intended for t in model_trace.caller_turns]
    # the bot's own words reached the trace: the reference path's speech, in order
    said = [m.content for m in dep_trace.messages if m.role == "assistant" and m.content]
    path = starter().scenario(scenario_id)[1].reference_path
    assert path and said[0] == path[0].speech
    rec = dep_trace.deployed
    assert rec is not None and rec.adapter == "livekit" and not rec.ended_by_agent
    assert [rt.tool_event for t in rec.turns for rt in t.tool_round_trips] == [
        e.index for e in dep_trace.tool_events
    ]
    # the run's webhook secret reached neither the trace nor any log line
    assert SECRET not in dep_trace.model_dump_json()
    assert not [r for r in caplog.records if SECRET in r.getMessage() or SECRET in str(r.__dict__)]


async def test_concurrent_livekit_episodes_keep_their_backends_apart() -> None:
    runs = [(sid, i) for i in range(2) for sid in sorted(BOTS)]
    cands = {sid: _bot(BOTS[sid]) for sid in BOTS}
    try:
        traces = await asyncio.gather(*[_episode(cands[sid], sid, f"c{i}-{sid}") for sid, i in runs])
    finally:
        for c in cands.values():
            await c.aclose()
    for tr in traces:
        alone = await _episode(create_scripted("scripted:reference", None, starter()), tr.scenario_id, "x")
        assert tr.end_reason != EndReason.SKIPPED, tr.skip_reason
        assert _calls(tr) == _calls(alone), tr.episode_id
        assert tr.state == alone.state


async def test_the_bot_is_checked_against_the_bundle_before_the_run() -> None:
    agents = starter().agents
    clinic = _bot(BOTS["clinic_ortho_reschedule"])
    hashes = await check_deployments({"candidate:x": clinic}, [agents["clinic_appointments"]])
    config = await clinic.deployed_config()
    assert [t["name"] for t in config["tools"]] == [
        t.name for t in agents["clinic_appointments"].config.tools
    ]
    assert config["framework"] == "livekit-agents" and config["llm"]["class"] == "ScriptedLLM"
    assert hashes == {clinic.spec: clinic.config_sha256} and len(clinic.config_sha256 or "") == 64
    with pytest.raises(DeploymentMismatch) as err:
        await check_deployments({"candidate:x": clinic}, [agents["bank_card_services"]])
    lines = str(err.value).splitlines()[1:]
    assert f"{clinic.spec}: tool 'verify_customer' of agent 'bank_card_services' is not deployed" in lines
    assert (
        f"{clinic.spec}: deployed tool 'verify_patient' is not a tool of agent 'bank_card_services'" in lines
    )


TYPED_BOT = '''
from livekit.agents import Agent, function_tool

class Bot(Agent):
    def __init__(self):
        super().__init__(instructions="Answer the clinic line.")

    @function_tool
    async def end_call(self, outcome: str, summary: str, urgent: bool = False) -> str:
        """End the call."""
        raise RuntimeError("the real backend must never be called")

def make(episode):
    return Bot()
'''


async def test_typed_function_tools_are_read_and_compared(tmp_path: Path) -> None:
    (tmp_path / "typed_bot.py").write_text(TYPED_BOT, encoding="utf-8")
    cand = _bot(f"{tmp_path / 'typed_bot.py'}:make")
    config = await cand.deployed_config()
    tool = config["tools"][0]
    assert tool["name"] == "end_call" and tool["description"] == "End the call."
    assert tool["parameters"]["properties"]["urgent"]["type"] == "boolean"
    assert sorted(tool["parameters"]["required"]) == ["outcome", "summary"]
    with pytest.raises(DeploymentMismatch) as err:
        await check_deployments({"candidate:x": cand}, [starter().agents["clinic_appointments"]])
    text = str(err.value)
    assert f"{cand.spec}: tool 'end_call': deployed parameter 'urgent' is not in the bundle" in text
    assert f"{cand.spec}: tool 'verify_patient' of agent 'clinic_appointments' is not deployed" in text


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon_here", "expected deployed:livekit:<module or path.py>:<factory>"),
        ("tests.fakes.no_such_module:make", "cannot import tests.fakes.no_such_module: ModuleNotFoundError"),
        (
            "tests.fakes.livekit_bot:no_such_factory",
            "tests.fakes.livekit_bot has no callable no_such_factory",
        ),
        ("missing/bot.py:make", "no file missing/bot.py"),
    ],
)
def test_bad_targets_get_a_located_error(target: str, message: str) -> None:
    spec = f"deployed:livekit:{target}"
    with pytest.raises(ValueError) as err:
        split_deployed(spec, f"livekit:{target}")
        load_factory(spec, target)
    assert spec in str(err.value) and message in str(err.value)


def broken_factory(episode: LiveKitEpisode) -> object:
    raise RuntimeError(f"no bot for {episode.scenario_id}")


def wrong_factory(episode: LiveKitEpisode) -> object:
    return {"not": "an agent"}


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            "broken_factory",
            "the factory failed: RuntimeError: no bot for clinic_ortho_reschedule",
        ),
        ("wrong_factory", "the factory returned dict; expected an Agent or (AgentSession, Agent)"),
    ],
)
async def test_a_bot_that_cannot_be_built_is_a_candidate_fault_not_graded(factory: str, message: str) -> None:
    cand = _bot(f"tests.sim.test_deployed_livekit:{factory}")
    try:
        with collect_faults() as ledger:
            trace = await _episode(cand, "clinic_ortho_reschedule", "f-r0")
    finally:
        await cand.aclose()
    assert trace.end_reason == EndReason.SKIPPED and not trace.tool_events
    assert trace.skip_reason is not None and message in trace.skip_reason
    assert (ledger.skip_role, ledger.skip_kind) == ("candidate", "client_error")
    assert json.loads(trace.model_dump_json())["deployed"]["adapter"] == "livekit"
