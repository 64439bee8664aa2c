"""State checks: the final state of a call against the state its reference path
produces, with a readable difference.

Shared by the grader (over a trace's saved :class:`~callbench.bundle.state.models.StateRecord`)
and the validator's reference replay. The expected state replays the reference path's tool calls,
in order, through the same engine as the simulation (:class:`StateStore`); calls of tools without
a state operation change nothing and are skipped, and the replay stops after a call-ending tool
whose result meets its success condition (the episode would end there).
"""

from __future__ import annotations

import json
from typing import Any

from callbench.bundle.checks import CheckResult
from callbench.bundle.matchers import match_fields
from callbench.bundle.models import LoadedAgent, Scenario, StateCheck
from callbench.bundle.state.engine import StateStore
from callbench.bundle.state.store import diff_values

MAX_SHOWN = 8
"""Differences listed in a check's reason; the rest are counted."""


def replay_reference(agent: LoadedAgent, scen: Scenario) -> StateStore:
    """The state after the reference path of ``scen`` (the initial state when it has none).
    Raises ``ValueError`` when the agent declares no state or its tables are not loaded."""
    if agent.config.state is None or agent.state_tables is None:
        raise ValueError(f"agent {agent.config.id!r} has no loaded state for a state check")
    store = StateStore(agent.state_tables, agent.config.state, agent.state_sha256 or "")
    ending = {e.tool: e for e in agent.config.call_ending_tools}
    for turn in scen.reference_path or []:
        for call in turn.tool_calls:
            if not store.handles(call.name):
                continue
            ans = store.call(call.name, call.arguments)
            cond = ending.get(call.name)
            ok = isinstance(ans.result, dict) and match_fields(cond.success, ans.result).ok if cond else False
            if ok:
                return store
    return store


def _short(v: Any) -> str:
    text = "(absent)" if v is None else json.dumps(v, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def state_differences(
    base: dict[str, Any],
    expected: dict[str, dict[str, Any]],
    actual: dict[str, dict[str, Any]],
    tables: list[str] | None = None,
    fields: list[str] | None = None,
) -> list[str]:
    """Readable differences between two final states given as changed records over ``base``
    (``table -> key -> record``): one line per differing field, ``table[key].path: expected X, got
    Y``, in table, key and field order. ``tables`` / ``fields`` (``table.path`` prefixes) restrict
    the comparison when non-empty."""
    lines: list[str] = []
    for table in sorted({*expected, *actual}):
        if tables and table not in tables:
            continue
        keys = sorted({*expected.get(table, {}), *actual.get(table, {})})
        for key in keys:
            orig = base.get(table, {}).get(key)
            exp = expected.get(table, {}).get(key, orig)
            act = actual.get(table, {}).get(key, orig)
            for path, e, a in diff_values(exp, act):
                full = f"{table}.{path}" if path else table
                if fields and not any(full == f or full.startswith(f + ".") for f in fields):
                    continue
                lines.append(f"{table}[{key}].{path}: expected {_short(e)}, got {_short(a)}")
    return lines


def evaluate_state_check(
    check: StateCheck,
    base: dict[str, Any],
    expected: dict[str, dict[str, Any]],
    actual: dict[str, dict[str, Any]] | None,
) -> CheckResult:
    """Label one state check: met when the restricted states are equal. ``actual`` None (no state
    saved with the trace) is not met. The reason lists up to :data:`MAX_SHOWN` differences."""
    if actual is None:
        return CheckResult(
            id=check.id, met=False, reason="the trace has no saved state", count=0, cited_events=[]
        )
    diffs = state_differences(base, expected, actual, check.tables or None, check.fields or None)
    if not diffs:
        scope = ", ".join(check.tables + check.fields) or "all tables"
        return CheckResult(
            id=check.id,
            met=True,
            reason=f"final state equals the reference state ({scope})",
            count=0,
            cited_events=[],
        )
    shown = "; ".join(diffs[:MAX_SHOWN])
    more = f"; and {len(diffs) - MAX_SHOWN} more" if len(diffs) > MAX_SHOWN else ""
    return CheckResult(
        id=check.id,
        met=False,
        reason=f"{len(diffs)} difference(s) from the reference state: {shown}{more}",
        count=len(diffs),
        cited_events=[],
    )


def evaluate_state_checks(
    agent: LoadedAgent,
    scen: Scenario,
    actual: dict[str, dict[str, Any]] | None,
    met_action_checks: set[str] | None = None,
) -> list[CheckResult]:
    """Every state check of ``scen`` against ``actual`` (the trace's changed records, or None). A
    check whose ``applies_after`` guards are not all in ``met_action_checks`` is not applicable
    (``applicable=False``, ``met=False``). Raises ``ValueError`` as :func:`replay_reference` does."""
    if not scen.state_checks:
        return []
    expected = replay_reference(agent, scen).touched
    base = agent.state_tables or {}
    out = []
    for c in scen.state_checks:
        res = evaluate_state_check(c, base, expected, actual)
        unmet = [g for g in c.applies_after if g not in (met_action_checks or set())]
        if unmet:
            res = res.model_copy(
                update={
                    "met": False,
                    "applicable": False,
                    "reason": "not applicable: guard check(s) not met: " + ", ".join(unmet),
                }
            )
        out.append(res)
    return out
