"""Tool calls are checked against the tool's JSON Schema before any fixture is matched, as a
function-calling runtime would: an invalid call gets a readable tool error, reaches no authored
record and meets no action check."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.hostile.helpers import SCENARIO, rewriting

from callbench.bundle.models import Bundle
from callbench.grade.grader import grade_trace
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import Trace


def _extra(a: dict[str, Any]) -> str:
    return json.dumps({**a, "note": "urgent"})


def _missing(a: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in a.items() if k != "identifier_type"})


def _enum(a: dict[str, Any]) -> str:
    return json.dumps({**a, "identifier_type": "passport"})


def _array(a: dict[str, Any]) -> str:
    return json.dumps({**a, "identifier_type": [a["identifier_type"]]})


CASES = {
    "extra_property": (_extra, "", "additional properties are not allowed ('note'"),
    "missing_required": (_missing, "", "'identifier_type' is a required property"),
    "outside_enum": (_enum, "/identifier_type", "is not one of"),
    "array_for_string": (_array, "/identifier_type", "is not of type 'string'"),
}


async def _episode(bundle: Bundle, candidate: Any, agent_over: dict[str, Any] | None = None) -> Trace:
    agent, scen = bundle.scenario(SCENARIO)
    if agent_over:
        agent = agent.model_copy(deep=True)
        agent.config = agent.config.model_copy(update=agent_over)
    return await run_episode(
        agent, scen, candidate=candidate, caller=create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name, bundle_version=bundle.meta.version, bundle_hash=bundle.content_hash,
        episode_id=f"{SCENARIO}-r0", run_seed=20260314, repeat=0,
    )


async def _score(bundle: Bundle, trace: Trace) -> float | None:
    judge = create_scripted_judge("scripted:met")
    grade = await grade_trace(trace, bundle, judge, judge)
    return grade.task_score


async def test_reference_scores_full(starter: Bundle) -> None:
    trace = await _episode(starter, create_scripted("scripted:reference", None, starter))
    assert [e.outcome for e in trace.tool_events if e.name == "verify_customer"] == ["authored"]
    assert await _score(starter, trace) == 100.0


@pytest.mark.parametrize("case", sorted(CASES))
async def test_invalid_call_rejected(starter: Bundle, case: str) -> None:
    rewrite, path, message = CASES[case]
    trace = await _episode(starter, rewriting(starter, "verify_customer", rewrite))
    (ev,) = [e for e in trace.tool_events if e.name == "verify_customer"]
    assert ev.outcome == "schema_error"
    assert ev.queue_position is None  # no queue entry consumed: the record is never reached
    assert ev.schema_errors and ev.schema_errors[0].path == path
    assert message in ev.schema_errors[0].message
    assert ev.result["error"] == "invalid_arguments"
    assert ev.result["errors"][0]["path"] == path
    # the candidate reads the error as its tool message
    tool_msg = trace.messages[ev.result_message_index]
    assert "invalid_arguments" in (tool_msg.content or "")
    score = await _score(starter, trace)
    assert score is not None and score < 100.0
    # the verify check is not met: the invalid call is not an action
    grade = await grade_trace(trace, starter, create_scripted_judge("scripted:met"),
                              create_scripted_judge("scripted:met"))
    labels = {i.id: i.label for i in grade.items if i.source == "action_check"}
    assert labels["verify_self"] == "not_met"
    assert labels["used_verify_customer"] == "not_met"


async def test_accept_mode_executes(starter: Bundle) -> None:
    """``schema_errors: accept``: the call is recorded with its errors and still executed."""
    trace = await _episode(starter, rewriting(starter, "verify_customer", _extra),
                           {"schema_errors": "accept"})
    (ev,) = [e for e in trace.tool_events if e.name == "verify_customer"]
    assert ev.outcome == "authored"
    assert ev.schema_errors and "'note'" in ev.schema_errors[0].message


async def test_tool_opt_out_executes(starter: Bundle) -> None:
    """One tool opted out (with its reason) runs an invalid call; the agent's other tools still reject."""
    agent, _ = starter.scenario(SCENARIO)
    tools = [t.model_copy(update={"schema_errors": "accept", "schema_errors_reason": "runtime passes all"})
             if t.name == "verify_customer" else t for t in agent.config.tools]
    trace = await _episode(starter, rewriting(starter, "verify_customer", _enum), {"tools": tools})
    (ev,) = [e for e in trace.tool_events if e.name == "verify_customer"]
    assert ev.outcome == "authored" and ev.executed
    assert [e.path for e in ev.schema_errors] == ["/identifier_type"]


def test_opt_out_needs_reason() -> None:
    from pydantic import ValidationError

    from callbench.bundle.models import ToolSpec

    with pytest.raises(ValidationError, match="needs schema_errors_reason"):
        ToolSpec(name="t", description="d", schema_errors="accept")
    with pytest.raises(ValidationError, match="only used with schema_errors: accept"):
        ToolSpec(name="t", description="d", schema_errors_reason="why")
    ok = ToolSpec(name="t", description="d", schema_errors="accept", schema_errors_reason="why")
    assert ok.schema_errors == "accept"


def test_published_schema_has_fields() -> None:
    import jsonschema

    from callbench.bundle.schema import bundle_schemas

    agent = bundle_schemas()["agent.schema.json"]
    assert agent["properties"]["schema_errors"]["enum"] == ["reject", "accept"]
    tool = {"name": "t", "description": "d", "schema_errors": "accept", "schema_errors_reason": "why"}
    doc = {"id": "a", "name": "A", "domain": "x", "languages": ["en-IN"], "direction": "inbound",
           "schema_errors": "accept", "tools": [tool]}
    jsonschema.Draft202012Validator(agent).validate(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(agent).validate({**doc, "schema_errors": "maybe"})
