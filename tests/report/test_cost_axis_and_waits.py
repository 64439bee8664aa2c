"""The quality-latency chart's third axis (cost per call) and the rate-limit waits beside the
latency notes, in the report model, the terminal, the HTML page and the JSON."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from callbench.models.faults import RateLimitWaits
from callbench.report.model.build import build_report
from callbench.report.model.cost import CostPerCall
from callbench.report.model.load import load_runs
from callbench.runfolder.manifest import MeasuredAt, RunManifest
from callbench.trace import atomic_write_text

from .test_latency_report import timings


@pytest.fixture
def run(make_run: Callable[..., Path]) -> Path:
    return make_run(agents=1, scenarios=2, repeats=2, latency=timings,
                    skip=lambda c, a, s, r: (s, r) == (1, 1))


def _chart(report: Any) -> Any:
    from callbench.report.html.figures import figures

    (fig,) = [f for f in figures(report, {}) if f.id == "fig-latency"]
    return fig


def _radii(svg: str) -> dict[str, float]:
    """Each point's marker radius by candidate (from its title)."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'<g class="point"><title>([^:<]+):[^<]*</title><circle cx="[^"]+" cy="[^"]+" r="([^"]+)"', svg)}


def test_cost_per_call_is_the_candidate_roles_mean_over_counted_calls(run: Path, tmp_path: Path) -> None:
    from callbench.report.export.json_csv import read_json, write_json

    report = build_report(load_runs([run]), n_samples=50)
    # the fixture's candidate usage costs $0.001 a call; the caller's $0.0005 is not the candidate's
    expected = CostPerCall(usd=0.001, calls=3, unpriced=0)
    assert report.cost_per_call == {"cand-a": expected, "cand-b": expected}
    path = tmp_path / "r.json"
    write_json(report, path)
    data = json.loads(path.read_text())
    keys = list(data)
    assert keys.index("cost_per_call") == keys.index("latency") + 1  # next to the latency summary
    assert data["cost_per_call"]["cand-b"] == {"usd": 0.001, "calls": 3, "unpriced": 0}
    assert read_json(path).cost_per_call["cand-a"].usd == 0.001


def test_marker_area_follows_cost_and_the_key_and_caption_name_real_costs(run: Path) -> None:
    report = build_report(load_runs([run]), n_samples=50)
    report.cost_per_call = {"cand-a": CostPerCall(usd=0.002, calls=3),
                            "cand-b": CostPerCall(usd=0.008, calls=3)}
    fig = _chart(report)
    radii = _radii(fig.svg)
    assert radii["cand-a"] < radii["cand-b"] == 14.0  # the dearest is the largest marker
    # area above the $0 marker's grows linearly: a quarter of the cost, a quarter of the extra area
    assert radii["cand-a"] ** 2 - 16.0 == pytest.approx((14.0**2 - 16.0) / 4, abs=0.8)  # r is drawn to 0.1 px
    assert re.findall(r'class="size-key" data-usd="([^"]*)"', fig.svg) == ["0.0", "0.004", "0.008"]
    assert ">$0.004<" in fig.svg and ">$0.008<" in fig.svg
    assert "cheapest cand-a $0.002, dearest cand-b $0.008 per call" in fig.caption
    assert "cand-b: median time to first word (ms)" in fig.svg and "$0.008 per call" in fig.svg  # <desc>
    assert fig.svg.count("<circle cx=") == 2  # still one dot per candidate


def test_unknown_cost_is_hollow_in_the_key_and_named_in_the_caption(run: Path) -> None:
    report = build_report(load_runs([run]), n_samples=50)
    report.cost_per_call = {"cand-a": CostPerCall(usd=0.003, calls=3),
                            "cand-b": CostPerCall(calls=3, unpriced=1)}
    fig = _chart(report)
    assert re.findall(r'class="size-key" data-usd="([^"]*)"', fig.svg) == ["0.0", "0.0015", "0.003", ""]
    assert 'stroke-dasharray="3 2"/></g>' in fig.svg and ">unknown<" in fig.svg
    assert "or a call recorded no usage): cand-b. " in fig.caption
    assert "growing linearly from the smallest dot at $0; cand-a $0.003 per call." in fig.caption
    assert "cand-b: median time to first word (ms)" in fig.svg and "cost unknown" in fig.svg


def _with_waits(run: Path) -> None:
    m = RunManifest.model_validate_json((run / "manifest.json").read_text())
    at = MeasuredAt(started=m.started, platform="Linux-test", cpu_count=8, concurrency=2)
    at.rate_limits = {"candidate": RateLimitWaits(answered_429=3, retry_wait_s=13.5, limiter_wait_s=0.25),
                      "caller": RateLimitWaits(limiter_wait_s=0.5),
                      "task_judge": RateLimitWaits(answered_429=1, retry_wait_s=2.0),
                      "conversation_judge": RateLimitWaits()}
    at.candidate_rate_limits = {"cand-a": RateLimitWaits(answered_429=3, retry_wait_s=13.5),
                                "cand-b": RateLimitWaits()}
    m.measured_at = [at]
    atomic_write_text(run / "manifest.json", m.model_dump_json())


def test_rate_limit_waits_show_beside_the_latency_notes_everywhere(run: Path, tmp_path: Path) -> None:
    from callbench.report.export.json_csv import write_json
    from callbench.report.html.page import render_html
    from callbench.report.terminal.tables import render_terminal

    _with_waits(run)
    runs = load_runs([run])
    report = build_report(runs, n_samples=50)
    total = ("Rate limits while measuring: candidate 3 answered 429, 13.5 s waited before retrying; "
             "task_judge 1 answered 429, 2.0 s waited before retrying; requests queued 0.8 s in all for "
             "callbench's own provider limits")
    assert total in report.latency_warnings
    (throttled,) = [w for w in report.latency_warnings if w.startswith("Candidates whose requests waited")]
    assert "cand-a (3 answered 429, 13.5 s waited before retrying)" in throttled and "cand-b" not in throttled
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=400, emoji=False))
    assert total in buf.getvalue()
    page = render_html(report, runs, include_traces=False)
    assert "cand-a (3 answered 429, 13.5 s waited before retrying)" in page
    path = tmp_path / "r.json"
    write_json(report, path)
    data = json.loads(path.read_text())
    assert data["runs"][0]["measured_at"][0]["rate_limits"]["candidate"] == {
        "answered_429": 3, "retry_wait_s": 13.5, "limiter_wait_s": 0.25}


def test_a_run_without_recorded_waits_says_nothing_of_them(run: Path) -> None:
    report = build_report(load_runs([run]), n_samples=50)
    assert report.latency and not any("Rate limits" in w for w in report.latency_warnings)
