"""Validator audit: replay a scenario's reference path through its fixtures and action checks.

The rule: "a replay of each scenario's reference path through the fixtures and the action
checks, which must meet every check (a scenario whose own correct path fails is broken data)".
The same semantics as the simulation's backend (:class:`~callbench.bundle.fixtures.ResolvedFixtures`:
the j-th call of a tool meets the j-th queue entry) and the grader
(:func:`~callbench.bundle.checks.evaluate_checks`). The full audit through sim and grade lives in
``callbench.runs``; this one is static and needs no model.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from callbench.bundle.checks import CallRecord, evaluate_checks
from callbench.bundle.fixtures import NO_DATA, FixtureAnswer, ResolvedFixtures
from callbench.bundle.matchers import match_fields
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.references import ReferenceError_, find_references
from callbench.bundle.state.engine import StateStore
from callbench.bundle.validate.outcomes import claims_success, failed_result
from callbench.bundle.validate.tools import Report, audit_arguments


def audit_reference_path(agent: LoadedAgent, scen: Scenario, report: Report) -> None:
    """Check and replay ``scen.reference_path`` (nothing to do when it is absent).

    Codes: ``reference.unknown_tool`` (a call of a tool the agent lacks), ``reference.args_invalid``
    (arguments that do not fit the tool's JSON Schema), ``reference.length`` (the path must have
    ``len(plan) + 1`` turns when the agent ends the call, or ``len(plan)`` when the caller hangs
    up: turn 0 greets, turn k answers caller turn k, which expresses plan step k),
    ``reference.after_end`` (a tool call, a later turn, or speech after the tool results, following
    a call-ending tool call whose result meets its success condition: the episode ends there, so
    none of it would happen), ``reference.check_unmet`` (an action check the replayed calls do not
    meet, with the checker's reason). A reference path must also *succeed*:
    ``reference.fixture_mismatch`` (a call answered by its queue entry's mismatch response: the
    arguments do not meet the entry's matchers, with the matcher's reason, and no later call of the
    same tool gets its authored response; a rejected wrong digit that the caller then corrects is
    a recovery, not a problem), ``reference.fixture_default`` (a call beyond a non-empty queue,
    answered by the generic no-record answer or by a default that reports a failure instead of an
    authored entry; an authored successful default, e.g. ``end_call``'s ``{status: ended}``, is
    intended), ``reference.end_unmet`` (a call-ending tool is called but no call of it returns a
    result meeting its success condition, so the episode would not end there: paper, section 4),
    ``reference.success_after_failure`` (speech after an authored failed tool result,
    :func:`callbench.bundle.validate.outcomes.failed_result`, with no successful result in between, claims
    the action succeeded, :func:`callbench.bundle.validate.outcomes.claims_success`). The replay is skipped
    when the fixtures hold an unresolved reference or the checks have an ``after`` cycle (both
    reported by other audits). Tools the agent's state answers are answered from a fresh state,
    the others from the fixtures.
    """
    path = scen.reference_path
    if path is None:
        return
    cfg = agent.config
    tools = {t.name: t for t in cfg.tools}
    n_plan = len(scen.brief.plan)
    if len(path) not in (n_plan, n_plan + 1):
        report("reference_path", "reference.length",
               f"{len(path)} turns for {n_plan} plan steps: expected {n_plan + 1} (turn 0 greets, turn k "
               f"answers plan step k, the agent ends the call) or {n_plan} (the caller ends the call)")
    for t, turn in enumerate(path):
        for k, tc in enumerate(turn.tool_calls):
            where = f"reference_path.{t}.tool_calls.{k}"
            if tc.name not in tools:
                report(f"{where}.name", "reference.unknown_tool",
                       f"tool {tc.name!r} is not one of agent {cfg.id!r}'s tools")
            else:
                audit_arguments(tc.arguments, tools[tc.name], cfg, f"{where}.arguments", report)
    try:
        fixtures = ResolvedFixtures(cfg, scen)
    except (ReferenceError_, ValidationError, ValueError):
        return
    state = (StateStore(agent.state_tables, cfg.state, agent.state_sha256 or "")
             if cfg.state is not None and agent.state_tables is not None else None)
    ending = {e.tool: e for e in cfg.call_ending_tools}
    calls: list[CallRecord] = []
    counts: dict[str, int] = {}
    ended: str | None = None
    ending_calls: list[tuple[str, str, Any]] = []  # (where, tool, result) of failed call-ending calls
    failure: tuple[str, str, str] | None = None  # (where, tool, why) of the last failed tool result
    mismatches: dict[str, list[tuple[str, int, FixtureAnswer]]] = {}  # not recovered, by tool
    for t, turn in enumerate(path):
        if ended is not None and (turn.before_tools or turn.speech or turn.tool_calls):
            report(f"reference_path.{t}", "reference.after_end",
                   f"turn {t} comes after the call already ended at {ended}")
            break
        if failure is not None:
            _claim(turn.before_tools, f"reference_path.{t}.before_tools", failure, report)
        for k, tc in enumerate(turn.tool_calls):
            where = f"reference_path.{t}.tool_calls.{k}"
            if ended is not None:
                report(where, "reference.after_end",
                       f"call of {tc.name!r} comes after the call already ended at {ended}")
                break
            j = counts.get(tc.name, 0)
            counts[tc.name] = j + 1
            if state is not None and state.handles(tc.name):
                # a stateful tool: its typed errors are the scenario's business, not a
                # fixture mismatch; success-after-failure still applies to its result
                result, outcome = state.call(tc.name, tc.arguments).result, "authored"
            else:
                ans = fixtures.answer(tc.name, tc.arguments, j)
                result, outcome = ans.result, ans.outcome
                if ans.outcome == "mismatch":
                    mismatches.setdefault(tc.name, []).append((where, j, ans))
                elif ans.outcome == "authored":
                    mismatches.pop(tc.name, None)  # recovered: a later call got its authored response
                else:
                    _unintended_default(ans, tc.name, j, fixtures.queue_length(tc.name), where, report)
            calls.append(CallRecord(index=len(calls), name=tc.name, arguments=tc.arguments))
            cond = ending.get(tc.name)
            succeeded = isinstance(result, dict) and cond is not None and match_fields(
                cond.success, result).ok
            if succeeded:
                ended = where
            elif cond is not None:
                ending_calls.append((where, tc.name, result))
            why = failed_result(result)
            if why is None:
                failure = None  # a later successful result: speech may report that success
            elif outcome == "authored" and cond is None:
                failure = (where, tc.name, why)  # mismatches and defaults are reported above
        if ended is not None and turn.speech:
            report(f"reference_path.{t}.speech", "reference.after_end",
                   f"speech after the successful call-ending call at {ended} is never heard; "
                   "say goodbye in before_tools")
        elif failure is not None and turn.speech:
            _claim(turn.speech, f"reference_path.{t}.speech", failure, report)
    for name, missed in sorted(mismatches.items()):
        for where, j, ans in missed:
            reason = ans.fields.reason if ans.fields is not None else "the arguments do not parse"
            report(where, "reference.fixture_mismatch",
                   f"call {j + 1} of {name!r} gets the mismatch response {_short(ans.result)} of "
                   f"fixtures.{name}.queue.{j} ({reason}) and no later call of {name!r} gets its authored "
                   "response; the reference path must be the call the fixture was written for: fix its "
                   "arguments or the entry's matchers")
    if ended is None and ending_calls:
        where, name, result = ending_calls[-1]
        cond = ending[name]
        reason = match_fields(cond.success, result).reason if isinstance(result, dict) else (
            "the result is not an object")
        report(where, "reference.end_unmet",
               f"no call of call-ending tool {name!r} in the reference path returns a result meeting its "
               f"success condition (the last one returns {_short(result)}: {reason}); the episode would "
               "not end there: author a successful response or drop the call")
    try:
        results = evaluate_checks(scen, calls)
    except (ReferenceError_, ValidationError, ValueError):
        return
    for i, r in enumerate(results):
        if not r.met:
            report(f"action_checks.{i}", "reference.check_unmet",
                   f"the reference path does not meet check {r.id!r}: {r.reason}")


def audit_reference_refs(scen: Scenario, report: Report) -> None:
    """Code ``ref.misplaced``: a ``${caller...}``/``${state...}`` reference outside fixtures and
    action-check arguments. Only those resolve; anywhere else the literal text would reach the
    caller, the candidate or a grader."""
    msg = "is not resolved here; references work only in fixtures and action-check arguments"
    if "${" in scen.model_dump_json(exclude={"fixtures", "action_checks"}):
        data = scen.model_dump(by_alias=True, exclude={"fixtures", "action_checks"})
        for where, ref in find_references(data):
            report(where, "ref.misplaced", f"{ref} {msg}")
    for i, c in enumerate(scen.action_checks):
        if "${" in c.model_dump_json(exclude={"args"}):
            rest = c.model_dump(by_alias=True, exclude={"args"})
            for where, ref in find_references(rest, f"action_checks.{i}"):
                report(where, "ref.misplaced", f"{ref} {msg}")


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unintended_default(ans: FixtureAnswer, name: str, j: int, queued: int, where: str,
                        report: Report) -> None:
    """Report a reference call beyond a non-empty queue answered by no record or a failure."""
    if queued > 0 and (ans.result == NO_DATA or failed_result(ans.result)):
        report(where, "reference.fixture_default",
               f"call {j + 1} of {name!r} comes after the {queued} entr{'y' if queued == 1 else 'ies'} "
               f"of fixtures.{name}.queue and gets the default {_short(ans.result)}; add a queue entry "
               "for it or drop the call")


def _claim(text: str | None, where: str, failure: tuple[str, str, str], report: Report) -> None:
    """Report ``text`` when it claims success after the failed result ``failure``."""
    if not text:
        return
    claim = claims_success(text)
    if claim is not None:
        fwhere, name, why = failure
        report(where, "reference.success_after_failure",
               f"says {claim!r} (success) after {name!r} failed at {fwhere} ({why}); a correct call "
               "reports the failure truthfully, or the fixture must answer with success")
