"""Pinned intervals: the exact numbers the report's statistics give for a small fixed run.

The bootstraps may be rewritten for speed, but a report must not change for a given seed: the same
run and seed give the same intervals, bit for bit. These values were produced by the code before
the latency bootstraps were vectorised (each resample's quantile over a dense samples x turns
matrix); the run is unbalanced (a skipped call, agents with different scenario counts), has
silent turns, tool buckets, two languages and harness CPU, and uses more samples than one chunk
of resampling holds, so every path of the rewrite is exercised. A change here is a change of the
statistics, not of their speed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.stats.bootstrap import derive_rng
from callbench.stats.latency import latency_quantile, share_within_budget
from callbench.trace import EpisodeLatency, RequestLatency, TurnLatency

SAMPLES = 610  # more than one chunk of resampling, with a remainder


def timings(cand: str, a: int, s: int, r: int) -> EpisodeLatency:
    """Seeded per call: 3 + (a + s) % 3 turns; the first turn of scenario 2 says nothing; turn t
    makes t % 3 tool round trips before speaking; one harness CPU figure per turn."""
    rng = np.random.default_rng([ord(cand[-1]), a, s, r, 11])
    turns, requests = [], []
    for t in range(3 + (a + s) % 3):
        silent = t == 0 and s == 2
        first = None if silent else round(float(rng.gamma(3.0, 0.2)) + 0.05 * a, 4)
        turns.append(TurnLatency(
            turn=t, start_s=8.0 * t, time_to_first_word_s=first,
            dead_air_s=round(float(rng.exponential(0.25)), 4), completion_s=2.0,
            spoken_s=round(float(rng.uniform(0.5, 2.5)), 4), words=4,
            tool_round_trips_before_speech=t % 3, requests=1, streamed=True))
        requests.append(RequestLatency(
            role="candidate", turn=t, start_s=8.0 * t, first_token_s=0.1, waited_s=0.5,
            harness_cpu_s=round(float(rng.uniform(0.001, 0.004)), 6)))
    return EpisodeLatency(started_at="2026-01-01T00:00:00+00:00", turns=turns, requests=requests)


@pytest.fixture
def report(make_run: Callable[..., Path]) -> Any:
    run = make_run(agents=3, scenarios=4, repeats=3, latency=timings,
                   skip=lambda c, a, s, r: (a, s, r) in {(2, 1, 0), (0, 3, 2)},
                   not_run=lambda c, a, s, r: (a, s) == (1, 3))
    return build_report(load_runs([run]), n_samples=SAMPLES, latency_budget_s=0.6)


def triple(result: Any) -> tuple[float | None, float | None, float | None]:
    return (result.estimate, result.low, result.high)


def test_latency_intervals_are_pinned(report: Any) -> None:
    lat = report.latency["cand-a"]
    assert triple(lat.first_word["p50"]) == PINNED["first_word_p50"]
    assert triple(lat.first_word["p90"]) == PINNED["first_word_p90"]
    assert triple(lat.first_word["p99"]) == PINNED["first_word_p99"]
    assert triple(lat.dead_air["p90"]) == PINNED["dead_air_p90"]
    assert triple(lat.within_budget) == PINNED["within_budget"]
    assert triple(lat.talk_s) == PINNED["talk_s"]
    assert triple(lat.harness_cpu["p90"]) == PINNED["harness_cpu_p90"]
    assert triple(lat.by_tools_before_speech["2+"]["p50"]) == PINNED["tools_2_p50"]
    assert triple(report.latency["cand-b"].first_word["p90"]) == PINNED["b_first_word_p90"]
    pair = report.paired_latency[0]
    assert (pair.mean_difference, pair.low, pair.high) == PINNED["paired_latency"]


def test_score_intervals_are_pinned(report: Any) -> None:
    cand = {c.candidate: c for c in report.candidates}["cand-a"]
    assert triple(cand.overall) == PINNED["overall"]
    assert triple(cand.task) == PINNED["task"]
    assert triple(cand.pass_rate) == PINNED["pass_rate"]


def test_stats_level_quantile_and_share_are_pinned() -> None:
    """latency_quantile and share_within_budget called directly: unbalanced repeats, None and NaN
    turns, an episode with no defined turn."""
    rng = np.random.default_rng(5)
    agents = ["a"] * 7 + ["b"] * 5
    scens = ["s1", "s1", "s1", "s2", "s2", "s3", "s3", "s4", "s4", "s4", "s4", "s5"]
    turns: list[list[float | None]] = [
        [round(float(v), 3) for v in rng.lognormal(-0.5, 0.5, size=2 + i % 4)] for i in range(12)]
    turns[3].append(None)
    turns[6].append(float("nan"))
    turns[9] = [None]
    got = [triple(latency_quantile(agents, scens, turns, q, derive_rng(3, "pin", str(q)), n_samples=SAMPLES))
           for q in (0.0, 0.5, 0.9, 1.0)]
    assert got == PINNED["stats_quantiles"]
    share = share_within_budget(agents, scens, turns, 0.6, derive_rng(3, "pin", "share"), n_samples=SAMPLES)
    assert triple(share) == PINNED["stats_share"]


PINNED: dict[str, Any] = {
    "first_word_p50": (0.676, 0.5163, 0.8190599999999997),
    "first_word_p90": (1.2788, 0.949, 1.4393),
    "first_word_p99": (1.9161, 1.428, 2.0228),
    "dead_air_p90": (0.5979, 0.4675, 0.8468),
    "within_budget": (45.2991452991453, 31.910144927536233, 60.99747474747474),
    "talk_s": (6.191041935483871, 5.345835705818965, 7.233831818181818),
    "harness_cpu_p90": (0.003628, 0.00345, 0.00389),
    "tools_2_p50": (0.5866, 0.4818700000000003, 0.8223),
    "b_first_word_p90": (1.1647, 0.9626, 1.3546),
    "paired_latency": (98.36818181818184, -101.38888888888883, 226.18013888888885),
    "overall": (64.38709677419355, 54.89275210084034, 73.8),
    "task": (64.38709677419355, 54.492857142857154, 73.88276497695853),
    "pass_rate": (35.483870967741936, 0.0, 80.0),
    "stats_quantiles": [(0.255, 0.255, 0.255), (0.521, 0.443, 0.671), (1.07, 0.744, 1.35),
                        (1.374, 0.918, 1.374)],
    "stats_share": (64.1025641025641, 40.54054054054054, 81.46692745376954),
}
