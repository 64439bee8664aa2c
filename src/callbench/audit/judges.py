"""Judges on known answers: grade the audit's own traces,
whose right labels are known, and measure each judge on them.

Known answers: on a *reference replay* (the scenario's correct call, every action check met) every
criterion is expected ``met``; on a *null-floor* trace (a do-nothing candidate) every criterion is
expected as its ``null_floor`` field says: ``not_met`` by default, ``met`` for a criterion a
do-nothing call satisfies (e.g. "never reads out the card number"), ``any`` for none (left out); on
a *contrastive* trace (:mod:`callbench.audit.contrast`) as the bundle declares
(:func:`~callbench.audit.contrast.contrast_expectation`), and not scored where it declares nothing.
Task criteria measure the task judge; conversation criteria the conversation judge. Ratings have
no known answer and are not counted. A ``partial`` label never agrees; a judge error is counted
apart and enters no denominator; a ``not_applicable`` label is left out. Skipped traces are not
graded.

Per judge: plain accuracy (agree / n), recall per known class, balanced accuracy with intervals,
the same by diagnostic and by trace kind, the share of null-trace criteria called met, and the gate
(:mod:`callbench.audit.validation`). The judges are called through
:func:`callbench.grade.grader.grade_trace`, exactly as a run grades.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime

from callbench.audit.contrast import contrast_expectation, contrast_kind
from callbench.audit.store import (
    ContrastCount,
    ExpectationTally,
    FloorScore,
    JudgeAccuracy,
    JudgeAudit,
    JudgeRole,
)
from callbench.audit.validation import (
    MAX_NULL_MET,
    MIN_BALANCED_ACCURACY,
    Observation,
    balanced_accuracy_interval,
    class_split,
    gate,
    rate,
)
from callbench.bundle.models import CONTRAST_KINDS, Bundle, Criterion, Pillar
from callbench.grade.grader import grade_trace
from callbench.grade.models import EpisodeGrade, Label
from callbench.grade.prompts import PROMPT_VERSION
from callbench.models.base import ModelClient
from callbench.sim.episode import role_info
from callbench.trace import Trace

REFERENCE_TRACES = "reference"

__all__ = ["AuditJudges", "JudgeAccuracy", "JudgeAudit", "audit_judges", "expected_label"]


JUDGE_OPTIONS: dict[str, str] = {"task_judge": "--task-judge", "conversation_judge": "--conversation-judge"}
"""The ``callbench audit`` option that names each judge role."""


@dataclass
class AuditJudges:
    """The judges to audit (clients built as for ``callbench run``), how many traces to grade at
    once, and the gate's thresholds (:mod:`callbench.audit.validation`). ``sources`` says where
    each role's judge was named, where an ``audit.judge_gate`` problem is located (default: the
    ``callbench audit`` options ``--task-judge`` and ``--conversation-judge``)."""

    task_judge: ModelClient
    conversation_judge: ModelClient
    concurrency: int = 4
    min_balanced_accuracy: float = MIN_BALANCED_ACCURACY
    max_null_met: float = MAX_NULL_MET
    sources: dict[str, str] = field(default_factory=lambda: dict(JUDGE_OPTIONS))


def expected_label(criterion: Criterion, traces: str, bundle: Bundle | None = None) -> str | None:
    """The known label of ``criterion`` on a trace of kind ``traces``: ``met`` on the reference
    replay (``reference``); on a contrastive kind (``no_tools``, ``wrong_argument``, ``cut_short``)
    what ``bundle`` declares (:func:`~callbench.audit.contrast.contrast_expectation`; None without
    a bundle); on any other (a floor agent's spec) the criterion's ``null_floor``. None = no known
    answer (not scored)."""
    if traces == REFERENCE_TRACES:
        return "met"
    if traces in CONTRAST_KINDS:
        return None if bundle is None else contrast_expectation(bundle, criterion, traces)
    return None if criterion.null_floor == "any" else criterion.null_floor


def _kind(trace: Trace) -> str:
    spec = trace.candidate.spec
    if spec == "scripted:reference":
        return REFERENCE_TRACES
    return contrast_kind(spec) or spec


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _accuracy(
    role: JudgeRole, client: ModelClient, obs: list[Observation], errors: list[tuple[str, str]],
    episodes: int, scenarios: int, judges: AuditJudges,
) -> JudgeAccuracy:
    rows: dict[tuple[str, str], ExpectationTally] = {}
    for o in obs:
        t = rows.setdefault((o.kind, o.expected), ExpectationTally(traces=o.kind, expected=o.expected))
        t.n += 1
        t.agree += o.agrees
        t.labels[o.label] = t.labels.get(o.label, 0) + 1
    for kind, expected in errors:
        t = rows.setdefault((kind, expected), ExpectationTally(traces=kind, expected=expected))
        t.judge_errors += 1
    order: dict[str, int] = {REFERENCE_TRACES: 0, **{k: 2 for k in CONTRAST_KINDS}}
    tallies = sorted(rows.values(), key=lambda t: (order.get(t.traces, 1), t.traces, t.expected))
    for t in tallies:
        t.accuracy = t.agree / t.n if t.n else None
    split = class_split(obs)
    low, high = balanced_accuracy_interval(split)
    null = [o for o in obs if o.null and o.expected == "not_met"]
    null_met = rate(sum(o.label == "met" for o in null), len(null))
    agree = sum(o.agrees for o in obs)
    return JudgeAccuracy(
        role=role,
        judge=role_info(client),
        episodes=episodes,
        scenarios=scenarios,
        by_expectation=tallies,
        n=len(obs),
        agree=agree,
        accuracy=agree / len(obs) if obs else None,
        judge_errors=len(errors),
        classes=split,
        balanced_accuracy=split.balanced_accuracy,
        balanced_accuracy_low=low,
        balanced_accuracy_high=high,
        by_diagnostic={
            d: class_split(o for o in obs if o.diagnostic == d) for d in sorted({o.diagnostic for o in obs})
        },
        by_kind={
            k: rate(sum(o.agrees for o in obs if o.kind == k), sum(o.kind == k for o in obs))
            for k in sorted({o.kind for o in obs}, key=lambda k: (order.get(k, 1), k))
        },
        null_met=null_met,
        gate=gate(split, null_met, min_balanced_accuracy=judges.min_balanced_accuracy,
                  max_null_met=judges.max_null_met),
    )


async def audit_judges(
    bundle: Bundle,
    traces: list[Trace],
    judges: AuditJudges,
    *,
    floor_candidates: Collection[str] = (),
    contrast: dict[str, ContrastCount] | None = None,
    null_candidates: Collection[str] | None = None,
) -> JudgeAudit:
    """Grade ``traces`` (the audit's reference-replay, floor and contrastive traces of ``bundle``)
    with ``judges`` and return each judge's measures on the known answers (module docstring).
    ``floor_candidates``: the floor agents' specs, whose mean scores with these judges are kept
    (``JudgeAudit.floor_scores``); ``contrast``: how many contrastive traces of each kind were
    derived, saved as given; ``null_candidates``: the do-nothing agents whose traces are known
    answers (None: every trace that is neither reference nor contrastive); other floor agents'
    traces (gaming agents, whose right labels are not known) are graded for their scores only.
    Raises :class:`~callbench.grade.action_checks.GradeError` for a
    trace not made on ``bundle``."""
    usable = [t for t in traces if not t.skipped]
    sem = asyncio.Semaphore(max(1, judges.concurrency))

    async def one(t: Trace) -> tuple[Trace, EpisodeGrade]:
        async with sem:
            return t, await grade_trace(t, bundle, judges.task_judge, judges.conversation_judge)

    graded = await asyncio.gather(*(one(t) for t in usable))
    obs: dict[JudgeRole, list[Observation]] = {"task_judge": [], "conversation_judge": []}
    errors: dict[JudgeRole, list[tuple[str, str]]] = {"task_judge": [], "conversation_judge": []}
    floor: dict[str, list[EpisodeGrade]] = {}
    for trace, grade in graded:
        _, scen = bundle.scenario(trace.scenario_id)
        crit = {c.id: c for c in scen.criteria}
        kind = _kind(trace)
        is_null = kind != REFERENCE_TRACES and kind not in CONTRAST_KINDS
        if trace.candidate.spec in floor_candidates:
            floor.setdefault(trace.candidate.spec, []).append(grade)
        if is_null and null_candidates is not None and trace.candidate.spec not in null_candidates:
            continue  # no known answer on a gaming agent's call
        for item in grade.items:
            if item.source not in ("task_criterion", "conversation_criterion") or item.id not in crit:
                continue
            c = crit[item.id]
            expected = expected_label(c, kind, bundle)
            if expected is None or item.label is None or item.label == Label.NOT_APPLICABLE:
                continue
            role: JudgeRole = "task_judge" if c.pillar == Pillar.TASK else "conversation_judge"
            if item.label == Label.JUDGE_ERROR:
                errors[role].append((kind, expected))
                continue
            obs[role].append(Observation(kind, is_null, str(c.diagnostic), expected, str(item.label)))
    out = JudgeAudit(
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        episodes=len(usable),
        scenario_ids=sorted({t.scenario_id for t in usable}),
        scenarios_in_bundle=len(bundle.scenarios()),
        prompt_version=PROMPT_VERSION,
        contrast=dict(contrast or {}),
        floor_scores={
            spec: FloorScore(
                episodes=len(gs),
                overall=_mean([g.overall for g in gs]),
                task=_mean([g.task_score for g in gs]),
                conversation=_mean([g.conversation_score for g in gs]),
            )
            for spec, gs in sorted(floor.items())
        },
    )
    roles: tuple[tuple[JudgeRole, ModelClient], ...] = (
        ("task_judge", judges.task_judge),
        ("conversation_judge", judges.conversation_judge),
    )
    for role, client in roles:
        out.judges[role] = _accuracy(
            role, client, obs[role], errors[role], len(usable), len(out.scenario_ids), judges
        )
    return out
