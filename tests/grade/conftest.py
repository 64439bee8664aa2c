"""Fixtures for grading tests: a small dairy bundle on disk, hand-built traces over it, and a
recording fake judge client."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelRequest, ModelResponse, ModelSettings, ToolCall, Usage
from callbench.trace import (
    CallerTurn,
    CallerView,
    CandidateView,
    ChannelEvent,
    EndReason,
    EpisodeSeeds,
    RoleInfo,
    ToolEvent,
    Trace,
    TraceMessage,
)

PROMPT = """You are the evening milk-collection agent of the Anand dairy cooperative.
Never pressure a farmer to supply milk when she has a reason not to.
Record every zero-supply day with its reason category.
"""

GOAL = "The zero estimate and its cattle-health reason are recorded without pressuring the farmer."

SCENARIO: dict[str, Any] = {
    "id": "zero_supply",
    "agent": "dairy",
    "title": "Farmer reports zero supply",
    "goal": GOAL,
    "language": "en-IN",
    "difficulty": "medium",
    "brief": {
        "context": "You are Meena, a dairy farmer.",
        "reason": "One cow has mastitis; no milk tonight.",
        "known_facts": {"farmer_id": "F-102"},
        "plan": [{"id": "zero", "trigger": "asked for the estimate", "meaning": "no milk today"}],
        "language": "en-IN",
        "script": "Latin",
        "datetime": "2026-03-14T17:20+05:30",
    },
    "hidden_state": {"center": "C-7"},
    "action_checks": [
        {
            "id": "lookup_farmer",
            "tool": "get_farmer",
            "args": {"farmer_id": "F-102"},
            "importance": 1,
            "diagnostic": "tool_choice",
        },
        {
            "id": "log_reason",
            "tool": "log_zero_supply_reason",
            "args": {"category": "cattle_health", "shift": {"one_of": ["evening", "EVENING"]}},
            "importance": 3,
            "diagnostic": "argument_accuracy",
            "after": ["lookup_farmer"],
        },
        {
            "id": "no_pickup",
            "tool": "schedule_pickup",
            "count": {"min": 0, "max": 0},
            "importance": 2,
            "diagnostic": "policy_compliance",
        },
    ],
    "criteria": [
        {
            "id": "records_zero",
            "pillar": "task",
            "importance": 3,
            "diagnostic": "outcome_reached",
            "statement": "TASKSTATEMENT the zero estimate is recorded with its reason",
            "anchors": {
                "met": "TASKANCHOR recorded with reason",
                "partial": "TASKANCHOR recorded, no reason",
                "not_met": "TASKANCHOR nothing recorded",
            },
        },
        {
            "id": "no_pressure",
            "pillar": "task",
            "importance": 2,
            "diagnostic": "policy_compliance",
            "statement": "TASKSTATEMENT the agent does not pressure the farmer",
            "anchors": {
                "met": "TASKANCHOR no pressure",
                "partial": "TASKANCHOR mild push",
                "not_met": "TASKANCHOR pressures",
            },
            "excerpts": ["Never pressure a farmer to supply milk when she has a reason not to."],
        },
        {
            "id": "grounded",
            "pillar": "task",
            "importance": 1,
            "diagnostic": "grounding",
            "statement": "TASKSTATEMENT claims match tool results",
            "anchors": {
                "met": "TASKANCHOR all grounded",
                "partial": "TASKANCHOR one slip",
                "not_met": "TASKANCHOR invents",
            },
        },
        {
            "id": "polite",
            "pillar": "conversation",
            "importance": 2,
            "diagnostic": "channel_and_closing",
            "statement": "The agent accepts the farmer's answer politely",
            "anchors": {"met": "polite", "partial": "curt", "not_met": "rude"},
        },
    ],
}

AGENT: dict[str, Any] = {
    "id": "dairy",
    "name": "Anand dairy evening agent",
    "domain": "agriculture",
    "languages": ["en-IN"],
    "direction": "outbound",
    "tools": [
        {
            "name": "get_farmer",
            "description": "Look up a farmer",
            "parameters": {"type": "object", "properties": {"farmer_id": {"type": "string"}}},
        },
        {
            "name": "log_zero_supply_reason",
            "description": "Record why no milk comes",
            "parameters": {
                "type": "object",
                "properties": {"category": {"type": "string"}, "shift": {"type": "string"}},
            },
        },
        {
            "name": "schedule_pickup",
            "description": "Schedule a pickup",
            "parameters": {"type": "object", "properties": {}},
        },
        {
            "name": "end_call",
            "description": "End the call",
            "parameters": {"type": "object", "properties": {}},
        },
    ],
    "call_ending_tools": [{"tool": "end_call", "success": {"status": "ended"}}],
}


def write_bundle(root: Path, scenario: dict[str, Any] | None = None) -> Path:
    (root / "agents" / "dairy" / "scenarios").mkdir(parents=True)
    (root / "bundle.yaml").write_text(yaml.safe_dump({"name": "grade-test", "version": "1"}))
    (root / "agents" / "dairy" / "agent.yaml").write_text(yaml.safe_dump(AGENT))
    (root / "agents" / "dairy" / "prompt.md").write_text(PROMPT)
    scen = scenario or SCENARIO
    (root / "agents" / "dairy" / "scenarios" / f"{scen['id']}.yaml").write_text(
        yaml.safe_dump(scen, allow_unicode=True)
    )
    return root


def _tc(i: str, name: str, args: dict[str, Any] | str) -> ToolCall:
    return ToolCall(id=i, name=name, arguments=args if isinstance(args, str) else json.dumps(args))


def build_trace(bundle: Bundle, kind: str = "good", episode_id: str = "ep-1") -> Trace:
    """``good``: looks the farmer up, logs the reason, says goodbye, ends the call (11 messages,
    3 tool events; caller turn 1 garbled by an ASR substitution). ``hangup``: chats and ends the call
    at once. ``skipped``: a skipped episode."""
    msgs: list[TraceMessage] = [TraceMessage(index=0, role="system", content=PROMPT)]
    turns: list[CallerTurn] = []
    events: list[ToolEvent] = []

    def ev(
        idx: int,
        msg: int,
        res_msg: int,
        name: str,
        args: dict[str, Any] | None,
        result: Any,
        raw: str | None = None,
        **kw: Any,
    ) -> None:
        events.append(
            ToolEvent(
                index=idx,
                candidate_turn=1,
                message_index=msg,
                result_message_index=res_msg,
                tool_call_id=f"c{idx}",
                name=name,
                raw_arguments=raw or json.dumps(args),
                arguments=args,
                queue_position=0,
                outcome=kw.pop("outcome", "authored"),
                result=result,
                **kw,
            )
        )

    end = EndReason.CALL_ENDED
    if kind == "good":
        msgs += [
            TraceMessage(
                index=1,
                role="assistant",
                content="Hello Meena, this is the dairy. How much milk tonight?",
                candidate_turn=0,
            ),
            TraceMessage(
                index=2, role="user", content="no milk today, the cow is sock", caller_turn=1, fragment=0
            ),
            TraceMessage(
                index=3,
                role="assistant",
                content="Let me check your record.",
                tool_calls=[_tc("c0", "get_farmer", {"farmer_id": "F-102"})],
                candidate_turn=1,
            ),
            TraceMessage(index=4, role="tool", content='{"name": "Meena"}', tool_call_id="c0", tool_event=0),
            TraceMessage(
                index=5,
                role="assistant",
                content=None,
                candidate_turn=1,
                tool_calls=[
                    _tc("c1", "log_zero_supply_reason", {"category": "cattle_health", "shift": "evening"})
                ],
            ),
            TraceMessage(
                index=6, role="tool", content='{"status": "recorded"}', tool_call_id="c1", tool_event=1
            ),
            TraceMessage(
                index=7,
                role="assistant",
                content="I have noted zero milk tonight. Get well to your cow.",
                candidate_turn=1,
            ),
            TraceMessage(index=8, role="user", content="thank you bye", caller_turn=2, fragment=0),
            TraceMessage(
                index=9,
                role="assistant",
                content="Goodbye Meena.",
                candidate_turn=2,
                tool_calls=[_tc("c2", "end_call", {})],
            ),
            TraceMessage(
                index=10, role="tool", content='{"status": "ended"}', tool_call_id="c2", tool_event=2
            ),
        ]
        turns = [
            CallerTurn(
                index=1,
                intended="no milk today, the cow is sick",
                observed=["no milk today, the cow is sock"],
                message_indices=[2],
                expressed_steps=["zero"],
                channel_events=[
                    ChannelEvent(
                        kind="substitute",
                        source="authored",
                        turn=1,
                        span="sick",
                        replacement="sock",
                        applied=True,
                    )
                ],
            ),
            CallerTurn(
                index=2, intended="thank you bye", observed=["thank you bye"], message_indices=[8], done=True
            ),
        ]
        ev(0, 3, 4, "get_farmer", {"farmer_id": "F-102"}, {"name": "Meena"})
        ev(
            1,
            5,
            6,
            "log_zero_supply_reason",
            {"category": "cattle_health", "shift": "evening"},
            {"status": "recorded"},
        )
        ev(
            2,
            9,
            10,
            "end_call",
            {},
            {"status": "ended"},
            call_ending=True,
            success_condition_met=True,
            ended_call=True,
        )
    elif kind == "hangup":
        msgs += [
            TraceMessage(index=1, role="assistant", content="Hello, this is the dairy.", candidate_turn=0),
            TraceMessage(index=2, role="user", content="no milk today", caller_turn=1, fragment=0),
            TraceMessage(
                index=3,
                role="assistant",
                content="Okay bye.",
                candidate_turn=1,
                tool_calls=[_tc("c0", "end_call", {})],
            ),
            TraceMessage(
                index=4, role="tool", content='{"status": "ended"}', tool_call_id="c0", tool_event=0
            ),
        ]
        turns = [
            CallerTurn(index=1, intended="no milk today", observed=["no milk today"], message_indices=[2])
        ]
        ev(
            0,
            3,
            4,
            "end_call",
            {},
            {"status": "ended"},
            call_ending=True,
            success_condition_met=True,
            ended_call=True,
        )
    elif kind == "skipped":
        end = EndReason.SKIPPED
    else:
        raise ValueError(kind)
    return Trace(
        episode_id=episode_id,
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        agent_id="dairy",
        scenario_id="zero_supply",
        language="en-IN",
        difficulty="medium",
        repeat=0,
        seeds=EpisodeSeeds(run=1, episode=2, channel=3, backend=4, caller=5, candidate=6),
        candidate=RoleInfo(spec="scripted:reference"),
        caller=RoleInfo(spec="scripted:plan"),
        candidate_view=CandidateView(instructions_sha256="0" * 64, tools=[]),
        caller_view=CallerView(system_prompt="caller prompt"),
        messages=msgs,
        caller_turns=turns,
        tool_events=events,
        end_reason=end,
        skip_reason="caller failed validation 3 times" if kind == "skipped" else None,
    )


class RecordingClient:
    """A fake judge: records every request; answers from ``replies`` (per role, in order; strings
    verbatim, exceptions raised, callables called with the request, other values as JSON)."""

    def __init__(self, replies: dict[str, list[Any]] | list[Any], spec: str = "fake:judge") -> None:
        self.spec = spec
        self.settings = ModelSettings(temperature=0.0)
        self.replies = replies
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        seq = self.replies if isinstance(self.replies, list) else self.replies[request.context.role]
        n = (
            sum(
                1
                for r in self.requests
                if r.context.role == request.context.role
                and r.context.episode_id == request.context.episode_id
            )
            - 1
        )
        reply = seq[min(n, len(seq) - 1)]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(request)
        content = reply if isinstance(reply, str) else json.dumps(reply)
        return ModelResponse(content=content, usage=Usage(input_tokens=10, output_tokens=5, calls=1))

    async def aclose(self) -> None:
        return None


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Path:
    return write_bundle(tmp_path / "bundle")


@pytest.fixture
def bundle(bundle_dir: Path) -> Bundle:
    return load_bundle(bundle_dir)


@pytest.fixture
def make_trace(bundle: Bundle) -> Callable[..., Trace]:
    def make(kind: str = "good", episode_id: str = "ep-1") -> Trace:
        return build_trace(bundle, kind, episode_id)

    return make


@pytest.fixture
def recording() -> type[RecordingClient]:
    return RecordingClient


@pytest.fixture
def critical_bundle(tmp_path: Path) -> Bundle:
    """The dairy bundle with ``log_reason`` marked outcome-critical (its outcome check)."""
    scen = copy.deepcopy(SCENARIO)
    scen["action_checks"][1]["critical"] = True
    return load_bundle(write_bundle(tmp_path / "critical", scen))


@pytest.fixture
def trace_of() -> Callable[..., Trace]:
    """:func:`build_trace` (tests cannot import conftest under ``--import-mode=importlib``)."""
    return build_trace
