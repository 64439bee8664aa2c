"""Judges on known answers (issue 12 item 3c): grade the audit's own traces, whose right labels are
known, and count how often each judge gives them.

Known answers: on a *reference replay* (the scenario's correct call, every action check met) every
criterion is expected ``met``; on a *null-floor* trace (a do-nothing candidate) every criterion is
expected as its ``null_floor`` field says: ``not_met`` by default, ``met`` for a criterion a
do-nothing call satisfies (e.g. "never reads out the card number"), ``any`` for none (left out).
Task criteria measure the task judge; conversation criteria the conversation judge. Ratings have
no known answer and are not counted. A ``partial`` label never agrees; a judge error is counted
apart and enters no denominator. Accuracy = agree / n per (trace kind, expected label), and over
all of them. Skipped traces are not graded.

The judges are called through :func:`callbench.grade.grader.grade_trace`, exactly as a run grades.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from callbench.audit.store import (
    ExpectationTally,
    JudgeAccuracy,
    JudgeAudit,
    JudgeRole,
)
from callbench.bundle.models import Bundle, Criterion, Pillar
from callbench.grade.grader import grade_trace
from callbench.grade.models import EpisodeGrade, Label
from callbench.models.base import ModelClient
from callbench.sim.episode import role_info
from callbench.trace import Trace

REFERENCE_TRACES = "reference"

__all__ = ["AuditJudges", "JudgeAccuracy", "JudgeAudit", "audit_judges", "expected_label"]


@dataclass
class AuditJudges:
    """The judges to audit (clients built as for ``callbench run``) and how many traces to grade at
    once."""

    task_judge: ModelClient
    conversation_judge: ModelClient
    concurrency: int = 4


def expected_label(criterion: Criterion, traces: str) -> str | None:
    """The known label of ``criterion`` on a trace of kind ``traces`` (``reference`` or a null-floor
    candidate spec): ``met`` on the reference replay, else the criterion's ``null_floor`` (None
    for ``any``)."""
    if traces == REFERENCE_TRACES:
        return "met"
    return None if criterion.null_floor == "any" else criterion.null_floor


def _kind(trace: Trace) -> str:
    spec = trace.candidate.spec
    return REFERENCE_TRACES if spec == "scripted:reference" else spec


async def audit_judges(bundle: Bundle, traces: list[Trace], judges: AuditJudges) -> JudgeAudit:
    """Grade ``traces`` (the audit's reference-replay and null-floor traces of ``bundle``) with
    ``judges`` and return each judge's accuracy on the known answers (module docstring). Raises
    :class:`~callbench.grade.action_checks.GradeError` for a trace not made on ``bundle``."""
    usable = [t for t in traces if not t.skipped]
    sem = asyncio.Semaphore(max(1, judges.concurrency))

    async def one(t: Trace) -> tuple[Trace, EpisodeGrade]:
        async with sem:
            return t, await grade_trace(t, bundle, judges.task_judge, judges.conversation_judge)

    graded = await asyncio.gather(*(one(t) for t in usable))
    tallies: dict[tuple[JudgeRole, str, str], ExpectationTally] = {}
    for trace, grade in graded:
        _, scen = bundle.scenario(trace.scenario_id)
        crit = {c.id: c for c in scen.criteria}
        kind = _kind(trace)
        for item in grade.items:
            if item.source not in ("task_criterion", "conversation_criterion") or item.id not in crit:
                continue
            c = crit[item.id]
            expected = expected_label(c, kind)
            if expected is None or item.label is None or item.label == Label.NOT_APPLICABLE:
                continue
            role: JudgeRole = "task_judge" if c.pillar == Pillar.TASK else "conversation_judge"
            t = tallies.setdefault((role, kind, expected), ExpectationTally(traces=kind, expected=expected))
            if item.label == Label.JUDGE_ERROR:
                t.judge_errors += 1
                continue
            t.n += 1
            t.agree += str(item.label) == expected
            t.labels[str(item.label)] = t.labels.get(str(item.label), 0) + 1
    out = JudgeAudit(
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        episodes=len(usable),
        scenario_ids=sorted({t.scenario_id for t in usable}),
    )
    for role, client in (
        ("task_judge", judges.task_judge),
        ("conversation_judge", judges.conversation_judge),
    ):
        rows = sorted(
            (t for (r, _, _), t in tallies.items() if r == role),
            key=lambda t: (t.traces != REFERENCE_TRACES, t.traces, t.expected),
        )
        for t in rows:
            t.accuracy = t.agree / t.n if t.n else None
        n, agree = sum(t.n for t in rows), sum(t.agree for t in rows)
        out.judges[role] = JudgeAccuracy(
            role=role,
            judge=role_info(client),
            episodes=len(usable),
            scenarios=len(out.scenario_ids),
            by_expectation=rows,
            n=n,
            agree=agree,
            accuracy=agree / n if n else None,
            judge_errors=sum(t.judge_errors for t in rows),
        )
    return out
