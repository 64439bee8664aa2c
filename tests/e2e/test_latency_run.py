"""Latency end to end: runs whose candidate streams from the conformance fake with seeded,
known delays (``fakes.streaming_wire.LatencyProfile``: time to first token log-normal with median
``TTFT_S`` and shape ``SIGMA``), through the runs API, the saved traces and the report.

What the report must show: the quantiles of time to first word over the turns that spoke
without a tool call first (their first word is the first text delta of one request, which the
fake sends after the drawn time to first token) fall within the sampling error of the known
distribution, and every figure equals a recomputation from the trace files read as plain JSON.

The tolerance, and why a busy machine cannot break it:

- Sampling error: the report's q-quantile of n turns is the order statistic k = ceil(q n). For
  any distribution, X_(k) < F^-1(p) exactly when at least k of n draws fall below F^-1(p), a
  Binomial(n, p) event; :func:`band` finds the p on each side where that has probability
  ``TAIL`` (1e-4), and maps them through the log-normal's quantile function. (The delays are
  seeded, so a given run draws the same values every time: the band is the justification, not a
  dice roll.)
- Below: a time is measured from the send, and the fake sleeps the drawn delay after it received
  the request, so a measured time is never shorter than the drawn one; 2 ms for clock reading.
- Above: scheduling delay on a loaded machine (the server thread waking, the event loop getting
  the CPU) only adds; ``SLACK_S`` (0.25 s, most of a drawn median) is far above what it added at
  load 10 to 13 on 2 cores (the reported medians sat 20 to 50 ms above the profile's 300 ms, inside
  the band; the latency benchmark's 569 ms against 550), and far below what a bug (a request
  queued behind another, a time taken from the wrong mark, the whole answer instead of its first
  word) would add. It is multiplied by ``CALLBENCH_TEST_TIMEOUT_SCALE`` (tests/waiting.py) for a
  machine slower still.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path
from statistics import NormalDist
from typing import Any

import httpx2
import numpy as np
import pytest

from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelSettings
from callbench.models.registry import create_client
from callbench.models.remote.openai_client import OpenAIClient
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters, candidate_slug
from callbench.runs.session import run_and_grade
from fakes.conformance_server import ConformanceServer, HintedClient, HintTransport
from fakes.streaming_wire import LatencyProfile
from waiting import limit, scale

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
BUNDLE = load_bundle(STARTER)
TTFT_S, SIGMA, TOKEN_S = 0.3, 0.3, 0.004
PROFILE = LatencyProfile(ttft_s=TTFT_S, sigma=SIGMA, token_s=TOKEN_S, tool_s=0.02, seed=41)
TAIL = 1e-4
SLACK_S = 0.25 * scale()


def lognormal_quantile(p: float) -> float:
    return TTFT_S * math.exp(SIGMA * NormalDist().inv_cdf(p))


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def band(n: int, q: float) -> tuple[float, float]:
    """The seconds between which the inverted-CDF q-quantile of n draws from the profile's
    log-normal lies but with probability 2 * TAIL (module docstring)."""
    k = math.ceil(q * n)

    def solve(f: Any) -> float:  # f rises from <= 0 to > 0 over (0, 1): bisect its root
        lo, hi = 1e-9, 1 - 1e-9
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if f(mid) > 0 else (mid, hi)
        return (lo + hi) / 2

    p_lo = solve(lambda p: (1 - _binom_cdf(k - 1, n, p)) - TAIL)  # P(X_(k) < F^-1(p)) = TAIL
    p_hi = solve(lambda p: TAIL - _binom_cdf(k - 1, n, p))  # P(X_(k) > F^-1(p)) = TAIL
    return lognormal_quantile(p_lo), lognormal_quantile(p_hi)


def inverted_cdf(values: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(values), q, method="inverted_cdf"))


def latency_run(out: Path, server: ConformanceServer, *, scenarios: int, concurrency: int) -> Path:
    """Run and grade the first ``scenarios`` starter scenarios, the candidate streamed on the
    OpenAI adapter through ``server``, caller and judges scripted."""
    spec = "openai:conformance-agent"
    settings = ModelSettings(base_url=server.url, timeout_s=limit(120.0), max_attempts=1)  # none times out
    config = RunConfig(bundle_path=STARTER, out=out, candidates=[RoleSpec(spec=spec, settings=settings)],
                       caller=RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
                       conversation_judge=RoleSpec(spec="scripted:met"), concurrency=concurrency, seed=3,
                       filters=ScenarioFilters(limit=scenarios))

    async def go() -> None:
        http = httpx2.AsyncClient(transport=HintTransport())
        adapter = OpenAIClient(spec, settings, http_client=http)
        clients: dict[str, Any] = {
            f"candidate:{candidate_slug(spec, settings)}": HintedClient(adapter),
            **{role: create_client(r.spec, r.settings, bundle=BUNDLE, role=role)  # type: ignore[arg-type]
               for role, r in (("caller", config.caller), ("task_judge", config.task_judge),
                               ("conversation_judge", config.conversation_judge))}}
        try:
            await run_and_grade(config, clients=clients, bundle=BUNDLE)
        finally:
            for c in clients.values():
                await c.aclose()
            await http.aclose()

    asyncio.run(go())
    return out


def trace_turns(run: Path) -> list[dict[str, Any]]:
    """Every candidate turn of the run's trace files, read as plain JSON."""
    turns = []
    for path in sorted((run / "traces").iterdir()):
        with (gzip.open(path, "rt", encoding="utf-8") if path.name.endswith(".gz") else path.open()) as f:
            latency = json.load(f)["latency"]
        assert {r["source"] for r in latency["requests"] if r["role"] == "candidate"} == {"measured"}
        assert all(r["streamed"] for r in latency["requests"] if r["role"] == "candidate")
        turns += latency["turns"]
    return turns


def first_words(turns: list[dict[str, Any]], *, tools: int | None = None) -> list[float]:
    return [t["time_to_first_word_s"] for t in turns if t["time_to_first_word_s"] is not None
            and (tools is None or t["tool_round_trips_before_speech"] == tools)]


def check_against_profile(label: str, words: list[float], got: dict[str, Any]) -> None:
    """``got``: quantile label -> the report's BootstrapResult of time to first word."""
    for name, q in (("p50", 0.5), ("p90", 0.9)):
        lo, hi = band(len(words), q)
        value = got[name].estimate
        assert lo - 0.002 <= value <= hi + SLACK_S, (label, name, len(words), lo, value, hi)


@pytest.fixture(scope="module")
def concurrent_run(tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: Any) -> Path:
    with ConformanceServer(BUNDLE, latency=PROFILE, lifetime_s=limit(1800.0)) as server:
        return latency_run(tmp_path_factory.mktemp("latency") / "c4", server, scenarios=6, concurrency=6)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-conformance-test")
    yield mp
    mp.undo()


@pytest.mark.slow  # a streamed run against seeded delays: about 9 s idle
def test_report_time_to_first_word_matches_the_known_distribution_and_the_trace_files(
        concurrent_run: Path) -> None:
    turns = trace_turns(concurrent_run)
    report = build_report(load_runs([concurrent_run]), n_samples=100)
    (lat,) = report.latency.values()
    assert lat.streamed_calls == lat.n_calls == 6  # the candidate measured: trace_turns
    every, direct = first_words(turns), first_words(turns, tools=0)
    assert len(direct) >= 12, len(direct)  # enough turns for the band to mean something
    # the report's figures are the trace files' own quantiles
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert lat.first_word[name].estimate == inverted_cdf(every, q)
    for name, q in (("p50", 0.5), ("p90", 0.9)):
        assert lat.by_tools_before_speech["0"][name].estimate == inverted_cdf(direct, q)
    # turns whose first word is one request's first token: the fake's known distribution
    check_against_profile("no tools first", direct, lat.by_tools_before_speech["0"])


@pytest.mark.slow  # a run at concurrency 1: ~40 s of seeded delays
def test_concurrency_does_not_distort_measured_latency(concurrent_run: Path, tmp_path: Path) -> None:
    with ConformanceServer(BUNDLE, latency=PROFILE, lifetime_s=limit(1800.0)) as server:
        serial = latency_run(tmp_path / "c1", server, scenarios=6, concurrency=1)
    medians = {}
    for name, run in (("c1", serial), ("c6", concurrent_run)):
        direct = first_words(trace_turns(run), tools=0)
        (lat,) = build_report(load_runs([run]), n_samples=100).latency.values()
        check_against_profile(name, direct, lat.by_tools_before_speech["0"])
        median = lat.by_tools_before_speech["0"]["p50"].estimate
        assert median is not None
        medians[name] = (len(direct), median)
    # both medians are of draws from the same distribution (the fake numbers its requests in
    # arrival order, so the runs draw different values): they differ by sampling error and
    # scheduling delay only, never by one request queued behind another (a whole median more)
    (n1, m1), (n6, m6) = medians["c1"], medians["c6"]
    lo1, hi1 = band(n1, 0.5)
    lo6, hi6 = band(n6, 0.5)
    assert abs(m6 - m1) <= max(hi1, hi6) - min(lo1, lo6) + SLACK_S, medians
