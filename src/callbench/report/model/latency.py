"""Latency per candidate, as every report shows it (docs/latency.md): quantiles of time to first
word and of dead air per candidate turn, the share of turns within the latency budget, talk time,
caller wait time and the dead-air share per call, slices of time to first word (by language,
tool round trips before speech, turn index, agent and scenario), and paired comparisons of the
median time to first word.

Calls counted: those with a trace holding timings that were not skipped (scored or not yet
graded: latency does not depend on the grade). Intervals are hierarchical bootstraps (agents,
scenarios, repeats: :mod:`callbench.stats.latency` for turn quantiles and shares,
:func:`callbench.stats.bootstrap.hierarchical_bootstrap` for per-call means); every generator
derives from the report seed and stable labels. Slices carry the thin-slice warnings of the
scores' (:func:`callbench.stats.summary.slice_warned`), except where the slice itself fixes a
level of the hierarchy (:func:`fixed_slice_warned`).

What a slice's bootstrap resamples: the same three levels, over the slice's own calls (and, for
tool and turn-index slices, only the turns of each call that fall in the slice). A level that the
slice holds to one cluster is not resampled: its one cluster is drawn every time. So a language
or turn-index slice redraws agents, scenarios and repeats; an agent slice redraws that agent's
scenarios and their repeats (its interval says how well this agent's scenarios pin its latency,
not how other agents would do); a scenario slice redraws only its repeats, each call bringing all
its turns (turns of one call are never resampled one by one: they are not independent), so a
scenario with one call has an interval of zero width, and a warning.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from itertools import combinations

from pydantic import BaseModel, Field

from callbench.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    MIN_SCORED_FOR_INTERVAL,
    BootstrapResult,
    derive_rng,
    hierarchical_bootstrap,
)
from callbench.stats.latency import (
    DEFAULT_LATENCY_BUDGET_S,
    CallTimings,
    latency_quantiles,
    share_within_budget,
)
from callbench.stats.paired import PairedComparison, paired_comparison
from callbench.stats.summary import SLICE_MIN_SCENARIOS, EpisodeRecord, group_by_candidate, slice_warned

QUANTILES: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
"""The quantiles reported, by label (p50 is the median)."""

SLICE_QUANTILES = ("p50", "p90")
"""The quantiles reported in slices (a p99 of a slice rests on too few turns)."""

PAIRED_METRIC = "first_word_median_ms"
"""Paired latency: per call, the median time to first word in milliseconds (a minus b: positive
means a kept the caller waiting longer)."""


TURN_INDEX_LAST = 5
"""Turn-index slices: candidate turns 1 to 4 each, then every later turn together (``5+``): few
calls run long, so later positions would each rest on a handful of turns."""


def tools_bucket(n: int) -> str:
    """The slice of a turn by tool round trips before its first word: ``0``, ``1`` or ``2+``."""
    return "2+" if n >= 2 else str(n)


def turn_bucket(position: int) -> str:
    """The slice of a candidate turn by its position in the call, counted from 1 (the candidate's
    first turn, the greeting, timed from the call connecting): ``1`` to ``4``, then ``5+``
    (:data:`TURN_INDEX_LAST`). Raises ValueError for a position below 1."""
    if position < 1:
        raise ValueError(f"turn position counts from 1, got {position}")
    return f"{TURN_INDEX_LAST}+" if position >= TURN_INDEX_LAST else str(position)


def scenario_label(agent_id: str, scenario_id: str) -> str:
    """A scenario slice's key, ``agent/scenario`` (a scenario id is unique only within its agent)."""
    return f"{agent_id}/{scenario_id}"


def fixed_slice_warned(result: BootstrapResult, fixed: str) -> BootstrapResult:
    """``result`` with its ``warning`` set for a slice that holds ``fixed`` (``agent`` or
    ``scenario``) to one cluster, checked on the levels its bootstrap still redraws (module
    docstring): an agent slice is warned below :data:`~callbench.stats.summary.SLICE_MIN_SCENARIOS`
    scenarios, a scenario slice below :data:`~callbench.stats.bootstrap.MIN_SCORED_FOR_INTERVAL`
    calls (the same minimums as the scores' slices and intervals; project rules,
    docs/validity.md). The scores' check (:func:`~callbench.stats.summary.slice_warned`) would
    warn every such slice for its one agent or scenario, which says nothing. Raises ValueError for
    another ``fixed``."""
    if fixed not in ("agent", "scenario"):
        raise ValueError(f"a fixed slice holds an agent or a scenario, got {fixed!r}")
    result.warning = None
    if result.n_episodes == 0:
        return result
    if fixed == "agent" and result.n_scenarios < SLICE_MIN_SCENARIOS:
        n = result.n_scenarios
        result.warning = (f"only {n} scenario{'s' if n != 1 else ''} of this agent (fewer than "
                          f"{SLICE_MIN_SCENARIOS}): interval unreliable")
    elif fixed == "scenario" and result.n_episodes < MIN_SCORED_FOR_INTERVAL:
        n = result.n_episodes
        result.warning = (f"only {n} call{'s' if n != 1 else ''} of this scenario (fewer than "
                          f"{MIN_SCORED_FOR_INTERVAL}; only its repeats are redrawn): interval unreliable")
    return result


def harness_cpu_share(cpu_s: float | None, first_word_s: float | None,
                      harness_timed_calls: int) -> float | None:
    """The median harness CPU per request as a percentage of the median time to first word, or
    None when either is missing or when any call's candidate requests were timed by the harness
    around a client that times nothing (``harness_timed_calls``: a scripted model answers in
    microseconds, so the share would compare our CPU with our own time). Replayed calls keep
    their original measured latency: counted. The caller's and judges' timing sources do not
    matter: the figure is the candidate's."""
    if cpu_s is None or not first_word_s or harness_timed_calls:
        return None
    return 100.0 * cpu_s / first_word_s


class LatencySummary(BaseModel):
    """One candidate's latency. Times in seconds, shares in percent (0..100). ``first_word`` and
    ``dead_air``: quantile label (:data:`QUANTILES`) -> value over candidate turns with its
    interval; ``within_budget``: the percentage of turns that spoke whose time to first word is at
    most ``budget_s``; ``talk_s``, ``wait_s``, ``dead_air_share``: the mean per call
    (:class:`~callbench.stats.latency.CallTimings`). ``sources``: calls by where their timings came
    from (measured, replayed from the response cache, timed by the harness around a client that
    times nothing, mixed); ``streamed_calls``: calls whose every turn was streamed (otherwise a
    turn's first word is its whole answer). ``by_language``, ``by_tools_before_speech``,
    ``by_turn_index`` (:func:`turn_bucket`), ``by_agent`` and ``by_scenario``
    (:func:`scenario_label`): slice -> quantile label (:data:`SLICE_QUANTILES`) -> time to first
    word, each slice's bootstrap as the module docstring says; keys in sorted order (turn
    index: 1 to 5+). ``harness_cpu``: quantile
    label (:data:`SLICE_QUANTILES`) -> callbench's own CPU seconds per candidate request
    (``sim/harness_cpu.py``), over the ``harness_cpu_requests`` requests that recorded it;
    ``harness_cpu_share``: its median as a percentage of the median time to first word (None
    without both, or when ``harness_timed_calls``, calls whose candidate requests were timed by
    the harness around a client that times nothing, is not 0: :func:`harness_cpu_share`)."""

    candidate: str
    budget_s: float = DEFAULT_LATENCY_BUDGET_S
    n_calls: int = 0
    n_turns: int = 0
    n_silent_turns: int = 0  # turns that said nothing (no time to first word)
    sources: dict[str, int] = Field(default_factory=dict)
    streamed_calls: int = 0
    talk_measured_calls: int = 0  # calls whose speaking time was measured from a synthesis
    first_word: dict[str, BootstrapResult] = Field(default_factory=dict)
    dead_air: dict[str, BootstrapResult] = Field(default_factory=dict)
    within_budget: BootstrapResult | None = None
    talk_s: BootstrapResult | None = None
    wait_s: BootstrapResult | None = None
    dead_air_share: BootstrapResult | None = None
    by_language: dict[str, dict[str, BootstrapResult]] = Field(default_factory=dict)
    by_tools_before_speech: dict[str, dict[str, BootstrapResult]] = Field(default_factory=dict)
    by_turn_index: dict[str, dict[str, BootstrapResult]] = Field(default_factory=dict)
    by_agent: dict[str, dict[str, BootstrapResult]] = Field(default_factory=dict)
    by_scenario: dict[str, dict[str, BootstrapResult]] = Field(default_factory=dict)
    harness_cpu: dict[str, BootstrapResult] = Field(default_factory=dict)
    harness_cpu_requests: int = 0
    harness_cpu_share: float | None = None
    harness_timed_calls: int = 0

    @property
    def median_first_word(self) -> BootstrapResult | None:
        return self.first_word.get("p50")

    @property
    def source_note(self) -> str:
        """Why the figures may not be measured latency ('' when every call's were measured)."""
        notes = []
        if self.sources.get("replayed"):
            notes.append(f"{self.sources['replayed']} call(s) replayed from the response cache "
                         "(timings of the original requests)")
        if self.sources.get("harness"):
            notes.append(f"{self.sources['harness']} call(s) timed by the harness around a client that times "
                         "nothing (e.g. scripted): not a model's latency")
        if self.sources.get("mixed"):
            notes.append(f"{self.sources['mixed']} call(s) with mixed timing sources")
        if self.talk_measured_calls:
            notes.append(f"{self.talk_measured_calls} call(s) with talk time measured from the voice "
                         "channel's synthesis (--agent-speech), not estimated at 2.5 words/s")
        if self.n_calls and self.streamed_calls < self.n_calls:
            notes.append(f"{self.n_calls - self.streamed_calls} call(s) not streamed throughout "
                         "(first word = whole answer)")
        return "; ".join(notes)


def timed_calls(records: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """The records whose latency is reported: with timings, not skipped, planned and traced."""
    return [r for r in records if r.timings is not None and r.status in ("scored", "ungraded")]


def _quantiles(calls: Sequence[EpisodeRecord], values: Callable[[CallTimings], Sequence[float | None]],
               labels: Sequence[str], seed: int, n_samples: int, confidence: float, *split: str
               ) -> dict[str, BootstrapResult]:
    agents, scenarios = [r.agent_id for r in calls], [r.scenario_id for r in calls]
    turns = [values(r.timings) for r in calls if r.timings is not None]
    rngs = [(QUANTILES[label], derive_rng(seed, "latency", *split, label)) for label in labels]
    results = latency_quantiles(agents, scenarios, turns, rngs, n_samples, confidence)
    return dict(zip(labels, results, strict=True))


def summarize_latency(candidate: str, records: Sequence[EpisodeRecord], *, budget_s: float, seed: int,
                      n_samples: int = DEFAULT_SAMPLES, confidence: float = DEFAULT_CONFIDENCE
                      ) -> LatencySummary:
    """The :class:`LatencySummary` of one candidate's records (module docstring). Raises
    ValueError for a negative or non-finite budget."""
    calls = timed_calls(records)
    timings = [r.timings for r in calls if r.timings is not None]
    out = LatencySummary(
        candidate=candidate, budget_s=budget_s, n_calls=len(calls),
        n_turns=sum(len(t.first_word_s) for t in timings),
        n_silent_turns=sum(w is None for t in timings for w in t.first_word_s),
        sources=dict(sorted(Counter(t.source for t in timings).items())),
        streamed_calls=sum(t.streamed for t in timings),
        talk_measured_calls=sum(t.talk_measured for t in timings),
        harness_timed_calls=sum(t.harness_timed for t in timings))
    args = (seed, n_samples, confidence)
    out.first_word = _quantiles(calls, lambda t: t.first_word_s, list(QUANTILES), *args, candidate,
                                "first_word")
    out.dead_air = _quantiles(calls, lambda t: t.dead_air_s, list(QUANTILES), *args, candidate, "dead_air")
    agents, scenarios = [r.agent_id for r in calls], [r.scenario_id for r in calls]
    out.within_budget = share_within_budget(
        agents, scenarios, [t.first_word_s for t in timings], budget_s,
        derive_rng(seed, "latency", candidate, "within_budget"), n_samples, confidence)

    def per_call(name: str, value: Callable[[CallTimings], float | None]) -> BootstrapResult:
        return hierarchical_bootstrap(agents, scenarios, [value(t) for t in timings],
                                      derive_rng(seed, "latency", candidate, name), n_samples, confidence)

    out.talk_s = per_call("talk", lambda t: t.talk_s)
    out.wait_s = per_call("wait", lambda t: t.wait_s)
    out.dead_air_share = per_call("dead_air_share", lambda t: t.dead_air_share)
    out.harness_cpu_requests = sum(len(t.harness_cpu_s) for t in timings)
    if out.harness_cpu_requests:
        out.harness_cpu = _quantiles(calls, lambda t: t.harness_cpu_s, SLICE_QUANTILES, *args, candidate,
                                     "harness_cpu")
        out.harness_cpu_share = harness_cpu_share(out.harness_cpu["p50"].estimate,
                                                  out.first_word["p50"].estimate, out.harness_timed_calls)
    by_lang: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in calls:
        by_lang[r.language].append(r)
    out.by_language = {
        lang: {k: slice_warned(v) for k, v in _quantiles(
            subset, lambda t: t.first_word_s, SLICE_QUANTILES, *args, candidate, "language", lang).items()}
        for lang, subset in sorted(by_lang.items())}
    buckets = sorted({tools_bucket(n) for t in timings for n in t.tools_before_speech})
    for bucket in buckets:
        def in_bucket(t: CallTimings, b: str = bucket) -> list[float | None]:
            return [w for w, n in zip(t.first_word_s, t.tools_before_speech, strict=True)
                    if tools_bucket(n) == b]
        out.by_tools_before_speech[bucket] = {k: slice_warned(v) for k, v in _quantiles(
            calls, in_bucket, SLICE_QUANTILES, *args, candidate, "tools", bucket).items()}
    # a call's turns in order, one per candidate turn: its position is the index in the list, from 1
    longest = max((len(t.first_word_s) for t in timings), default=0)
    for bucket in [turn_bucket(i) for i in range(1, min(longest, TURN_INDEX_LAST) + 1)]:
        def at_position(t: CallTimings, b: str = bucket) -> list[float | None]:
            return [w for i, w in enumerate(t.first_word_s, start=1) if turn_bucket(i) == b]
        out.by_turn_index[bucket] = {k: slice_warned(v) for k, v in _quantiles(
            calls, at_position, SLICE_QUANTILES, *args, candidate, "turn", bucket).items()}
    by_agent: dict[str, list[EpisodeRecord]] = defaultdict(list)
    by_scenario: dict[tuple[str, str], list[EpisodeRecord]] = defaultdict(list)
    for r in calls:
        by_agent[r.agent_id].append(r)
        by_scenario[(r.agent_id, r.scenario_id)].append(r)
    out.by_agent = {
        agent: {k: fixed_slice_warned(v, "agent") for k, v in _quantiles(
            subset, lambda t: t.first_word_s, SLICE_QUANTILES, *args, candidate, "agent", agent).items()}
        for agent, subset in sorted(by_agent.items())}
    out.by_scenario = {
        scenario_label(agent, scen): {k: fixed_slice_warned(v, "scenario") for k, v in _quantiles(
            subset, lambda t: t.first_word_s, SLICE_QUANTILES, *args, candidate, "scenario", agent, scen
        ).items()}
        for (agent, scen), subset in sorted(by_scenario.items())}
    return out


def latency_summaries(records: Sequence[EpisodeRecord], candidates: Sequence[str], *, budget_s: float,
                      seed: int, n_samples: int = DEFAULT_SAMPLES, confidence: float = DEFAULT_CONFIDENCE
                      ) -> dict[str, LatencySummary]:
    """Candidate -> :class:`LatencySummary`, for the ``candidates`` (in that order) that have at
    least one timed call."""
    groups = group_by_candidate(records)
    out = {}
    for c in candidates:
        if timed_calls(groups.get(c, [])):
            out[c] = summarize_latency(c, groups[c], budget_s=budget_s, seed=seed, n_samples=n_samples,
                                       confidence=confidence)
    return out


def call_median_ms(record: EpisodeRecord) -> float | None:
    """The call's median time to first word in milliseconds, or None (no timings, skipped, or no
    turn spoke)."""
    if record.timings is None or record.status not in ("scored", "ungraded"):
        return None
    median = record.timings.median_first_word_s()
    return None if median is None else 1000.0 * median


def paired_latency(records: Sequence[EpisodeRecord], candidates: Sequence[str], *, seed: int,
                   n_samples: int = DEFAULT_SAMPLES, confidence: float = DEFAULT_CONFIDENCE
                   ) -> list[PairedComparison]:
    """Every pair of ``candidates`` (in order) compared on the scenarios both have timed calls of
    (:func:`callbench.stats.paired.paired_comparison` on :data:`PAIRED_METRIC`); pairs that share
    no scenario are left out. ``wins`` counts scenarios where a was slower."""
    groups = group_by_candidate(records)
    out = []
    for a, b in combinations(candidates, 2):
        result = paired_comparison(
            a, [(r.agent_id, r.scenario_id, call_median_ms(r)) for r in groups.get(a, [])],
            b, [(r.agent_id, r.scenario_id, call_median_ms(r)) for r in groups.get(b, [])],
            derive_rng(seed, "paired", a, b, PAIRED_METRIC), metric=PAIRED_METRIC, n_samples=n_samples,
            confidence=confidence)
        if result.n_scenarios:
            out.append(result)
    return out
