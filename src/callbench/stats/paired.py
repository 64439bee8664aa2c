"""Paired comparison of two candidates on the scenarios both completed.

Procedure (DESIGN.md "Confidence intervals"; paper: "Paired comparisons resample within-scenario
score differences on the cases both models completed"):

1. For each candidate, a scenario's score is the mean over its repeats with a defined value
   (skipped episodes and undefined scores are excluded first).
2. Only scenarios (keyed by ``(agent_id, scenario_id)``) where *both* candidates have a score are
   kept; the others are counted in ``only_a``/``only_b``.
3. The within-scenario difference is ``d = score_a - score_b``. The estimate is the mean of d.
4. The interval comes from the hierarchical bootstrap of :mod:`callbench.stats.bootstrap` over d
   with two levels: agents, then scenarios within each drawn agent (the repeat level is already
   averaged into d).
5. A comparison on fewer than :data:`MIN_PAIRED_SCENARIOS` shared scenarios is marked
   ``too_few`` (every output shows the mark): with three scenarios a percentile interval
   "excludes 0" by chance far more often than its confidence says.
6. Wins/losses/ties count scenarios with ``d > tol``, ``d < -tol`` and ``|d| <= tol``;
   ``tol = 1e-9`` score points by default, which only absorbs floating-point noise (scores are
   exact multiples of small fractions, so any real difference is far larger).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel, computed_field

from callbench.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    build_structure,
    hierarchical_sample_means,
    percentile_interval,
)

TIE_TOLERANCE = 1e-9
MIN_PAIRED_SCENARIOS = 10
"""Fewer shared scenarios than this make a paired comparison too few to mean much (the same
minimum as a report slice's, ``stats.summary.SLICE_MIN_SCENARIOS``)."""

ScenarioKey = tuple[str, str]  # (agent_id, scenario_id)


class PairedComparison(BaseModel):
    """Candidate a minus candidate b on shared scenarios (score points, 0..100 scale)."""

    candidate_a: str
    candidate_b: str
    metric: str = "overall"
    n_scenarios: int = 0  # shared scenarios
    n_agents: int = 0
    only_a: int = 0  # scenarios only a completed
    only_b: int = 0
    mean_difference: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    n_samples: int = DEFAULT_SAMPLES
    wins: int = 0  # scenarios where a scored higher than b
    losses: int = 0
    ties: int = 0
    tie_tolerance: float = TIE_TOLERANCE

    @computed_field  # type: ignore[prop-decorator]
    @property
    def too_few(self) -> bool:
        """True when the difference stands on fewer than :data:`MIN_PAIRED_SCENARIOS` scenarios."""
        return self.mean_difference is not None and self.n_scenarios < MIN_PAIRED_SCENARIOS

    @computed_field  # type: ignore[prop-decorator]
    @property
    def too_few_note(self) -> str | None:
        """The one-line reason shown beside a too-few comparison, or None."""
        if not self.too_few:
            return None
        return (f"too few: {self.n_scenarios} shared scenario(s), fewer than {MIN_PAIRED_SCENARIOS}; "
                "the interval means little however it falls")

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies entirely above or below zero."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def scenario_means(scores: Iterable[tuple[str, str, float | None]]) -> dict[ScenarioKey, float]:
    """Mean over repeats per ``(agent_id, scenario_id)`` of the defined values in
    ``(agent_id, scenario_id, value)`` triples; scenarios with no defined value are absent."""
    acc: dict[ScenarioKey, list[float]] = defaultdict(list)
    for agent, scenario, value in scores:
        if value is not None and not np.isnan(value):
            acc[(agent, scenario)].append(float(value))
    return {k: float(np.mean(v)) for k, v in acc.items()}


def paired_comparison(
    name_a: str,
    scores_a: Iterable[tuple[str, str, float | None]],
    name_b: str,
    scores_b: Iterable[tuple[str, str, float | None]],
    rng: np.random.Generator,
    *,
    metric: str = "overall",
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    tie_tolerance: float = TIE_TOLERANCE,
) -> PairedComparison:
    """Compare candidate a with candidate b (module docstring). ``scores_*`` are
    ``(agent_id, scenario_id, value)`` per episode, ``None`` for skipped/undefined. The result has
    ``mean_difference=None`` when the candidates share no completed scenario."""
    means_a, means_b = scenario_means(scores_a), scenario_means(scores_b)
    shared = sorted(set(means_a) & set(means_b))
    result = PairedComparison(
        candidate_a=name_a,
        candidate_b=name_b,
        metric=metric,
        n_scenarios=len(shared),
        n_agents=len({agent for agent, _ in shared}),
        only_a=len(set(means_a) - set(means_b)),
        only_b=len(set(means_b) - set(means_a)),
        confidence=confidence,
        n_samples=n_samples,
        tie_tolerance=tie_tolerance,
    )
    if not shared:
        return result
    diffs = [means_a[k] - means_b[k] for k in shared]
    result.wins = sum(d > tie_tolerance for d in diffs)
    result.losses = sum(d < -tie_tolerance for d in diffs)
    result.ties = len(diffs) - result.wins - result.losses
    structure = build_structure([a for a, _ in shared], [s for _, s in shared], diffs)
    samples = hierarchical_sample_means(structure, rng, n_samples)
    result.mean_difference = float(np.mean(diffs))
    result.low, result.high = percentile_interval(samples, confidence)
    return result
