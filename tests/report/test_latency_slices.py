"""Latency slices by turn index, agent and scenario: each figure recomputed from the traces' turn
timings, the intervals, the thin-slice warnings, and what the JSON, HTML and terminal reports show."""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from callbench.report.model.build import build_report
from callbench.report.model.latency import fixed_slice_warned, turn_bucket
from callbench.report.model.load import load_runs
from callbench.stats.bootstrap import BootstrapResult
from callbench.trace import EpisodeLatency, TurnLatency

AGENTS, SCENARIOS, REPEATS = 2, 10, 2
SKIPPED = (1, 9, 0)  # (agent, scenario, repeat) of the one skipped call


def n_turns(a: int, s: int, r: int) -> int:
    """Four turns, but agent 0's scenario 0 runs long (five to seven): the 5+ slice is thin."""
    return 5 + 2 * r if (a, s) == (0, 0) else 4


def timings(cand: str, a: int, s: int, r: int) -> EpisodeLatency:
    """Seeded times per call: the greeting slower than the rest, scenario s slower by 0.05 s per
    index, agent 1 slower by 0.2 s; the second turn of agent 1's scenario 3, repeat 1 says nothing."""
    rng = np.random.default_rng([ord(cand[-1]), a, s, r, 11])
    turns = []
    for t in range(n_turns(a, s, r)):
        silent = (a, s, r, t) == (1, 3, 1, 1)
        first = None if silent else round(float(rng.gamma(4.0, 0.1)) + 0.05 * s + 0.2 * a + (0.6 if t == 0
                                                                                            else 0.0), 4)
        turns.append(TurnLatency(turn=t, start_s=10.0 * t, time_to_first_word_s=first, completion_s=3.0,
                                 spoken_s=1.0, words=3, requests=1, streamed=True))
    return EpisodeLatency(started_at="2026-01-01T00:00:00+00:00", turns=turns)


def spoken(cand: str, keep: Callable[[int, int, int, int], bool]) -> list[float]:
    """Every time to first word of ``cand``'s timed calls whose (agent, scenario, repeat, turn
    position from 1) ``keep`` accepts."""
    out = []
    for a in range(AGENTS):
        for s in range(SCENARIOS):
            for r in range(REPEATS):
                if (a, s, r) == SKIPPED:
                    continue
                for i, t in enumerate(timings(cand, a, s, r).turns, start=1):
                    if t.time_to_first_word_s is not None and keep(a, s, r, i):
                        out.append(t.time_to_first_word_s)
    return out


def inverted_cdf(values: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(values), q, method="inverted_cdf"))


@pytest.fixture
def runs(make_run: Callable[..., Path]) -> Any:
    return load_runs([make_run(agents=AGENTS, scenarios=SCENARIOS, repeats=REPEATS, latency=timings,
                               skip=lambda c, a, s, r: (a, s, r) == SKIPPED)])


@pytest.fixture
def report(runs: Any) -> Any:
    return build_report(runs, n_samples=200, seed=5)


def check(result: BootstrapResult, values: list[float], q: float) -> None:
    assert result.estimate == pytest.approx(inverted_cdf(values, q))
    assert result.low is not None and result.high is not None
    assert result.low <= result.estimate <= result.high


@pytest.mark.parametrize("cand", ["cand-a", "cand-b"])
def test_turn_index_slices_match_a_recomputation(report: Any, cand: str) -> None:
    lat = report.latency[cand]
    assert list(lat.by_turn_index) == ["1", "2", "3", "4", "5+"]
    for bucket, qs in lat.by_turn_index.items():
        values = spoken(cand, lambda a, s, r, i, b=bucket: turn_bucket(i) == b)
        for label, q in (("p50", 0.5), ("p90", 0.9)):
            check(qs[label], values, q)
    # positions 5, 6 and 7 pooled: agent 0's scenario 0 only (five turns, then seven)
    assert lat.by_turn_index["5+"]["p50"].n_episodes == 2 and lat.by_turn_index["5+"]["p50"].n_scenarios == 1
    assert "1 agent and 1 scenario" in (lat.by_turn_index["5+"]["p90"].warning or "")
    assert lat.by_turn_index["2"]["p50"].warning is None  # 2 agents, 10 scenarios
    assert lat.by_turn_index["2"]["p50"].n_excluded == 1  # the silent second turn
    # the greeting (turn 1) is the slow one, by construction
    assert lat.by_turn_index["1"]["p50"].estimate > lat.by_turn_index["2"]["p90"].estimate


@pytest.mark.parametrize("cand", ["cand-a", "cand-b"])
def test_agent_and_scenario_slices_match_a_recomputation(report: Any, cand: str) -> None:
    lat = report.latency[cand]
    assert list(lat.by_agent) == ["ag0", "ag1"]
    for agent, qs in lat.by_agent.items():
        values = spoken(cand, lambda a, s, r, i, g=agent: f"ag{a}" == g)
        for label, q in (("p50", 0.5), ("p90", 0.9)):
            check(qs[label], values, q)
        assert qs["p50"].n_agents == 1 and qs["p50"].n_scenarios == SCENARIOS
        assert qs["p50"].warning is None  # one agent by construction, ten scenarios: not thin
    assert lat.by_agent["ag1"]["p50"].n_episodes == SCENARIOS * REPEATS - 1  # the skipped call is out
    assert len(lat.by_scenario) == AGENTS * SCENARIOS
    for key, qs in lat.by_scenario.items():
        values = spoken(cand, lambda a, s, r, i, k=key: f"ag{a}/sc{s}" == k)
        for label, q in (("p50", 0.5), ("p90", 0.9)):
            check(qs[label], values, q)
    # a scenario id is unique only within its agent: ag0/sc3 and ag1/sc3 are two slices
    assert lat.by_scenario["ag0/sc3"]["p50"].estimate != lat.by_scenario["ag1/sc3"]["p50"].estimate
    one = lat.by_scenario["ag1/sc9"]["p50"]  # its other repeat was skipped: one call
    assert one.n_episodes == 1 and one.low == one.high == one.estimate
    assert one.warning == ("only 1 call of this scenario (fewer than 10; only its repeats are redrawn): "
                           "interval unreliable")
    assert "only 2 calls of this scenario" in (lat.by_scenario["ag0/sc0"]["p90"].warning or "")


def test_a_scenario_slice_redraws_its_repeats_only(report: Any) -> None:
    # two calls: every resample is call 0 twice, call 1 twice, or both, so the interval lies
    # within the quantiles of those three pools
    qs = report.latency["cand-a"].by_scenario["ag0/sc4"]
    calls = [[t.time_to_first_word_s for t in timings("cand-a", 0, 4, r).turns] for r in range(REPEATS)]
    pools = [calls[0], calls[1], calls[0] + calls[1]]
    for label, q in (("p50", 0.5), ("p90", 0.9)):
        possible = {inverted_cdf([v for v in pool if v is not None], q) for pool in pools}
        r = qs[label]
        assert r.low in possible and r.high in possible and r.n_agents == r.n_scenarios == 1


def test_fixed_slice_warnings_count_the_levels_that_are_redrawn() -> None:
    def result(episodes: int, scenarios: int) -> BootstrapResult:
        return BootstrapResult(method="hierarchical", estimate=0.5, low=0.4, high=0.6, n_episodes=episodes,
                               n_agents=1, n_scenarios=scenarios)

    assert fixed_slice_warned(result(12, 1), "scenario").warning is None
    assert "only 9 calls" in (fixed_slice_warned(result(9, 1), "scenario").warning or "")
    assert fixed_slice_warned(result(30, 10), "agent").warning is None
    assert "only 9 scenarios of this agent" in (fixed_slice_warned(result(30, 9), "agent").warning or "")
    with pytest.raises(ValueError, match="an agent or a scenario"):
        fixed_slice_warned(result(30, 10), "language")
    with pytest.raises(ValueError, match="counts from 1"):
        turn_bucket(0)
    assert [turn_bucket(i) for i in (1, 4, 5, 30)] == ["1", "4", "5+", "5+"]


def test_slices_derive_from_the_seed_and_their_labels(runs: Any, report: Any) -> None:
    again = build_report(runs, n_samples=200, seed=5).latency["cand-a"]
    lat = report.latency["cand-a"]
    assert again.by_scenario == lat.by_scenario and again.by_turn_index == lat.by_turn_index
    other = build_report(runs, n_samples=200, seed=6).latency["cand-a"]
    assert other.by_agent["ag0"]["p50"].estimate == lat.by_agent["ag0"]["p50"].estimate
    assert [(r["p90"].low, r["p90"].high) for r in other.by_agent.values()] != [
        (r["p90"].low, r["p90"].high) for r in lat.by_agent.values()]


def test_json_report_holds_every_new_slice(report: Any, tmp_path: Path) -> None:
    from callbench.report.export.json_csv import read_json, write_json

    path = tmp_path / "r.json"
    write_json(report, path)
    data = json.loads(path.read_text())["latency"]["cand-b"]
    lat = report.latency["cand-b"]
    assert list(data["by_turn_index"]) == ["1", "2", "3", "4", "5+"]
    assert sorted(data["by_agent"]) == ["ag0", "ag1"] and len(data["by_scenario"]) == 20
    assert data["by_scenario"]["ag1/sc9"]["p50"]["estimate"] == lat.by_scenario["ag1/sc9"]["p50"].estimate
    assert data["by_scenario"]["ag1/sc9"]["p50"]["warning"].startswith("only 1 call")
    assert data["by_turn_index"]["5+"]["p90"]["high"] == lat.by_turn_index["5+"]["p90"].high
    assert read_json(path).latency["cand-b"].by_agent == lat.by_agent


def test_html_shows_turn_slices_and_sortable_agent_and_scenario_tables(report: Any, runs: Any) -> None:
    from callbench.report.html.page import render_html

    page = render_html(report, runs, include_traces=False)
    lat = report.latency["cand-a"]
    turn1 = lat.by_turn_index["1"]["p50"]
    assert f"<td>turn 1</td><td>{1000 * turn1.estimate:.0f} [" in page
    assert "turn 1, the greeting, counts from the call connecting" in page
    for kind, n in (("agent", 4), ("scenario", 40)):
        start = page.index(f'<details class="latency-ranked" id="latency-by-{kind}">')
        block = page[start:page.index("</details>", start)]
        assert f"Time to first word by {kind}: {n} rows" in block and 'class="sortable"' in block
        row = r'<tr><td>cand-a</td><td>([^<]*(?:<wbr>[^<]*)*)</td><td class="num" data-v="([^"]*)"'
        rows = re.findall(row, block)
        keys = [k.replace("<wbr>", "") for k, _ in rows]
        medians = [float(v) for _, v in rows]
        by = lat.by_agent if kind == "agent" else lat.by_scenario
        assert sorted(keys) == sorted(by) and medians == sorted(medians, reverse=True)  # slowest first
        assert medians[0] == pytest.approx(1000 * max(qs["p50"].estimate for qs in by.values()))
    # the caution in short, the whole warning on hover
    warning = lat.by_scenario["ag1/sc9"]["p50"].warning
    assert f'title="{warning}">⚠ only 1 call of this scenario</span>' in page


def test_terminal_shows_turn_slices_and_the_slowest_scenarios(report: Any) -> None:
    from rich.console import Console

    from callbench.report.terminal.tables import render_terminal

    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=250, emoji=False))
    text = buf.getvalue()
    lat = report.latency["cand-b"]
    five = lat.by_turn_index["5+"]["p50"]
    assert re.search(rf"cand-b\s+turn 5\+\s+{1000 * five.estimate:.0f} \[", text)
    ranked = sorted(lat.by_scenario.items(), key=lambda kv: -kv[1]["p50"].estimate)[:3]
    named = ", ".join(f"{k} {1000 * qs['p50'].estimate:.0f} ms (†)" for k, qs in ranked)
    flat = " ".join(text.split())
    assert f"cand-b: slowest scenarios by median time to first word: {named} (of 20; † thin)" in flat
    assert flat.count("latency.<candidate>.by_agent / by_scenario in the JSON report") == 1
    assert "5+ pools the fifth turn and every later one" in flat


def test_scenario_table_starts_collapsed_and_sorts_in_a_browser(report: Any, runs: Any, tmp_path: Path
                                                                 ) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("no chromium installed (apt-get install chromium)")
    from callbench.report.html.page import render_html

    html = tmp_path / "report.html"
    html.write_text(render_html(report, runs, include_traces=False), encoding="utf-8")
    medians = ("Array.from(document.querySelectorAll('#latency-by-scenario tbody tr'))"
               ".map(r => r.cells[2].textContent)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium,
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 900, "height": 900})
        page.goto(html.as_uri())
        page.wait_for_load_state("load")
        assert not page.is_visible("#latency-by-scenario table")  # collapsed until opened
        page.click("#latency-by-scenario > summary")
        assert page.is_visible("#latency-by-scenario table")
        page.click("#latency-by-scenario thead th:nth-child(3) button")
        shown = [float(t.split(" [")[0]) for t in page.evaluate(medians)]
        browser.close()
    every = sorted(1000 * qs["p50"].estimate for lat in report.latency.values()
                   for qs in lat.by_scenario.values())
    assert len(shown) == 40 and shown == sorted(shown) and shown == [round(v) for v in every]
