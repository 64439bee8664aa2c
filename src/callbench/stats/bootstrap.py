"""Hierarchical and flat bootstrap of a mean episode score, vectorised with numpy.

Procedure (DESIGN.md "Scores"/"Confidence intervals"; paper: "Confidence intervals come from 2,000
hierarchical bootstrap samples that redraw agents, then scenarios within agents, then repeats. Ten
scenarios that share one long operating prompt are not ten independent samples, and a flat
bootstrap would pretend they are."):

1. Episodes whose value is undefined (``None`` or NaN: a skipped episode, or a pillar with no
   applicable item) are removed first and counted in ``n_excluded``; they are never scored 0.
2. The remaining episodes are grouped into clusters: agent -> scenario -> repeats.
3. One bootstrap sample draws, with replacement, as many agents as there are agents; for each
   drawn agent slot, as many scenarios *of that agent* as it has; for each drawn scenario slot,
   as many repeats *of that scenario* as it has. Every draw is a separate slot, so a cluster drawn
   twice contributes its episodes twice (and its scenarios/repeats are redrawn independently in
   each slot).
4. The statistic of a sample is the mean over all drawn episodes (each drawn episode weighs one).
5. The interval is the percentile interval of the sample statistics: for confidence ``c`` the
   ``100*(1-c)/2`` and ``100*(1+c)/2`` percentiles (numpy's default linear interpolation).
   The point estimate is the plain mean of the included episodes, not a bootstrap mean.

The flat bootstrap (for comparison only) draws N episodes with replacement from the N included
episodes, ignoring clusters.

The intervals cover benchmark sampling only; caller and judge randomness and the authors'
importance weights sit outside them (paper, "Skipped episodes are excluded ...").

Randomness: callers pass a seeded ``numpy.random.Generator``; :func:`derive_rng` derives one
from the run seed and stable labels (candidate, metric, split) so a report is reproducible and a
candidate's interval does not depend on which other candidates are in the report.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, computed_field

DEFAULT_SAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
MIN_SCORED_FOR_INTERVAL = 10
"""An interval from fewer scored calls is marked too few to mean much (``BootstrapResult.too_few``):
a bootstrap over a handful of calls can come out as [0.0, 0.0] and look like certainty. The same
minimum as a slice's (``stats.summary.SLICE_MIN_SCENARIOS``) and a paired comparison's
(``stats.paired.MIN_PAIRED_SCENARIOS``); a project rule (docs/validity.md), not the paper's."""
_CHUNK_ELEMENTS = 4_000_000  # bound on the size of one chunk of drawn indices (memory)


class BootstrapResult(BaseModel):
    """A point estimate with its percentile interval.

    ``estimate``/``low``/``high`` are in the unit of the input values (score points 0..100, or
    percent for a pass rate) and are ``None`` when no episode has a defined value.
    """

    method: Literal["hierarchical", "flat"]
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    n_samples: int = DEFAULT_SAMPLES
    n_episodes: int = 0  # included (defined) values
    n_excluded: int = 0  # undefined values removed before resampling
    n_agents: int = 0
    n_scenarios: int = 0
    warning: str | None = None  # set on report slices that draw on too few agents or scenarios

    @computed_field  # type: ignore[prop-decorator]
    @property
    def too_few(self) -> bool:
        """True when an estimate stands on fewer than :data:`MIN_SCORED_FOR_INTERVAL` values."""
        return self.estimate is not None and self.n_episodes < MIN_SCORED_FOR_INTERVAL

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low


def derive_rng(seed: int, *labels: str) -> np.random.Generator:
    """A ``numpy.random.Generator`` (PCG64) seeded from ``seed`` and stable string labels.

    Labels are hashed with SHA-256 (not Python's salted ``hash``), so the same seed and labels
    give the same stream in every process. Raises ``ValueError`` for a negative seed.
    """
    if seed < 0:
        raise ValueError(f"bootstrap seed must be >= 0, got {seed}")
    words = [seed]
    for label in labels:
        digest = hashlib.sha256(label.encode("utf-8")).digest()
        words.append(int.from_bytes(digest[:8], "little"))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


@dataclass(frozen=True)
class ClusterStructure:
    """Included episodes grouped agent -> scenario -> repeat, as flat numpy arrays.

    ``values[e]`` is episode e's value, episodes sorted so each scenario's repeats are contiguous
    and each agent's scenarios are contiguous. Agent a owns scenarios
    ``scen_start[a] .. scen_start[a] + n_scen[a] - 1``; scenario s owns episodes
    ``ep_start[s] .. ep_start[s] + n_rep[s] - 1``.
    """

    values: NDArray[np.float64]
    scen_start: NDArray[np.int64]
    n_scen: NDArray[np.int64]
    ep_start: NDArray[np.int64]
    n_rep: NDArray[np.int64]
    n_excluded: int

    @property
    def n_agents(self) -> int:
        return int(self.n_scen.size)

    @property
    def n_scenarios(self) -> int:
        return int(self.n_rep.size)

    @property
    def n_episodes(self) -> int:
        return int(self.values.size)

    @property
    def balanced_scenarios(self) -> bool:
        """Every agent has the same number of scenarios."""
        return bool(self.n_scen.size == 0 or (self.n_scen == self.n_scen[0]).all())

    @property
    def balanced_repeats(self) -> bool:
        """Every scenario has the same number of repeats."""
        return bool(self.n_rep.size == 0 or (self.n_rep == self.n_rep[0]).all())


def build_structure(
    agents: Sequence[Hashable], scenarios: Sequence[Hashable], values: Sequence[float | None]
) -> ClusterStructure:
    """Group episodes into clusters. ``agents[i]``/``scenarios[i]``/``values[i]`` describe episode
    i; a scenario key is taken within its agent. ``None``/NaN values are excluded and counted.
    Raises ``ValueError`` when the three sequences differ in length."""
    if not len(agents) == len(scenarios) == len(values):
        raise ValueError(
            f"agents, scenarios and values differ in length: {len(agents)}, {len(scenarios)}, {len(values)}"
        )
    groups: dict[Hashable, dict[Hashable, list[float]]] = {}
    excluded = 0
    for agent, scenario, value in zip(agents, scenarios, values, strict=True):
        if value is None or math.isnan(value):
            excluded += 1
            continue
        groups.setdefault(agent, {}).setdefault(scenario, []).append(float(value))
    flat: list[float] = []
    scen_start: list[int] = []
    n_scen: list[int] = []
    ep_start: list[int] = []
    n_rep: list[int] = []
    for agent in sorted(groups, key=repr):
        scen_start.append(len(n_rep))
        n_scen.append(len(groups[agent]))
        for scenario in sorted(groups[agent], key=repr):
            reps = groups[agent][scenario]
            ep_start.append(len(flat))
            n_rep.append(len(reps))
            flat.extend(reps)
    return ClusterStructure(
        values=np.asarray(flat, dtype=np.float64),
        scen_start=np.asarray(scen_start, dtype=np.int64),
        n_scen=np.asarray(n_scen, dtype=np.int64),
        ep_start=np.asarray(ep_start, dtype=np.int64),
        n_rep=np.asarray(n_rep, dtype=np.int64),
        n_excluded=excluded,
    )


@dataclass(frozen=True)
class Draws:
    """One chunk of b bootstrap samples' random draws (local indices).

    ``agents``: (b, A) drawn agent numbers. ``scenarios``: (b, A, Smax) scenario numbers *within*
    the drawn agent (slots at or past that agent's scenario count are ignored). ``repeats``:
    (b, A, Smax, Rmax) repeat numbers within the drawn scenario (slots past its count ignored).
    """

    agents: NDArray[np.int64]
    scenarios: NDArray[np.int64]
    repeats: NDArray[np.int64]


def _bounded(
    rng: np.random.Generator, highs: NDArray[np.int64], distinct: NDArray[np.int64], size: tuple[int, ...]
) -> NDArray[np.int64]:
    """Uniform integers in ``[0, highs)`` (``highs`` broadcast to ``size``), each slot independent.

    When the distinct bounds share a small common multiple L, ``u % high`` with u uniform on
    ``[0, L)`` is exactly uniform on ``[0, high)`` (high divides L) and much faster than numpy's
    per-element bounded generation, which is the fallback."""
    lcm = int(np.lcm.reduce(distinct)) if distinct.size else 1
    if lcm < 2**31:
        u = rng.integers(0, lcm, size=size, dtype=np.int32)
        return (u % highs.astype(np.int32)).astype(np.int64)
    return rng.integers(0, highs, size=size)


def draw(structure: ClusterStructure, rng: np.random.Generator, b: int) -> Draws:
    """Draw b hierarchical bootstrap samples' indices (agents, then scenarios within each drawn
    agent, then repeats within each drawn scenario, all with replacement)."""
    s = structure
    a_count, s_max, r_max = s.n_agents, int(s.n_scen.max()), int(s.n_rep.max())
    agents = rng.integers(0, a_count, size=(b, a_count))
    if s.balanced_scenarios:
        scenarios = rng.integers(0, s_max, size=(b, a_count, s_max))
    else:
        scenarios = _bounded(rng, s.n_scen[agents][..., None], np.unique(s.n_scen), (b, a_count, s_max))
    if s.balanced_repeats:
        repeats = rng.integers(0, r_max, size=(b, a_count, s_max, r_max))
    else:
        glob = s.scen_start[agents][..., None] + scenarios
        repeats = _bounded(rng, s.n_rep[glob][..., None], np.unique(s.n_rep), (b, a_count, s_max, r_max))
    return Draws(agents=agents, scenarios=scenarios, repeats=repeats)


def expand(structure: ClusterStructure, draws: Draws) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Turn draws into episode indices: returns ``(episodes, mask)`` of shape (b, A, Smax, Rmax);
    ``episodes[k, ...][mask[k, ...]]`` lists the episodes of sample k with multiplicity (a cluster
    drawn twice appears twice); ignored slots hold the sentinel ``structure.n_episodes``.
    Pure function of its inputs, so it can be tested by hand."""
    episodes, _ = _expand(structure, draws)
    return episodes, episodes != structure.n_episodes


def _expand(structure: ClusterStructure, draws: Draws) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(episodes, counts)``: episode indices with the sentinel ``n_episodes`` in ignored slots,
    and the number of drawn episodes per sample. Only 3-D work is spent on masking scenario
    slots; the 4-D repeat level costs one add, and a mask over the repeat slots past the fewest
    repeats drawn (one slot of 34 in a run of 33-34 repeats)."""
    s = structure
    s_max, r_max = int(s.n_scen.max()), int(s.n_rep.max())
    n_s = s.n_scen[draws.agents][..., None]  # (b, A, 1)
    scen_ok = np.arange(s_max) < n_s  # (b, A, Smax)
    local_s = np.where(scen_ok, draws.scenarios[..., :s_max], 0)
    glob = s.scen_start[draws.agents][..., None] + local_s  # (b, A, Smax)
    n_r = np.where(scen_ok, s.n_rep[glob], 0)  # repeats drawn in each scenario slot
    episodes = s.ep_start[glob][..., None] + draws.repeats[..., :r_max]  # (b, A, Smax, Rmax)
    # repeat slots below the fewest repeats drawn are filled in every scenario slot: only the
    # slots past it can be ignored ones
    full = int(n_r.min())
    if full < r_max:
        tail = episodes[..., full:]
        tail[np.arange(full, r_max) >= n_r[..., None]] = s.n_episodes
    return episodes, n_r.sum(axis=(1, 2))


def _chunks(total: int, per_sample: int) -> list[int]:
    size = max(1, _CHUNK_ELEMENTS // max(1, per_sample))
    return [min(size, total - i) for i in range(0, total, size)]


def hierarchical_sample_means(
    structure: ClusterStructure, rng: np.random.Generator, n_samples: int = DEFAULT_SAMPLES
) -> NDArray[np.float64]:
    """The statistic (mean of drawn episodes) of ``n_samples`` hierarchical bootstrap samples.
    Raises ``ValueError`` when the structure holds no episode or ``n_samples < 1``."""
    if structure.n_episodes == 0:
        raise ValueError("no defined values to resample")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    per_sample = structure.n_agents * int(structure.n_scen.max()) * int(structure.n_rep.max())
    out: list[NDArray[np.float64]] = []
    for b in _chunks(n_samples, per_sample):
        out.append(means_from_draws(structure, draw(structure, rng, b)))
    return np.concatenate(out)


def means_from_draws(structure: ClusterStructure, draws: Draws, *, fast: bool = True) -> NDArray[np.float64]:
    """The statistic of each sample in ``draws``: the mean of its drawn episodes (multiplicity
    counted). When every agent has as many scenarios and every scenario as many repeats, every
    slot is filled and ``fast`` skips the masking of :func:`expand` (same result)."""
    s = structure
    if fast and s.balanced_scenarios and s.balanced_repeats:
        glob = s.scen_start[draws.agents][..., None] + draws.scenarios
        episodes = s.ep_start[glob][..., None] + draws.repeats
        return s.values[episodes].mean(axis=(1, 2, 3))
    episodes, counts = _expand(s, draws)
    padded = np.append(s.values, 0.0)  # the sentinel index reads 0
    return padded[episodes].sum(axis=(1, 2, 3)) / counts


def flat_sample_means(
    values: NDArray[np.float64], rng: np.random.Generator, n_samples: int = DEFAULT_SAMPLES
) -> NDArray[np.float64]:
    """Means of ``n_samples`` flat bootstrap samples (N draws with replacement from N values)."""
    n = int(values.size)
    if n == 0:
        raise ValueError("no defined values to resample")
    out: list[NDArray[np.float64]] = []
    for b in _chunks(n_samples, n):
        out.append(values[rng.integers(0, n, size=(b, n))].mean(axis=1))
    return np.concatenate(out)


def percentile_interval(samples: NDArray[np.float64], confidence: float) -> tuple[float, float]:
    """The percentile interval ``(q((1-c)/2), q((1+c)/2))`` of bootstrap sample statistics."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return float(low), float(high)


def hierarchical_bootstrap(
    agents: Sequence[Hashable],
    scenarios: Sequence[Hashable],
    values: Sequence[float | None],
    rng: np.random.Generator,
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> BootstrapResult:
    """Mean episode value with its hierarchical bootstrap percentile interval (module docstring).

    Episode i belongs to ``agents[i]`` and ``scenarios[i]``; several episodes of one scenario are
    its repeats. Returns a result with ``estimate=None`` when no value is defined.
    """
    structure = build_structure(agents, scenarios, values)
    result = BootstrapResult(
        method="hierarchical",
        confidence=confidence,
        n_samples=n_samples,
        n_episodes=structure.n_episodes,
        n_excluded=structure.n_excluded,
        n_agents=structure.n_agents,
        n_scenarios=structure.n_scenarios,
    )
    if structure.n_episodes == 0:
        return result
    low, high = percentile_interval(hierarchical_sample_means(structure, rng, n_samples), confidence)
    result.estimate = float(structure.values.mean())
    result.low, result.high = low, high
    return result


def flat_bootstrap(
    values: Sequence[float | None],
    rng: np.random.Generator,
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> BootstrapResult:
    """Mean value with a flat (episode-level, cluster-blind) bootstrap percentile interval."""
    defined = [float(v) for v in values if v is not None and not math.isnan(v)]
    result = BootstrapResult(
        method="flat",
        confidence=confidence,
        n_samples=n_samples,
        n_episodes=len(defined),
        n_excluded=len(values) - len(defined),
    )
    if not defined:
        return result
    arr = np.asarray(defined, dtype=np.float64)
    low, high = percentile_interval(flat_sample_means(arr, rng, n_samples), confidence)
    result.estimate = float(arr.mean())
    result.low, result.high = low, high
    return result
