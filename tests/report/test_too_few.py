"""Every interval that means little says so, in every output: a paired
comparison on fewer than MIN_PAIRED_SCENARIOS shared scenarios and an interval from fewer than
MIN_SCORED_FOR_INTERVAL scored calls carry the mark in the terminal, the HTML and the JSON."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from callbench.report.export.json_csv import read_json, write_json
from callbench.report.html.page import render_html
from callbench.report.model.build import Report, build_report
from callbench.report.model.load import load_runs
from callbench.report.terminal.tables import PAIRED_FEW_NOTE, render_terminal
from callbench.stats.paired import MIN_PAIRED_SCENARIOS, PairedComparison

MakeRun = Callable[..., Path]


def _report(run: Path) -> tuple[Report, list]:
    runs = load_runs([run])
    return build_report(runs, n_samples=50), runs


def _terminal(report: Report) -> str:
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=120))
    return buf.getvalue()


def test_paired_comparison_knows_when_it_is_too_few() -> None:
    few = PairedComparison(candidate_a="a", candidate_b="b", n_scenarios=3, mean_difference=12.7, low=2.0,
                           high=20.0)
    enough = few.model_copy(update={"n_scenarios": MIN_PAIRED_SCENARIOS})
    none = few.model_copy(update={"mean_difference": None})
    assert few.too_few and few.excludes_zero
    assert few.too_few_note is not None and "3 shared scenario(s)" in few.too_few_note
    assert not enough.too_few and enough.too_few_note is None
    assert not none.too_few  # no difference, nothing to mark


def test_three_scenario_comparison_is_marked_in_terminal_html_and_json(make_run: MakeRun,
                                                                       tmp_path: Path) -> None:
    report, runs = _report(make_run(candidates=("a", "b"), agents=3, scenarios=1, repeats=1))
    assert report.paired and all(p.n_scenarios == 3 and p.too_few for p in report.paired)
    out = _terminal(report)
    diff_lines = [line for line in out.splitlines() if "difference [interval]" in line]
    assert diff_lines and all("†" in line for line in diff_lines)
    assert PAIRED_FEW_NOTE in " ".join(out.split())
    page = render_html(report, runs, include_traces=False)
    paired_section = page[page.index('id="paired"'):page.index('id="language-difficulty"')]
    assert paired_section.count("† too few") == len(report.paired) + 1  # each row and the note
    assert "fewer than 10 shared scenarios" in paired_section
    figure = page[page.index('id="fig-paired"'):]
    figure = figure[:figure.index("</div>")]
    assert "† too few" in figure and "#d62728" not in figure  # not drawn red as "excludes 0"
    write_json(report, tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert [p["too_few"] for p in data["paired"]] == [True] * len(report.paired)
    assert data["paired"][0]["too_few_note"].startswith("too few: 3 shared scenario(s)")
    assert data["candidates"][0]["overall"]["too_few"] is True  # 3 scored calls
    assert read_json(tmp_path / "r.json").paired[0].too_few  # the JSON reads back


def test_enough_scenarios_carry_no_mark(make_run: MakeRun) -> None:
    report, runs = _report(make_run(candidates=("a", "b"), agents=3, scenarios=4, repeats=1))
    assert report.paired and not any(p.too_few for p in report.paired)
    assert all(p.n_scenarios == 12 for p in report.paired)
    out = _terminal(report)
    assert "†" not in out and "too few" not in out
    page = render_html(report, runs, include_traces=False)
    assert "† too few" not in page
