"""Action checks over a trace (paper: "An expected action names a tool and pins its arguments, call
counts, and ordering with typed matchers"; DESIGN.md "Who sees what": the action checker sees the
trace's tool events and the expected actions, nothing else).

The semantics live in :func:`callbench.bundle.checks.evaluate_checks`, shared with the bundle
validator's reference-path replay; this module only turns tool events into call records and check
results into graded items.
"""

from __future__ import annotations

from callbench.bundle.checks import CallRecord, evaluate_checks
from callbench.bundle.models import LoadedAgent, Pillar, Scenario
from callbench.bundle.state.check import evaluate_state_checks
from callbench.grade.models import LABEL_VALUE, GradedItem, Label
from callbench.trace import Trace


class GradeError(Exception):
    """Grading cannot proceed (bad run folder, bundle mismatch, broken scenario); the message says
    where and what."""


def call_records(trace: Trace) -> list[CallRecord]:
    """Every executed tool event of ``trace`` as a :class:`CallRecord` in call order: event index,
    tool name as the candidate sent it, parsed arguments (None when they did not parse).

    Calls that never reached the backend (``executed=False``: past the per-turn tool-call limit, or
    made after the call had ended) are left out: the action did not happen (docs/decisions.md)."""
    return [
        CallRecord(index=e.index, name=e.name, arguments=e.arguments)
        for e in sorted(trace.tool_events, key=lambda e: e.index)
        if e.executed
    ]


def grade_state_checks(trace: Trace, scenario: Scenario, agent: LoadedAgent | None,
                       met_action_checks: set[str] | None = None) -> list[GradedItem]:
    """One task-pillar item (source ``action_check``) per state check of ``scenario``:
    met when the trace's saved final state equals the state the reference path produces (within the
    check's tables / fields), else not met with the differences; not applicable when one of its
    ``applies_after`` guards is not in ``met_action_checks``; ``cited_events`` = the tool events
    that changed the state. Raises :class:`GradeError` when the scenario has state checks but
    ``agent`` is None or has no loaded state."""
    if not scenario.state_checks:
        return []
    if agent is None:
        raise GradeError(f"scenario {scenario.id!r}: state checks need the agent's state")
    try:
        results = evaluate_state_checks(agent, scenario, None if trace.state is None else trace.state.final,
                                        met_action_checks)
    except ValueError as e:
        raise GradeError(f"scenario {scenario.id!r}: state checks cannot be evaluated: {e}") from None
    writers = [e for e in trace.tool_events if e.state_changes]
    checks = {c.id: c for c in scenario.state_checks}
    items = []
    for res in results:
        label = Label.NOT_APPLICABLE if not res.applicable else Label.MET if res.met else Label.NOT_MET
        items.append(GradedItem(
            id=res.id, source="action_check", pillar=Pillar.TASK, diagnostic=checks[res.id].diagnostic,
            weight=checks[res.id].importance, label=label, r=LABEL_VALUE.get(label), reason=res.reason,
            critical=checks[res.id].is_critical, cited_events=[e.index for e in writers],
            cited_messages=sorted({e.message_index for e in writers}),
        ))
    return items


def grade_action_checks(
    trace: Trace, scenario: Scenario, agent: LoadedAgent | None = None
) -> list[GradedItem]:
    """One task-pillar item per action check of ``scenario``, in scenario order.

    Label met / not_met (r 1 / 0), or not_applicable (r None, enters neither sum) for a guarded
    check whose ``applies_after`` guards were not all met; weight = the check's importance,
    diagnostic = the check's diagnostic, ``cited_events`` = the tool-event indices the check
    counted (or, when none counted, the calls of the tool with other arguments),
    ``cited_messages`` = the assistant messages that made those calls. Raises
    :class:`GradeError` when the scenario's checks cannot be evaluated (an ``after`` /
    ``applies_after`` cycle or an unresolvable reference). The scenario's state checks follow, as
    :func:`grade_state_checks` grades them with ``agent``.
    """
    try:
        results = evaluate_checks(scenario, call_records(trace))
    except ValueError as e:
        raise GradeError(f"scenario {scenario.id!r}: action checks cannot be evaluated: {e}") from None
    by_event = {e.index: e for e in trace.tool_events}
    checks = {c.id: c for c in scenario.action_checks}
    items = []
    for res in results:
        check = checks[res.id]
        label = Label.NOT_APPLICABLE if not res.applicable else Label.MET if res.met else Label.NOT_MET
        cited_msgs = sorted({by_event[i].message_index for i in res.cited_events if i in by_event})
        items.append(
            GradedItem(
                id=res.id,
                source="action_check",
                pillar=Pillar.TASK,
                diagnostic=check.diagnostic,
                weight=check.importance,
                label=label,
                r=LABEL_VALUE.get(label),
                reason=res.reason,
                cited_events=sorted(res.cited_events),
                cited_messages=cited_msgs,
                critical=check.is_critical,
                not_reached=res.not_reached,
            )
        )
    met = {i.id for i in items if i.label == Label.MET}
    return items + grade_state_checks(trace, scenario, agent, met)
