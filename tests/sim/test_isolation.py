"""Who sees what (DESIGN.md table), and that a reader rebuilds each party's view from the trace."""

import json
from typing import Any

import pytest

from callbench.bundle.render import render_instructions
from callbench.models.base import ModelRequest
from callbench.models.scripted.models import create_scripted
from callbench.sim.views import caller_messages, candidate_messages


def _strings(v: Any) -> list[str]:
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return [str(v)] if v is not None and not isinstance(v, bool) else []


def _text(req: ModelRequest) -> str:
    return json.dumps(req.model_dump(mode="json", exclude={"context"}), ensure_ascii=False)


@pytest.fixture()
async def recorded(run, recorder, bundle, dairy):  # type: ignore[no-untyped-def]
    agent, scen = dairy
    scen = scen.model_copy(update={"channel": scen.channel.model_copy(update={"seeded_noise": True})})
    cand = recorder(create_scripted("scripted:reference", None, bundle))
    call = recorder(create_scripted("scripted:plan", None, bundle))
    trace = await run(candidate=cand, caller=call, scenario=scen)
    return trace, cand.requests, call.requests, agent, scen


async def test_caller_requests_never_hold_hidden_state_tools_checks_or_criteria(recorded) -> None:
    trace, _, caller_reqs, agent, scen = recorded
    assert caller_reqs and trace.end_reason == "call_ended"
    secrets = _strings(scen.hidden_state) + [c.id for c in scen.action_checks] + [scen.goal]
    for c in scen.criteria:
        secrets += [c.id, c.statement, c.anchors.met, c.anchors.partial, c.anchors.not_met, *c.excerpts]
    secrets += [t.name for t in agent.config.tools] + ["ZS-9001", "confirmed"]  # tool names and results
    secrets += [render_instructions(agent, scen)[:60]]
    for req in caller_reqs:
        text = _text(req)
        assert req.tools == [] and req.response_schema is not None
        for s in secrets:
            assert s not in text, f"caller request {req.context.turn} contains {s!r}"
    heard = caller_reqs[1].messages[-1].content
    said = (
        "Thank you, Meena ji, one moment while I open your record. How much milk will you send this evening?"
    )
    assert heard == said


async def test_candidate_requests_never_hold_the_brief_or_grading_material(recorded) -> None:
    trace, cand_reqs, _, _agent, scen = recorded
    b = scen.brief
    secrets = [b.context, b.reason, b.persona, *b.unknown_facts, trace.caller_view.system_prompt[:80]]
    secrets += [s.id for s in b.plan] + [s.trigger for s in b.plan]
    secrets += [c.id for c in scen.action_checks] + [c.statement for c in scen.criteria] + [scen.goal]
    for req in cand_reqs:
        text = _text(req)
        for s in secrets:
            assert s not in text, f"candidate request {req.context.turn} contains {s!r}"
        for m in req.messages:
            if m.role != "tool":
                assert "SECRET-LIMIT-4417" not in (m.content or "")  # hidden state only through tool results
    # the candidate sees observed text, never the intended text the channel changed
    (noise,) = [e for ct in trace.caller_turns for e in ct.channel_events if e.kind == "seeded_substitute"]
    assert noise.applied
    intended = trace.caller_turns[0].intended
    assert all(intended not in _text(r) for r in cand_reqs)
    assert any(trace.caller_turns[0].observed[0] in _text(r) for r in cand_reqs)


async def test_every_request_is_rebuilt_from_the_trace(recorded) -> None:
    trace, cand_reqs, caller_reqs, _, _ = recorded
    answers = [m.index for m in trace.messages if m.role == "assistant"]
    assert len(answers) == len(cand_reqs)
    for req, answer in zip(cand_reqs, answers, strict=True):
        assert req.messages == candidate_messages(trace.messages[:answer])
        assert req.tools == trace.candidate_view.tools
    for req in caller_reqs:
        t = req.context.turn
        first = trace.caller_turns[t - 1].message_indices[0]
        msgs = trace.messages[:first]
        events = [e for e in trace.tool_events if e.result_message_index < first]
        expected = caller_messages(trace.caller_view.system_prompt, msgs, events, trace.caller_turns[: t - 1])
        assert req.messages == expected
    assert trace.messages[0].content is not None
    import hashlib

    assert (
        hashlib.sha256(trace.messages[0].content.encode()).hexdigest()
        == trace.candidate_view.instructions_sha256
    )


async def test_caller_hears_a_concluding_message(run, recorder) -> None:
    from callbench.models.scripted.script import ScriptedFileModel

    caller = recorder(
        ScriptedFileModel.from_data(
            {
                "caller": [
                    {"speech": "Yes, it's Meena.", "expressed_step": "s1_greet", "done": False},
                    {"speech": "Bye.", "expressed_step": None, "done": True},
                ]
            }
        )
    )
    cand = [
        {"content": "Hello."},
        {
            "tool_calls": [
                {"name": "end_call", "arguments": {"reason": "nope", "concluding_message": "Bye, Meena."}}
            ]
        },
        {"content": "Sorry, one more thing."},
    ]
    t = await run(candidate=cand, caller=caller)
    assert not t.tool_events[0].ended_call
    assert caller.requests[1].messages[-1].content == "Bye, Meena. Sorry, one more thing."
