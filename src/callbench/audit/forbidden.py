"""Rule-breaking never beats doing nothing: for every negative action check (``count.max == 0``)
of a scenario, one call that breaks it is graded against no call at all, and a scenario where the
forbidden call meets a larger share of the applicable action-check weight is a located problem
(``audit.forbidden_above_floor``).

The forbidden call is built from the scenario's own texts, so it is the call an agent would make
when it gives in: the arguments of the fixture entry authored for that call when there is one
(:func:`callbench.bundle.checks.forbidden_record`), else the check's own ``eq`` values, on top of
schema-valid filler for the tool's other required properties
(:func:`callbench.models.scripted.gaming.junk_arguments`, seeded by the scenario and check ids so
the audit is deterministic). Graded with :func:`callbench.bundle.checks.evaluate_checks`, the
same semantics as the grader's.
"""

from __future__ import annotations

import random
from typing import Any

from callbench.bundle.checks import CallRecord, CheckResult, evaluate_checks, forbidden_record
from callbench.bundle.fixtures import resolve_matchers
from callbench.bundle.loader import Problem
from callbench.bundle.matchers import Eq, match_fields
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.models.scripted.gaming import _seed, junk_arguments


def _share(scen: Scenario, results: list[CheckResult]) -> float:
    """Met weight / applicable weight (0.0 when nothing applies), as the audit's floor share."""
    weight = {c.id: c.importance for c in scen.action_checks}
    total = sum(weight[r.id] for r in results if r.applicable)
    met = sum(weight[r.id] for r in results if r.applicable and r.met)
    return met / total if total else 0.0


def forbidden_calls(agent: LoadedAgent, scen: Scenario) -> list[tuple[str, CallRecord]]:
    """(negative check id, one call that breaks it) for each negative check of ``scen`` whose tool
    the agent has. Raises ``ValueError`` when a reference does not resolve."""
    facts, state = scen.brief.known_facts, scen.hidden_state
    tools = {t.name: t for t in agent.config.tools}
    out: list[tuple[str, CallRecord]] = []
    for c in scen.action_checks:
        if c.count.max != 0 or c.tool not in tools:
            continue
        matchers = resolve_matchers(c.args, facts, state, f"action_checks.{c.id}.args")
        rng = random.Random(_seed("forbidden", scen.id, c.id))
        args: dict[str, Any] = junk_arguments(tools[c.tool].parameters, rng, set())
        own = {k: m.eq for k, m in matchers.items() if isinstance(m, Eq)}
        queue = scen.fixtures[c.tool].queue if c.tool in scen.fixtures else []
        for i, e in enumerate(queue):
            rec = resolve_matchers(e.args, facts, state, f"fixtures.{c.tool}.queue.{i}.args")
            example = {k: m.eq for k, m in rec.items() if isinstance(m, Eq)}
            hit = match_fields(matchers, {**args, **example}).ok
            if e.args and hit and forbidden_record(c.tool, rec, scen):
                own = {**example, **own}
                break
        out.append((c.id, CallRecord(index=0, name=c.tool, arguments={**args, **own})))
    return out


def find_forbidden_gains(agent: LoadedAgent, scen: Scenario, file: str) -> list[Problem]:
    """``audit.forbidden_above_floor`` for each negative check of ``scen`` whose breaking call
    (:func:`forbidden_calls`), alone, meets a larger share of the applicable action-check weight
    than no call at all; the message names the check, the call's arguments and the checks met.
    Never raises on bundle content: a reference that does not resolve is validate's problem."""
    try:
        nothing = _share(scen, evaluate_checks(scen, []))
        calls = forbidden_calls(agent, scen)
    except ValueError:
        return []
    out: list[Problem] = []
    index = {c.id: i for i, c in enumerate(scen.action_checks)}
    for cid, call in calls:
        results = evaluate_checks(scen, [call])
        share = _share(scen, results)
        if share > nothing:
            met = ", ".join(r.id for r in results if r.applicable and r.met)
            out.append(
                Problem(
                    file=file,
                    path=f"action_checks.{index[cid]}",
                    code="audit.forbidden_above_floor",
                    message=f"{scen.id}: a {call.name} call that breaks {cid!r} meets {share:.0%} of the "
                    f"applicable action-check weight, doing nothing {nothing:.0%} (met: {met}): a guard "
                    "must count only calls that reach a record the scenario intends (pin its arguments)",
                )
            )
    return out
