"""Validator audit: replay a scenario's reference path through its fixtures and action checks.

Issue 2 item 5: "a replay of each scenario's reference path through the fixtures and the action
checks, which must meet every check (a scenario whose own correct path fails is broken data)".
The same semantics as the simulation's backend (:class:`~callbench.bundle.fixtures.ResolvedFixtures`:
the j-th call of a tool meets the j-th queue entry) and the grader
(:func:`~callbench.bundle.checks.evaluate_checks`). The full audit through sim and grade lives in
``callbench.runs``; this one is static and needs no model.
"""

from __future__ import annotations

from pydantic import ValidationError

from callbench.bundle.checks import CallRecord, evaluate_checks
from callbench.bundle.fixtures import ResolvedFixtures
from callbench.bundle.matchers import match_fields
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.references import ReferenceError_, find_references
from callbench.bundle.state_engine import StateStore
from callbench.bundle.validate_tools import Report, audit_arguments


def audit_reference_path(agent: LoadedAgent, scen: Scenario, report: Report) -> None:
    """Check and replay ``scen.reference_path`` (nothing to do when it is absent).

    Codes: ``reference.unknown_tool`` (a call of a tool the agent lacks), ``reference.args_invalid``
    (arguments that do not fit the tool's JSON Schema), ``reference.length`` (the path must have
    ``len(plan) + 1`` turns when the agent ends the call, or ``len(plan)`` when the caller hangs
    up: turn 0 greets, turn k answers caller turn k, which expresses plan step k),
    ``reference.after_end`` (a tool call, a later turn, or speech after the tool results, following
    a call-ending tool call whose result meets its success condition: the episode ends there, so
    none of it would happen), ``reference.check_unmet`` (an action check the replayed calls do not
    meet, with the checker's reason). Tools the agent's state answers are answered from a fresh
    state (issue 29), the others from the fixtures. The replay is skipped when the fixtures hold an
    unresolved reference or the checks have an ``after`` cycle (both reported by other audits).
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
    for t, turn in enumerate(path):
        if ended is not None and (turn.before_tools or turn.speech or turn.tool_calls):
            report(f"reference_path.{t}", "reference.after_end",
                   f"turn {t} comes after the call already ended at {ended}")
            break
        for k, tc in enumerate(turn.tool_calls):
            where = f"reference_path.{t}.tool_calls.{k}"
            if ended is not None:
                report(where, "reference.after_end",
                       f"call of {tc.name!r} comes after the call already ended at {ended}")
                break
            j = counts.get(tc.name, 0)
            counts[tc.name] = j + 1
            result = (state.call(tc.name, tc.arguments).result if state is not None and state.handles(tc.name)
                      else fixtures.answer(tc.name, tc.arguments, j).result)
            calls.append(CallRecord(index=len(calls), name=tc.name, arguments=tc.arguments))
            cond = ending.get(tc.name)
            succeeded = isinstance(result, dict) and cond is not None and match_fields(
                cond.success, result).ok
            if succeeded:
                ended = where
        if ended is not None and turn.speech:
            report(f"reference_path.{t}.speech", "reference.after_end",
                   f"speech after the successful call-ending call at {ended} is never heard; "
                   "say goodbye in before_tools")
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
