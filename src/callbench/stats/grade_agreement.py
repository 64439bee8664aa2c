"""Agreement between two grade sets of one run (``callbench agreement``): two judges, one judge run
twice (test-retest), or a judge and people (a grade set imported with ``callbench labels import``).

Items compared: judged items only, i.e. task and conversation criteria (labels met / partial /
not met, unweighted Cohen's kappa) and conversation ratings (1-5, quadratic-weighted kappa);
action checks are deterministic code, not judgements, and are left out. An item is identified by
``(episode_id, source, item id)``. Statistics and intervals: :mod:`callbench.stats.agreement`
(episodes are the resampled clusters).

Excluded and counted (``excluded``): episodes graded in only one set, or skipped in either;
items present in only one set; items labelled ``judge_error`` in either set; criteria
``not_applicable`` in either set (and ratings without a rating value).

Groups: all criteria, all ratings, per pillar (``task``: task criteria; ``conversation``:
conversation criteria and ratings) and per diagnostic (each diagnostic's criteria and ratings; the
pillar and diagnostic are those of grade set A's item). A group with no shared item is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from callbench.grade.models import EpisodeGrade, GradedItem, Label
from callbench.stats.agreement import AgreementResult, Interval, Weights, agreement
from callbench.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_SAMPLES, derive_rng

CRITERION_LABELS = ["met", "partial", "not_met"]
RATING_VALUES = ["1", "2", "3", "4", "5"]
RATING_WEIGHTS: Weights = "quadratic"
CRITERION_SOURCES = ("task_criterion", "conversation_criterion")


class CriteriaAgreement(BaseModel):
    """Criterion labels: percent agreement (0..100) and unweighted Cohen's kappa with intervals."""

    n: int
    n_episodes: int
    percent_agreement: float | None
    percent_agreement_interval: Interval | None
    kappa: float | None
    interval: Interval | None
    undefined_reason: str | None = None
    categories: list[str]
    confusion: list[list[int]]  # rows: grade set A, columns: grade set B


class RatingsAgreement(BaseModel):
    """Ratings 1-5: exact percent agreement and weighted kappa (``weights``) with intervals."""

    n: int
    n_episodes: int
    percent_agreement: float | None
    percent_agreement_interval: Interval | None
    weighted_kappa: float | None
    weights: Weights
    interval: Interval | None
    undefined_reason: str | None = None
    categories: list[str]
    confusion: list[list[int]]


class Excluded(BaseModel):
    """What was left out of the comparison, by reason."""

    episodes_only_in_a: int = 0
    episodes_only_in_b: int = 0
    episodes_skipped: int = 0
    items_only_in_a: int = 0
    items_only_in_b: int = 0
    judge_error: int = 0
    not_applicable: int = 0


class GroupAgreement(BaseModel):
    criteria: CriteriaAgreement | None = None
    ratings: RatingsAgreement | None = None


class GradeSetAgreement(BaseModel):
    """The whole ``callbench agreement --json`` output."""

    grade_set_a: str
    grade_set_b: str
    description_a: str = ""  # who produced grade set A (judges, or a human labels file)
    description_b: str = ""
    seed: int
    n_samples: int
    confidence: float
    criteria: CriteriaAgreement
    ratings: RatingsAgreement
    by_pillar: dict[str, GroupAgreement] = Field(default_factory=dict)
    by_diagnostic: dict[str, GroupAgreement] = Field(default_factory=dict)
    excluded: Excluded = Field(default_factory=Excluded)


class _Pair(BaseModel):
    episode_id: str
    kind: str  # "criterion" | "rating"
    pillar: str
    diagnostic: str
    a: str
    b: str


def _key(item: GradedItem) -> tuple[str, str]:
    return (item.source, item.id)


def _value(item: GradedItem) -> str | None:
    """The comparable label of a judged item, or None when it is not comparable."""
    if item.label == Label.JUDGE_ERROR:
        return None
    if item.source == "rating":
        return None if item.rating is None or item.label == Label.NOT_APPLICABLE else str(item.rating)
    if item.label in (Label.MET, Label.PARTIAL, Label.NOT_MET):
        return item.label.value
    return None


def pair_items(
    grades_a: Sequence[EpisodeGrade], grades_b: Sequence[EpisodeGrade]
) -> tuple[list[_Pair], Excluded]:
    """The judged items graded in both sets, and the counts of what was excluded."""
    ex = Excluded()
    by_a = {g.episode_id: g for g in grades_a}
    by_b = {g.episode_id: g for g in grades_b}
    ex.episodes_only_in_a = len(set(by_a) - set(by_b))
    ex.episodes_only_in_b = len(set(by_b) - set(by_a))
    pairs: list[_Pair] = []
    for eid in sorted(set(by_a) & set(by_b)):
        ga, gb = by_a[eid], by_b[eid]
        if ga.skipped or gb.skipped:
            ex.episodes_skipped += 1
            continue
        items_a = {_key(i): i for i in ga.items if i.source != "action_check"}
        items_b = {_key(i): i for i in gb.items if i.source != "action_check"}
        ex.items_only_in_a += len(set(items_a) - set(items_b))
        ex.items_only_in_b += len(set(items_b) - set(items_a))
        for key in sorted(set(items_a) & set(items_b)):
            ia, ib = items_a[key], items_b[key]
            if Label.JUDGE_ERROR in (ia.label, ib.label):
                ex.judge_error += 1
                continue
            va, vb = _value(ia), _value(ib)
            if va is None or vb is None:
                ex.not_applicable += 1
                continue
            pairs.append(
                _Pair(
                    episode_id=eid,
                    kind="rating" if ia.source == "rating" else "criterion",
                    pillar=ia.pillar.value,
                    diagnostic=ia.diagnostic.value,
                    a=va,
                    b=vb,
                )
            )
    return pairs, ex


def _result(
    pairs: list[_Pair], kind: str, seed: int, labels: tuple[str, ...], **boot: Any
) -> AgreementResult:
    cats = RATING_VALUES if kind == "rating" else CRITERION_LABELS
    return agreement(
        [p.a for p in pairs],
        [p.b for p in pairs],
        [p.episode_id for p in pairs],
        cats,
        derive_rng(seed, "agreement", kind, *labels),
        weights=RATING_WEIGHTS if kind == "rating" else None,
        **boot,
    )


def _criteria(r: AgreementResult) -> CriteriaAgreement:
    return CriteriaAgreement(
        n=r.n, n_episodes=r.n_episodes, percent_agreement=r.percent_agreement,
        percent_agreement_interval=r.percent_agreement_interval, kappa=r.kappa, interval=r.interval,
        undefined_reason=r.undefined_reason, categories=r.categories, confusion=r.confusion,
    )  # fmt: skip


def _ratings(r: AgreementResult) -> RatingsAgreement:
    return RatingsAgreement(
        n=r.n, n_episodes=r.n_episodes, percent_agreement=r.percent_agreement,
        percent_agreement_interval=r.percent_agreement_interval, weighted_kappa=r.kappa,
        weights=RATING_WEIGHTS, interval=r.interval, undefined_reason=r.undefined_reason,
        categories=r.categories, confusion=r.confusion,
    )  # fmt: skip


def _group(pairs: list[_Pair], seed: int, labels: tuple[str, ...], **boot: Any) -> GroupAgreement:
    crit = [p for p in pairs if p.kind == "criterion"]
    rate = [p for p in pairs if p.kind == "rating"]
    return GroupAgreement(
        criteria=_criteria(_result(crit, "criterion", seed, labels, **boot)) if crit else None,
        ratings=_ratings(_result(rate, "rating", seed, labels, **boot)) if rate else None,
    )


def grade_set_agreement(
    grades_a: Sequence[EpisodeGrade],
    grades_b: Sequence[EpisodeGrade],
    *,
    grade_set_a: str,
    grade_set_b: str,
    seed: int,
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> GradeSetAgreement:
    """Compare two grade sets' episode grades (module docstring). Every interval's generator
    derives from ``seed`` and the group's labels. Raises ``ValueError`` for bad bootstrap
    settings or a negative seed."""
    pairs, excluded = pair_items(grades_a, grades_b)
    boot: dict[str, Any] = {"n_samples": n_samples, "confidence": confidence}
    top = _group(pairs, seed, ("all",), **boot)
    crit = top.criteria or _criteria(_result([], "criterion", seed, ("all",), **boot))
    rate = top.ratings or _ratings(_result([], "rating", seed, ("all",), **boot))
    out = GradeSetAgreement(
        grade_set_a=grade_set_a, grade_set_b=grade_set_b, seed=seed, n_samples=n_samples,
        confidence=confidence, criteria=crit, ratings=rate, excluded=excluded,
    )  # fmt: skip
    for pillar in sorted({p.pillar for p in pairs}):
        out.by_pillar[pillar] = _group(
            [p for p in pairs if p.pillar == pillar], seed, ("pillar", pillar), **boot
        )
    for diag in sorted({p.diagnostic for p in pairs}):
        out.by_diagnostic[diag] = _group(
            [p for p in pairs if p.diagnostic == diag], seed, ("diagnostic", diag), **boot
        )
    return out
