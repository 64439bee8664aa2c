"""The mock backend (paper: "Every tool holds an ordered queue of authored responses. The j-th call
to a tool is matched against the j-th entry ...").

Builds on :class:`callbench.bundle.fixtures.ResolvedFixtures` (queue semantics and ``${caller.*}`` /
``${state.*}`` references) and adds what a live conversation needs:

* argument parsing that records rather than repairs: malformed JSON keeps the raw string and a
  parse error and gets the j-th entry's mismatch response (consuming the entry); arguments encoded
  twice (a JSON string holding a JSON object) are decoded once and flagged ``double_encoded``;
  anything else that is not a JSON object (an array, a number, an empty string, duplicate keys,
  NaN) is a parse error;
* an unknown tool name gets an error result listing the valid tools and consumes no queue entry;
* arguments outside the tool's JSON Schema are located (:mod:`callbench.sim.call_schema`) and,
  unless the agent or the tool accepts them, answered with an ``invalid_arguments`` tool error:
  not executed, no queue entry consumed, no state touched;
* call-ending tools: the returned object is checked against the agent's success condition.

The backend is deterministic; it has a seed only so every component is keyed the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, Literal

from callbench.bundle.fixtures import ResolvedFixtures
from callbench.bundle.matchers import match_fields
from callbench.bundle.models import AgentConfig, Scenario
from callbench.bundle.state.engine import StateStore
from callbench.models.base import ToolSchema
from callbench.models.output_limits import TOOL_ARGUMENT_LIMITS, OutputLimitError, loads_limited
from callbench.sim.call_schema import argument_errors, invalid_arguments_result
from callbench.sim.text import json_text
from callbench.sim.tools import candidate_tools
from callbench.trace import MatcherOutcome, ToolEvent


class ParsedArguments:
    """Result of :func:`parse_arguments`: the object (or None), an error, the double-encoding flag."""

    def __init__(
        self, arguments: dict[str, Any] | None, error: str | None, double_encoded: bool = False
    ) -> None:
        self.arguments = arguments
        self.error = error
        self.double_encoded = double_encoded


def _no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"duplicate key {k!r}")
        seen[k] = v
    return seen


def _bad_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse(raw: str) -> Any:
    return json.loads(raw, object_pairs_hook=_no_dupes, parse_constant=_bad_constant)


def _loads(raw: str) -> Any:
    """``raw`` parsed within :data:`TOOL_ARGUMENT_LIMITS` (a limit exceeded is a ``ValueError``)."""
    return loads_limited(raw, TOOL_ARGUMENT_LIMITS, loads=_parse)


def _kind(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(v), "number"
    )


def parse_arguments(raw: str) -> ParsedArguments:
    """Parse a tool call's raw argument string (RFC 8259 JSON, which must be an object).

    A JSON string whose content is itself a JSON object is decoded once more and flagged. The
    output limits of :data:`~callbench.models.output_limits.TOOL_ARGUMENT_LIMITS` apply (depth,
    size, string length: a parse error naming the limit and where); strings are stored through
    :func:`~callbench.models.output_limits.safe_text`. Never raises; failures come back as
    ``error`` with a plain reason.
    """
    if not raw.strip():
        return ParsedArguments(None, "arguments are empty; expected a JSON object")
    try:
        value = _loads(raw)
    except OutputLimitError as e:
        return ParsedArguments(None, f"arguments exceed the output limits: {e}")
    except ValueError as e:
        return ParsedArguments(None, f"arguments are not valid JSON: {e}")
    if isinstance(value, dict):
        return ParsedArguments(value, None)
    if isinstance(value, str):
        try:
            inner = _loads(value)
        except ValueError as e:
            return ParsedArguments(
                None, f"arguments are a JSON string, not an object, and its content is not JSON: {e}"
            )
        if isinstance(inner, dict):
            return ParsedArguments(inner, None, double_encoded=True)
        return ParsedArguments(
            None, f"arguments are a JSON string holding a JSON {_kind(inner)}, not an object"
        )
    return ParsedArguments(None, f"arguments are a JSON {_kind(value)}, not an object")


def dump_result(result: Any) -> str:
    """The tool message text for a result: JSON (non-ASCII kept as is) in the result's own key order."""
    return json_text(result)


@dataclass(frozen=True)
class CallSite:
    """One tool call and where it sits in the trace: ``index`` (its event's position among the
    trace's tool events), ``candidate_turn``, ``message_index`` (the assistant message holding the
    call) and ``result_message_index`` (the tool message that will hold its result), its id (and
    the model's ``original_tool_call_id`` when that was renamed to be unique), the tool ``name``
    and the ``raw_arguments`` text as the model wrote it."""

    index: int
    candidate_turn: int
    message_index: int
    result_message_index: int
    tool_call_id: str
    original_tool_call_id: str | None
    name: str
    raw_arguments: str

    def event_fields(self, parsed: Any) -> dict[str, Any]:
        """The fields every tool event records about the call itself, with the parsed arguments
        (:func:`parse_arguments`)."""
        return {  # the fields are ints, strings and None: a shallow copy is dataclasses.asdict's result
            **{name: getattr(self, name) for name in _CALL_SITE_FIELDS},
            "arguments": parsed.arguments,
            "parse_error": parsed.error,
            "double_encoded": parsed.double_encoded,
        }


_CALL_SITE_FIELDS = tuple(f.name for f in fields(CallSite))


class Backend:
    """One episode's backend: the agent's tools, the scenario's resolved fixtures and per-tool counts.

    Raises :class:`callbench.bundle.references.ReferenceError_` at construction when a fixture
    reference does not resolve (a bundle error, caught by validation before any run).
    ``fixtures``: the scenario's fixtures already resolved (shared read-only by the episodes of a
    run, :func:`callbench.sim.episode.episode_constants`); resolved here when not given.
    """

    def __init__(self, agent: AgentConfig, scenario: Scenario, seed: int = 0, *,
                 fixtures: ResolvedFixtures | None = None, state: StateStore | None = None,
                 tools: list[ToolSchema] | None = None) -> None:
        self.agent = agent
        self.state = state
        self.seed = seed
        self.fixtures = fixtures if fixtures is not None else ResolvedFixtures(agent, scenario)
        self.tool_names = [t.name for t in agent.tools]
        offered = tools if tools is not None else candidate_tools(agent)
        self.parameters = {t.name: t.parameters for t in offered}
        self.accepts = {t.name for t in agent.tools if (t.schema_errors or agent.schema_errors) == "accept"}
        self.ending = {c.tool: c for c in agent.call_ending_tools}
        self.calls: dict[str, int] = {}

    def dispatch(self, site: CallSite) -> ToolEvent:
        """Answer the tool call at ``site`` and return its event (``result`` is the object sent
        back). Consumes the tool's j-th queue entry unless the tool is unknown or the call is
        rejected for arguments outside the tool's schema (``outcome`` ``schema_error``).
        """
        name = site.name
        parsed = parse_arguments(site.raw_arguments)
        base = site.event_fields(parsed)
        if name not in self.tool_names:
            valid = ", ".join(self.tool_names) or "(none)"
            result = {
                "error": "unknown_tool",
                "message": f"There is no tool named {name!r}. Valid tools: {valid}.",
                "valid_tools": list(self.tool_names),
            }
            return ToolEvent(**base, known_tool=False, outcome="unknown_tool", result=result)
        if parsed.arguments is not None and name in self.parameters:
            errors = argument_errors(self.parameters[name], parsed.arguments)
            if errors and name not in self.accepts:  # rejected as a runtime would: never executed
                return ToolEvent(**base, outcome="schema_error", executed=False, schema_errors=errors,
                                 result=invalid_arguments_result(name, errors))
            base["schema_errors"] = errors
        j = self.calls.get(name, 0)
        self.calls[name] = j + 1
        if self.state is not None and self.state.handles(name):
            return self._stateful(site, base, parsed, j)
        ans = self.fixtures.answer(name, parsed.arguments, j)
        matchers = (
            [MatcherOutcome(field=k, ok=r.ok, reason=r.reason) for k, r in ans.fields.fields.items()]
            if ans.fields is not None
            else []
        )
        outcome = "parse_error" if parsed.error is not None else ans.outcome
        ev = ToolEvent(**base, queue_position=j, outcome=outcome, matcher_results=matchers, result=ans.result)
        cond = self.ending.get(name)
        if cond is not None:
            met = isinstance(ans.result, dict) and match_fields(cond.success, ans.result).ok
            ev.call_ending = True
            ev.success_condition_met = met
            ev.ended_call = met
        return ev

    def _stateful(self, site: CallSite, base: dict[str, Any], parsed: ParsedArguments, j: int) -> ToolEvent:
        """Answer from the agent's state: the operation's result or typed error, with
        every field it changed recorded on the event."""
        assert self.state is not None
        ans = self.state.call(site.name, parsed.arguments)
        outcome = "parse_error" if parsed.error is not None else "state_error" if ans.error else "state"
        ev = ToolEvent(**base, queue_position=j, outcome=outcome, result=ans.result,
                       state_changes=ans.changes)
        cond = self.ending.get(site.name)
        if cond is not None:
            met = isinstance(ans.result, dict) and match_fields(cond.success, ans.result).ok
            ev.call_ending = True
            ev.success_condition_met = met
            ev.ended_call = met
        return ev

    def refuse(
        self, site: CallSite, outcome: Literal["limit_reached", "after_call_ended"], limit: int = 0
    ) -> ToolEvent:
        """Record a call that is answered without reaching the fixtures (no queue entry consumed):
        ``limit_reached`` (the turn's tool-call limit ``limit`` was used up) or ``after_call_ended``
        (an earlier call in the same message already ended the call)."""
        if outcome == "limit_reached":
            result = {
                "error": "tool_call_limit_reached",
                "message": f"Not executed: the limit of {limit} tool calls in one turn was reached. "
                "Answer the caller now.",
            }
        else:
            result = {"error": "call_already_ended", "message": "Not executed: the call had already ended."}
        return ToolEvent(
            **site.event_fields(parse_arguments(site.raw_arguments)),
            known_tool=site.name in self.tool_names,
            outcome=outcome,
            executed=False,
            result=result,
        )
