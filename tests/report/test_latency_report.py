"""Latency in the report: every figure recomputed independently from the traces' turn timings."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.trace import EpisodeLatency, TurnLatency

TURNS = 4


def timings(cand: str, a: int, s: int, r: int) -> EpisodeLatency:
    """Seeded timings per call: candidate b is slower by 0.4 s; turn 0 says nothing on scenario 1
    of repeat 1 (no time to first word); odd turns make a tool round trip before speaking."""
    rng = np.random.default_rng([ord(cand[-1]), a, s, r])
    shift = 0.4 if cand.endswith("b") else 0.0
    turns = []
    for t in range(TURNS):
        silent = t == 0 and s == 1 and r == 1
        first = None if silent else round(float(rng.gamma(4.0, 0.15)) + shift + 0.3 * (t % 2), 4)
        turns.append(TurnLatency(
            turn=t, start_s=10.0 * t, time_to_first_word_s=first,
            dead_air_s=round(float(rng.exponential(0.2)), 4),
            completion_s=3.0, spoken_s=round(float(rng.uniform(1.0, 3.0)), 4), words=5,
            tool_round_trips_before_speech=t % 2 + (1 if t == 3 and a == 0 else 0), requests=1,
            streamed=True))
    return EpisodeLatency(started_at="2026-01-01T00:00:00+00:00", turns=turns)


def inverted_cdf(values: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(values), q, method="inverted_cdf"))


@pytest.fixture
def report(make_run: Callable[..., Path]) -> Any:
    run = make_run(agents=3, scenarios=2, repeats=2, latency=timings,
                   skip=lambda c, a, s, r: (a, s, r) == (2, 1, 0))
    return build_report(load_runs([run]), n_samples=300, latency_budget_s=0.9)


def calls(cand: str) -> list[tuple[str, int, int, int, EpisodeLatency]]:
    return [(f"ag{a}", a, s, r, timings(cand, a, s, r)) for a in range(3) for s in range(2) for r in range(2)
            if (a, s, r) != (2, 1, 0)]


@pytest.mark.parametrize("cand", ["cand-a", "cand-b"])
def test_every_latency_figure_matches_an_independent_recomputation(report: Any, cand: str) -> None:
    lat = report.latency[cand]
    mine = calls(cand)
    first = [t.time_to_first_word_s for *_, e in mine for t in e.turns if t.time_to_first_word_s is not None]
    dead = [t.dead_air_s for *_, e in mine for t in e.turns]
    # scenario 1, repeat 1 of each agent starts silent
    assert lat.n_calls == 11 and lat.n_turns == 44 and lat.n_silent_turns == 3
    assert report.settings.latency_budget_s == 0.9 and lat.budget_s == 0.9
    for label, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert lat.first_word[label].estimate == pytest.approx(inverted_cdf(first, q))
        assert lat.dead_air[label].estimate == pytest.approx(inverted_cdf(dead, q))
        r = lat.first_word[label]
        assert r.low is not None and r.high is not None and r.low <= r.estimate <= r.high
    assert lat.within_budget is not None
    assert lat.within_budget.estimate == pytest.approx(100.0 * sum(f <= 0.9 for f in first) / len(first))
    talk = [sum(t.spoken_s for t in e.turns) for *_, e in mine]
    wait = [sum(t.time_to_first_word_s or 0.0 for t in e.turns) + sum(t.dead_air_s for t in e.turns)
            for *_, e in mine]
    share = [100.0 * sum(t.dead_air_s for t in e.turns) / (w + k)
             for (*_, e), w, k in zip(mine, wait, talk, strict=True)]
    # the per-call figures are plain means over calls (the bootstrap resamples them hierarchically)
    assert lat.talk_s.estimate == pytest.approx(float(np.mean(talk)))
    assert lat.wait_s.estimate == pytest.approx(float(np.mean(wait)))
    assert lat.dead_air_share.estimate == pytest.approx(float(np.mean(share)))
    # slices: by language (agent a speaks LANGS[a]) and by tool round trips before speech
    assert sorted(lat.by_language) == ["en", "hi", "ta"]
    en = [t.time_to_first_word_s for agent, *_, e in mine if agent == "ag0" for t in e.turns
          if t.time_to_first_word_s is not None]
    assert lat.by_language["en"]["p50"].estimate == pytest.approx(inverted_cdf(en, 0.5))
    assert lat.by_language["en"]["p50"].warning is not None  # one agent: a thin slice
    for bucket, pick in (("0", lambda n: n == 0), ("1", lambda n: n == 1), ("2+", lambda n: n >= 2)):
        values = [t.time_to_first_word_s for *_, e in mine for t in e.turns
                  if pick(t.tool_round_trips_before_speech) and t.time_to_first_word_s is not None]
        assert lat.by_tools_before_speech[bucket]["p90"].estimate == pytest.approx(inverted_cdf(values, 0.9))


def test_paired_latency_compares_call_medians_on_shared_scenarios(report: Any) -> None:
    (pair,) = report.paired_latency
    a, b = pair.candidate_a, pair.candidate_b
    per: dict[str, dict[tuple[str, int], list[float]]] = {}
    for cand in (a, b):
        acc: dict[tuple[str, int], list[float]] = defaultdict(list)
        for agent, _, s, _, e in calls(cand):
            spoken = [t.time_to_first_word_s for t in e.turns if t.time_to_first_word_s is not None]
            acc[(agent, s)].append(1000.0 * inverted_cdf(spoken, 0.5))
        per[cand] = acc
    diffs = [float(np.mean(per[a][k])) - float(np.mean(per[b][k])) for k in sorted(per[a])]
    assert pair.n_scenarios == 6
    assert pair.mean_difference == pytest.approx(float(np.mean(diffs)))
    assert pair.wins == sum(d > 0 for d in diffs)
    slower = b if pair.candidate_a == "cand-a" else a
    assert slower == "cand-b" and (pair.mean_difference < 0) == (a == "cand-a")


def test_report_without_timings_has_no_latency(make_run: Callable[..., Path]) -> None:
    report = build_report(load_runs([make_run(agents=1, scenarios=1, repeats=1)]), n_samples=50)
    assert report.latency == {} and report.paired_latency == []
    assert report.settings.latency_budget_s == 0.8


def test_talk_time_measured_from_a_synthesis_is_counted_and_said(make_run: Callable[..., Path]) -> None:
    def spoken(cand: str, a: int, s: int, r: int) -> EpisodeLatency:
        # cand-a: every turn measured on scenario 0, one turn left estimated on scenario 1
        lat = timings(cand, a, s, r)
        if cand.endswith("a"):
            lat.turns = [
                t.model_copy(update={"spoken_source": "estimated" if (s, t.turn) == (1, 2) else "measured"})
                for t in lat.turns
            ]
        return lat

    run = make_run(agents=2, scenarios=2, repeats=1, latency=spoken)
    report = build_report(load_runs([run]), n_samples=50)
    a, b = report.latency["cand-a"], report.latency["cand-b"]
    assert (a.talk_measured_calls, b.talk_measured_calls) == (2, 0)
    assert "2 call(s) with talk time measured from the voice channel's synthesis" in a.source_note
    assert "talk time measured" not in b.source_note


def test_negative_budget_is_refused(make_run: Callable[..., Path]) -> None:
    runs = load_runs([make_run(agents=1, scenarios=1, repeats=1)])
    with pytest.raises(ValueError, match="latency budget"):
        build_report(runs, n_samples=50, latency_budget_s=-1.0)
    with pytest.raises(ValueError, match="latency budget"):
        build_report(runs, n_samples=50, latency_budget_s=math.nan)


def test_terminal_shows_latency_column_section_and_budget(report: Any) -> None:
    import io

    from rich.console import Console

    from callbench.report.terminal.tables import render_terminal

    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=250, emoji=False))
    text = buf.getvalue()
    median = report.latency["cand-a"].first_word["p50"].estimate
    assert "1st word p50 ms" in text and f"{1000 * median:.0f} [" in text
    assert "Budget 900ms" in text and "Paired latency" in text
    assert "Time to first word by slice" in text and "tools before speech 2+" in text


def test_pareto_frontier_keeps_only_undominated_candidates() -> None:
    from callbench.report.html.latency_chart import Point, pareto

    fast_bad, slow_good, slow_bad, tie = (Point("f", 300, 40), Point("s", 900, 80), Point("d", 950, 70),
                                          Point("t", 300, 40))
    assert [p.label for p in pareto([fast_bad, slow_good, slow_bad])] == ["f", "s"]
    assert {p.label for p in pareto([fast_bad, tie])} == {"f", "t"}  # equal points dominate neither


def test_html_figure_has_quality_latency_chart_with_frontier(report: Any) -> None:
    from callbench.report.html.figures import figures

    (fig,) = [f for f in figures(report, {}) if f.id == "fig-latency"]
    assert "overall score" in fig.title or "outcome success" in fig.title
    assert fig.svg.count('class="frontier"') >= 1 and "budget" in fig.svg and "900ms" in fig.caption
    assert fig.svg.count("<circle cx=") == 2  # one dot per candidate


def test_html_page_has_latency_table(report: Any, make_run: Callable[..., Path]) -> None:
    from callbench.report.html.page import render_html

    run = make_run("r2", agents=1, scenarios=1, repeats=1, latency=timings)
    runs = load_runs([run])
    page = render_html(build_report(runs, n_samples=50), runs, include_traces=False)
    assert 'id="latency"' in page and "within budget %" in page and 'id="fig-latency"' in page


def test_report_flags_latency_measured_under_other_concurrency_or_days_apart(
        make_run: Callable[..., Path]) -> None:
    from callbench.runfolder.manifest import MeasuredAt, RunManifest
    from callbench.trace import atomic_write_text

    def later(c: str, a: int, s: int, r: int) -> EpisodeLatency:
        return timings(c, a, s, r).model_copy(update={"started_at": "2026-01-03T09:00:00+00:00"})

    first = make_run("r1", candidates=("cand-a",), agents=1, scenarios=1, repeats=1, latency=timings)
    second = make_run("r2", candidates=("cand-b",), agents=1, scenarios=1, repeats=1, latency=later)
    for run, concurrency, note in ((first, 4, "eu-west, office fibre"), (second, 16, None)):
        m = RunManifest.model_validate_json((run / "manifest.json").read_text())
        m.measured_at = [MeasuredAt(started=m.started, platform="Linux-test", cpu_count=8,
                                    concurrency=concurrency, note=note)]
        atomic_write_text(run / "manifest.json", m.model_dump_json())
    text = "\n".join(build_report(load_runs([first, second]), n_samples=50).latency_warnings)
    assert "Linux-test (8 CPUs), concurrency 4, note: eu-west, office fibre" in text
    assert "different concurrency (episodes at once): cand-a 4, cand-b 16" in text
    assert "more than a day apart" in text and "2026-01-03 09:00" in text
    same = build_report(load_runs([first]), n_samples=50).latency_warnings
    assert len(same) == 1 and "different concurrency" not in same[0]


@pytest.mark.parametrize(("given", "seconds"), [("800ms", 0.8), ("1.2s", 1.2), ("650", 0.65), ("0ms", 0.0)])
def test_latency_budget_option_reads_ms_and_s(given: str, seconds: float) -> None:
    from callbench.cli.common import _latency_budget

    assert _latency_budget(given) == pytest.approx(seconds)


@pytest.mark.parametrize("given", ["fast", "-5ms", "inf", "nanms"])
def test_latency_budget_option_refuses_nonsense(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from callbench.cli.common import _latency_budget

    with pytest.raises(typer.Exit):
        _latency_budget(given)
    assert "--latency-budget" in capsys.readouterr().err


def test_json_report_holds_latency_and_reads_back(report: Any, tmp_path: Path) -> None:
    import json

    from callbench.report.export.json_csv import read_json, write_json

    path = tmp_path / "r.json"
    write_json(report, path)
    data = json.loads(path.read_text())
    assert data["settings"]["latency_budget_s"] == 0.9
    assert data["latency"]["cand-b"]["first_word"]["p90"]["estimate"] == report.latency["cand-b"].first_word[
        "p90"].estimate
    assert data["paired_latency"][0]["metric"] == "first_word_median_ms"
    assert read_json(path).latency["cand-a"].within_budget == report.latency["cand-a"].within_budget
