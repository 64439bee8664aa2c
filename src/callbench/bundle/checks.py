"""Action-check semantics (paper: "An expected action names a tool and pins its arguments, call
counts, and ordering with typed matchers"). Pure functions over a sequence of tool calls, shared by
the grader (over trace tool events) and the validator (over a replayed reference path).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from callbench.bundle.fixtures import resolve_matchers
from callbench.bundle.matchers import Eq, match_fields
from callbench.bundle.models import ActionCheck, Scenario


class CallRecord(BaseModel):
    """One tool call as checks see it: event ``index``, tool ``name``, parsed ``arguments``
    (None when they did not parse: such a call matches no argument matcher, only ``args: {}``)."""

    index: int
    name: str
    arguments: dict[str, Any] | None


class CheckResult(BaseModel):
    """Label of one action check: met or not, why, and the tool-event indices it cites.

    ``applicable`` is False for a guarded check whose ``applies_after`` guards were not all met;
    it then has ``met=False`` and enters neither sum of the score."""

    id: str
    met: bool
    applicable: bool = True
    reason: str
    count: int
    cited_events: list[int]
    first_met_index: int | None = None
    not_reached: list[str] = []
    """Checks this one must come ``after`` that were never met, when that alone failed it: its own
    matching call was made (``cited_events``) but cannot count. Empty when the check failed on its
    own (or was met). Such a failure is one slip counted at the predecessor, not a second error."""


def _order(checks: list[ActionCheck]) -> list[ActionCheck]:
    by_id = {c.id: c for c in checks}
    done: dict[str, None] = {}
    visiting: set[str] = set()

    def visit(c: ActionCheck) -> None:
        if c.id in done:
            return
        if c.id in visiting:
            raise ValueError(f"action check {c.id!r} is in an 'after' / 'applies_after' cycle")
        visiting.add(c.id)
        for a in [*c.after, *c.applies_after]:
            if a in by_id:
                visit(by_id[a])
        visiting.discard(c.id)
        done[c.id] = None

    for c in checks:
        visit(c)
    return [by_id[i] for i in done]


def _example(matchers: dict[str, Any]) -> dict[str, Any] | None:
    """The one argument object a record's matchers describe when every matcher is ``eq`` (a record
    written with references resolves so), else None: nothing to test checks against."""
    out: dict[str, Any] = {}
    for k, m in matchers.items():
        if not isinstance(m, Eq):
            return None
        out[k] = m.eq
    return out


def forbidden_record(tool: str, matchers: dict[str, Any], scenario: Scenario) -> bool:
    """True when a fixture entry of ``tool`` with resolved ``matchers`` was authored for a call the
    scenario forbids: every action check on ``tool`` that pins only arguments the entry pins too, and
    that the entry's own arguments (:func:`_example`) satisfy, is a negative check
    (``count.max == 0``), and there is at least one. A check that pins no argument matches every call
    and says nothing about the entry; nor does one that pins an argument the entry leaves open (the
    entry does not say which value a call there has).
    Rule: a call that reaches such a record must not unlock guarded checks, or breaking a rule
    would score above doing nothing (docs/authoring.md, "Guards count only calls that reach a
    record")."""
    example = _example(matchers)
    if example is None:
        return False
    facts, state = scenario.brief.known_facts, scenario.hidden_state
    matching = [
        c for c in scenario.action_checks
        if c.tool == tool and c.args and set(c.args) <= set(example)
        and match_fields(resolve_matchers(c.args, facts, state, f"action_checks.{c.id}.args"), example).ok
    ]
    return bool(matching) and all(c.count.max == 0 for c in matching)


def record_matchers(scenario: Scenario) -> dict[str, list[dict[str, Any]]]:
    """Per tool, the resolved argument matchers of each fixture entry of ``scenario`` that pins at
    least one argument and is not authored for a forbidden call (:func:`forbidden_record`): the
    records the scenario intends the agent to reach. Raises ``ValueError`` (a
    ``ReferenceError_``) when a reference does not resolve."""
    facts, state = scenario.brief.known_facts, scenario.hidden_state
    out: dict[str, list[dict[str, Any]]] = {}
    for tool, fx in scenario.fixtures.items():
        resolved = [
            resolve_matchers(e.args, facts, state, f"fixtures.{tool}.queue.{i}.args")
            for i, e in enumerate(fx.queue)
            if e.args
        ]
        out[tool] = [m for m in resolved if not forbidden_record(tool, m, scenario)]
    return out


def reaches_record(call: CallRecord, records: dict[str, list[dict[str, Any]]]) -> bool:
    """True when ``call``'s arguments satisfy every matcher of one of its tool's intended fixture
    entries (:func:`record_matchers`: authored, and not for a forbidden call), whatever the entry's
    queue position."""
    if call.arguments is None:
        return False
    return any(match_fields(m, call.arguments).ok for m in records.get(call.name, []))


def n_within(n: int, lo: int, hi: int | None) -> bool:
    """``lo <= n <= hi`` (no upper bound when ``hi`` is None): a check's count bounds."""
    return n >= lo and (hi is None or n <= hi)


def evaluate_checks(scenario: Scenario, calls: list[CallRecord]) -> list[CheckResult]:
    """Evaluate every action check of ``scenario`` over ``calls`` (in call order).

    A call counts for a check when its tool name equals ``check.tool``, its arguments satisfy every
    matcher, and it comes after the first counted call of each check in ``after`` (a check with an
    unmet ``after`` dependency counts nothing). Met when ``count.min <= n <= count.max``. A check
    that fails only because a check it comes ``after`` was never met (its own matching calls would
    have met it) says so: ``not_reached`` names the predecessors and the reason starts
    "not reached: depends on", so one ordering slip is one miss in the diagnostics, not a cascade.

    A check with ``applies_after`` guards is evaluated the same way, then marked not applicable
    (``applicable=False``, ``met=False``) unless every guard is applicable and met. A check that is
    not applicable counts as never met for the checks that come ``after`` it or are guarded by it.
    A *guard* (a check named in another check's ``applies_after``) that pins no argument counts
    only calls that reach a record the scenario intends (:func:`reaches_record`: the arguments match
    one of the tool's fixture entries that pins arguments and was not authored for a forbidden
    call); a guard that pins arguments names its record itself. Either way neither a junk call nor
    a forbidden one unlocks a guarded check (docs/authoring.md "Guards"). Results come in the
    scenario's check order. Raises ``ValueError``
    on a cycle through ``after`` and ``applies_after``, or a fixture reference that does not resolve.
    """
    facts, state = scenario.brief.known_facts, scenario.hidden_state
    guards = {g for c in scenario.action_checks for g in c.applies_after}
    records = record_matchers(scenario) if guards else {}
    first: dict[str, int | None] = {}
    results: dict[str, CheckResult] = {}
    for c in _order(scenario.action_checks):
        matchers = resolve_matchers(c.args, facts, state, f"action_checks.{c.id}.args")
        deps = [first.get(a) for a in c.after]
        start = None if any(d is None for d in deps) else max((d for d in deps if d is not None), default=-1)
        counted: list[int] = []
        near: list[int] = []
        unrecorded: list[int] = []  # a guard's calls that reach no authored record
        if start is not None:
            for call in calls:
                if call.name != c.tool or call.index <= start:
                    continue
                ok = not matchers if call.arguments is None else match_fields(matchers, call.arguments).ok
                if ok and c.id in guards and not matchers and not reaches_record(call, records):
                    unrecorded.append(call.index)
                    ok = False
                (counted if ok else near).append(call.index)
        n = len(counted)
        hi = c.count.max
        met = n_within(n, c.count.min, hi)
        unmet_deps = [a for a in c.after if first.get(a) is None]
        not_reached: list[str] = []
        if start is None:
            own = [call.index for call in calls if call.name == c.tool and (
                not matchers if call.arguments is None else match_fields(matchers, call.arguments).ok)]
            if own and n_within(len(own), c.count.min, hi):
                not_reached = unmet_deps
                near = own
                reason = (f"not reached: depends on {', '.join(unmet_deps)} (never met); its own "
                          f"{len(own)} matching call(s) of {c.tool} cannot count before it")
            else:
                reason = "a check it must come after was never met: " + ", ".join(unmet_deps) + (
                    f"; {len(own)} matching call(s) of {c.tool} anywhere in the call" if own else "")
        elif met:
            reason = f"{n} matching call(s) of {c.tool}"
        elif n < c.count.min:
            other = len(near) - len(unrecorded)
            reason = f"{n} matching call(s) of {c.tool}, need at least {c.count.min}" + (
                f"; {other} call(s) with other arguments" if other else ""
            ) + (
                f"; {len(unrecorded)} call(s) reach no record the scenario's fixtures pin (a guard "
                "without arguments counts only those)" if unrecorded else ""
            )
        else:
            reason = f"{n} matching call(s) of {c.tool}, at most {hi} allowed"
        unguarded = [g for g in c.applies_after if g not in results or not results[g].met]
        applicable = not unguarded
        if not applicable:
            met = False
            reason = "not applicable: guard check(s) not met: " + ", ".join(unguarded)
        first[c.id] = counted[0] if counted and applicable else None
        results[c.id] = CheckResult(
            id=c.id,
            met=met,
            applicable=applicable,
            reason=reason,
            count=n,
            cited_events=counted or near,
            first_met_index=first[c.id],
            not_reached=not_reached if applicable else [],
        )
    return [results[c.id] for c in scenario.action_checks]
