"""Latency statistics over candidate turns: quantiles (median, p90, p99) and the share of turns
within a budget, with hierarchical bootstrap intervals.

The unit measured is a candidate turn (``trace.TurnLatency``: time to first word, dead air...),
but turns of one call are not independent, nor are the calls of one scenario or the scenarios of
one agent. So the resampling is the scores' (``bootstrap.py``): agents, then scenarios within each
drawn agent, then repeats (episodes) within each drawn scenario; a drawn episode brings all its
turns. The statistic of a sample is computed over the pooled turns of its drawn episodes, each
episode counted as often as it was drawn.

Quantiles are the "inverted CDF" definition (numpy ``method="inverted_cdf"``; Hyndman and Fan
1996, definition 1): the smallest turn value whose cumulative share of turns is at least q, so a
reported p90 is a latency some turn actually had. Turns whose value is undefined (None or NaN,
e.g. a turn that said nothing has no time to first word) are left out and counted; an episode
with no defined turn is excluded as a skipped episode is.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from functools import cache

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field
from threadpoolctl import ThreadpoolController

from callbench.grade.models import DEFAULT_LATENCY_BUDGET_S as DEFAULT_LATENCY_BUDGET_S
from callbench.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    BootstrapResult,
    ClusterStructure,
    build_structure,
    draw,
    percentile_interval,
)
from callbench.trace import EpisodeLatency

_CHUNK = 250
"""Bootstrap samples drawn at once (the draws of one chunk come from the generator in one call,
so the chunk size is part of what a seed gives: changing it changes the intervals)."""
_CUTS = 64
"""Brackets of sorted turns for the resampled quantiles (:class:`_Resampled`): the weight before
each bracket is a matrix product over episodes, the bracket holding the quantile is summed turn by
turn (a bracket holds about T / 64 turns)."""


def _defined(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def weighted_quantile(sorted_values: NDArray[np.float64], weights: NDArray[np.float64], q: float
                      ) -> NDArray[np.float64]:
    """The inverted-CDF ``q`` quantile of ``sorted_values`` (ascending, shape (T,)) under each row
    of ``weights`` (shape (B, T), non-negative, every row with a positive sum): the first value
    whose cumulative weight reaches ``q`` of the row's total. Returns shape (B,)."""
    cum = np.cumsum(weights, axis=1)
    target = q * cum[:, -1:]
    index = np.argmax(cum >= target - 1e-12 * cum[:, -1:], axis=1)
    return sorted_values[index]


class _Resampled:
    """One bootstrap's turns, arranged so that a resample's statistic costs about one pass over its
    episodes rather than over its turns.

    ``values``: the defined turn values, ascending (shape (T,)); ``owner[j]``: the structure slot
    (episode) of sorted turn j; ``n``: episodes. A resample is given as ``counts`` (shape (B, n),
    float64): how often each episode was drawn. Every sum below adds whole numbers far below 2**53,
    so it is exact in float64 whatever the order of the additions (BLAS included), and each result
    equals the dense computation's (:func:`weighted_quantile` over ``counts[:, owner]``) bit for
    bit."""

    def __init__(self, values: NDArray[np.float64], owner: NDArray[np.int64], n: int) -> None:
        self.values, self.owner, self.n = values, owner, n
        t = values.size
        k = min(_CUTS, t)
        # cuts[i]: the first sorted position of bracket i; below[e, i - 1]: episode e's turns before cuts[i]
        self.cuts = (np.arange(k + 1, dtype=np.int64) * t) // k
        per_bracket = np.zeros((n, k), dtype=np.float64)
        np.add.at(per_bracket, (owner, np.repeat(np.arange(k), np.diff(self.cuts))), 1.0)
        self.below = np.cumsum(per_bracket, axis=1)[:, :-1]
        self.width = int(np.diff(self.cuts).max())
        self.turns = np.bincount(owner, minlength=n).astype(np.float64)

    def quantile(self, counts: NDArray[np.float64], q: float) -> NDArray[np.float64]:
        """The inverted-CDF ``q`` quantile of each resample (shape (B,)): the first sorted turn
        whose cumulative weight reaches ``q`` of the resample's total, with the tolerance of
        :func:`weighted_quantile`. The weight before each bracket's start comes from one matrix
        product; only the bracket holding the quantile is summed turn by turn."""
        rows = np.arange(counts.shape[0])
        total = counts @ self.turns
        threshold = (q * total - 1e-12 * total)[:, None]
        before = counts @ self.below  # (B, k - 1): weight of the turns before cuts[1..k-1]
        # the quantile lies at or after cuts[i] exactly when the weight before cuts[i] is short of it
        bracket = (before < threshold).sum(axis=1)
        base = np.concatenate([np.zeros((rows.size, 1)), before], axis=1)[rows, bracket]
        start = self.cuts[bracket]
        # columns past the bracket's end (a shorter bracket, or the last turn repeated) come after
        # the answer, which the bracket always holds, so they never change the first reach
        cols = np.minimum(start[:, None] + np.arange(self.width), self.values.size - 1)
        flat = self.owner[cols] + (rows * self.n)[:, None]
        cum = np.cumsum(counts.ravel().take(flat), axis=1) + base[:, None]
        return self.values[start + np.argmax(cum >= threshold, axis=1)]

    def share_within(self, counts: NDArray[np.float64], budget: float) -> NDArray[np.float64]:
        """The percentage of each resample's turns at most ``budget`` (shape (B,))."""
        within = np.bincount(self.owner[self.values <= budget], minlength=self.n).astype(np.float64)
        return 100.0 * (counts @ within) / (counts @ self.turns)


def _counts(structure: ClusterStructure, rng: np.random.Generator, b: int) -> NDArray[np.float64]:
    """How often each episode (structure slot) is drawn in each of b hierarchical resamples
    (shape (b, n_episodes), whole numbers as float64): the episodes of
    :func:`~callbench.stats.bootstrap.expand` counted, from the same draws. Repeat slots that every
    drawn scenario fills (below the fewest repeats drawn) need no mask; only the rest are masked."""
    s, n = structure, structure.n_episodes
    d = draw(s, rng, b)
    s_max, r_max = int(s.n_scen.max()), int(s.n_rep.max())
    scen_ok = np.arange(s_max) < s.n_scen[d.agents][..., None]  # (b, A, Smax)
    glob = s.scen_start[d.agents][..., None] + np.where(scen_ok, d.scenarios[..., :s_max], 0)
    n_r = np.where(scen_ok, s.n_rep[glob], 0)  # repeats drawn in each scenario slot
    base = (s.ep_start[glob] + n * np.arange(b)[:, None, None])[..., None]  # row r's episodes at r*n..
    full = int(n_r.min())
    repeats = d.repeats[..., :r_max]
    counts = np.bincount((base + repeats[..., :full]).ravel(), minlength=b * n)
    if full < r_max:
        tail = base + repeats[..., full:]
        counts += np.bincount(tail[np.arange(full, r_max) < n_r[..., None]], minlength=b * n)
    return counts.reshape(b, n).astype(np.float64)


@cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def _bootstrap(agents: Sequence[Hashable], scenarios: Sequence[Hashable],
               turns: Sequence[Sequence[float | None]],
               stats: Sequence[tuple[str, float, np.random.Generator]], n_samples: int, confidence: float
               ) -> list[BootstrapResult]:
    """One result per ``(statistic, q, rng)`` of ``stats`` (``quantile`` or ``share``) over the same
    turns: the structure, sorted turns and brackets are made once; each statistic draws its own
    resamples from its own generator, so each result is what it would be alone."""
    if not len(agents) == len(scenarios) == len(turns):
        raise ValueError(f"agents, scenarios and turns differ in length: {len(agents)}, {len(scenarios)}, "
                         f"{len(turns)}")
    for statistic, q, _ in stats:
        if statistic == "quantile" and not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
    defined = [_defined(t) for t in turns]
    marks = [float(i) if d else None for i, d in enumerate(defined)]
    structure = build_structure(agents, scenarios, marks)
    results = [BootstrapResult(method="hierarchical", confidence=confidence, n_samples=n_samples,
                               n_episodes=structure.n_episodes, n_excluded=structure.n_excluded,
                               n_agents=structure.n_agents, n_scenarios=structure.n_scenarios) for _ in stats]
    if structure.n_episodes == 0:
        return results
    order = structure.values.astype(np.int64)  # structure slot -> original episode
    values = np.concatenate([np.asarray(defined[e], dtype=np.float64) for e in order])
    owner = np.concatenate([np.full(len(defined[e]), slot, dtype=np.int64) for slot, e in enumerate(order)])
    sort = np.argsort(values, kind="stable")
    values, owner = values[sort], owner[sort]
    n = structure.n_episodes
    resampled = _Resampled(values, owner, n)
    for result, (statistic, q, rng) in zip(results, stats, strict=True):
        def stat(counts: NDArray[np.float64], statistic: str = statistic, q: float = q
                 ) -> NDArray[np.float64]:
            if statistic == "quantile":
                return resampled.quantile(counts, q)
            return resampled.share_within(counts, q)

        result.estimate = float(stat(np.ones((1, n)))[0])
        # one BLAS thread: the products are small (B x episodes x 64), and BLAS's own threads cost
        # 3-5x the CPU of one thread on a 2-core machine (measured), whose cores the report's worker
        # processes and threads already share; a product of whole numbers is exact with any threads
        with _blas().limit(limits=1, user_api="blas"):
            samples = [stat(_counts(structure, rng, min(_CHUNK, n_samples - start)))
                       for start in range(0, n_samples, _CHUNK)]
        result.low, result.high = percentile_interval(np.concatenate(samples), confidence)
    return results


def latency_quantile(agents: Sequence[Hashable], scenarios: Sequence[Hashable],
                     turns: Sequence[Sequence[float | None]], q: float, rng: np.random.Generator,
                     n_samples: int = DEFAULT_SAMPLES, confidence: float = DEFAULT_CONFIDENCE
                     ) -> BootstrapResult:
    """The ``q`` quantile (0.5: median, 0.9: p90, 0.99: p99) of the turn values, in their unit
    (seconds), with its hierarchical bootstrap interval. Episode i belongs to ``agents[i]`` and
    ``scenarios[i]`` and has turn values ``turns[i]``. ``estimate`` is None when no turn value
    is defined. Raises ValueError for sequences of different lengths or q outside [0, 1]."""
    return _bootstrap(agents, scenarios, turns, [("quantile", q, rng)], n_samples, confidence)[0]


def latency_quantiles(agents: Sequence[Hashable], scenarios: Sequence[Hashable],
                      turns: Sequence[Sequence[float | None]],
                      quantiles: Sequence[tuple[float, np.random.Generator]],
                      n_samples: int = DEFAULT_SAMPLES, confidence: float = DEFAULT_CONFIDENCE
                      ) -> list[BootstrapResult]:
    """:func:`latency_quantile` for each ``(q, rng)`` of ``quantiles`` over the same turns, in that
    order; each result equals the single call's with that ``rng`` (the turns are prepared once).
    Raises ValueError as :func:`latency_quantile`."""
    return _bootstrap(agents, scenarios, turns, [("quantile", q, rng) for q, rng in quantiles], n_samples,
                      confidence)


def share_within_budget(agents: Sequence[Hashable], scenarios: Sequence[Hashable],
                        turns: Sequence[Sequence[float | None]], budget_s: float, rng: np.random.Generator,
                        n_samples: int = DEFAULT_SAMPLES, confidence: float = DEFAULT_CONFIDENCE
                        ) -> BootstrapResult:
    """The percentage (0..100) of defined turn values at most ``budget_s`` seconds, with its
    hierarchical bootstrap interval (arguments as :func:`latency_quantile`). Raises ValueError
    for a negative or non-finite budget."""
    if not math.isfinite(budget_s) or budget_s < 0:
        raise ValueError(f"latency budget must be a non-negative number of seconds, got {budget_s}")
    return _bootstrap(agents, scenarios, turns, [("share", budget_s, rng)], n_samples, confidence)[0]


class CallTimings(BaseModel):
    """What the report keeps of one call's :class:`~callbench.trace.EpisodeLatency`: per candidate
    turn (in turn order) its time to first word (seconds; None when the turn said nothing), dead
    air (seconds), speaking time (seconds) and tool round trips before speech; where the
    timings came from (``measured``, ``replayed``, ``harness``, ``mixed``), whether every turn was
    streamed, whether every turn that spoke had its speaking time measured from a synthesis
    (``talk_measured``, ``run --agent-speech``; otherwise estimated from its words), and the wall
    clock at the call's start (UTC, ISO 8601). ``harness_cpu_s``: the harness CPU (seconds) of
    each candidate request that has one recorded, in request order
    (:attr:`~callbench.trace.RequestLatency.harness_cpu_s`; empty for older traces).
    ``harness_timed``: a candidate request was timed by the harness around a client that times
    nothing (``source`` harness: a scripted model), so the call's latency is not a model's."""

    started_at: str = ""
    source: str = "measured"
    streamed: bool = False
    first_word_s: list[float | None] = Field(default_factory=list)
    dead_air_s: list[float] = Field(default_factory=list)
    spoken_s: list[float] = Field(default_factory=list)
    tools_before_speech: list[int] = Field(default_factory=list)
    talk_measured: bool = False
    harness_cpu_s: list[float] = Field(default_factory=list)
    harness_timed: bool = False

    @classmethod
    def of(cls, latency: EpisodeLatency) -> CallTimings:
        """The summary of ``latency`` (one entry per :class:`~callbench.trace.TurnLatency`)."""
        turns = latency.turns
        return cls(
            started_at=latency.started_at, source=latency.source,
            streamed=bool(turns) and all(t.streamed for t in turns),
            first_word_s=[t.time_to_first_word_s for t in turns], dead_air_s=[t.dead_air_s for t in turns],
            spoken_s=[t.spoken_s for t in turns],
            tools_before_speech=[t.tool_round_trips_before_speech for t in turns],
            talk_measured=any(t.words for t in turns)
            and all(t.spoken_source == "measured" for t in turns if t.words),
            harness_cpu_s=[r.harness_cpu_s for r in latency.requests
                           if r.role == "candidate" and r.harness_cpu_s is not None],
            harness_timed=any(r.source == "harness" for r in latency.requests if r.role == "candidate"))

    @property
    def talk_s(self) -> float:
        """The candidate's speaking time over the call (seconds; estimated unless
        :attr:`talk_measured`)."""
        return float(sum(self.spoken_s))

    @property
    def wait_s(self) -> float:
        """What the caller waited in silence for the candidate over the call (seconds): every
        turn's time to first word plus its dead air."""
        return float(sum(w for w in self.first_word_s if w is not None) + sum(self.dead_air_s))

    @property
    def dead_air_share(self) -> float | None:
        """Dead air as a percentage (0..100) of the candidate's side of the call (its waits and
        its speech: :attr:`wait_s` + :attr:`talk_s`); None when that side lasted no time."""
        side = self.wait_s + self.talk_s
        return 100.0 * float(sum(self.dead_air_s)) / side if side > 0 else None

    def median_first_word_s(self) -> float | None:
        """The call's median time to first word (inverted CDF, as the report's quantiles), or
        None when no turn said anything."""
        return call_quantile(self.first_word_s, 0.5)

    def first_word_quantile(self, q: float) -> float | None:
        """The ``q`` quantile (inverted CDF) of the call's times to first word, or None."""
        return call_quantile(self.first_word_s, q)


def call_quantile(values: Sequence[float | None], q: float) -> float | None:
    """The inverted-CDF ``q`` quantile of the defined ``values`` (the smallest value whose
    cumulative share reaches ``q``), or None when none is defined. Raises ValueError for q
    outside [0, 1]."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    defined = sorted(_defined(values))
    if not defined:
        return None
    return float(weighted_quantile(np.asarray(defined), np.ones((1, len(defined))), q)[0])
