"""A run whose manifest says official but one of whose planned calls has lost its trace file is not
official in the report (terminal, JSON, grade set), and the report says why."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from callbench.report.build import build_report
from callbench.report.load import load_runs
from callbench.report.terminal import render_terminal
from callbench.runfolder import episode_files

MakeRun = Callable[..., Path]


def _official_run(make_run: MakeRun) -> Path:
    rd = make_run(candidates=("a",), agents=1, scenarios=3, repeats=1)
    manifest = json.loads((rd / "manifest.json").read_text())
    manifest.update(official=True, completed=3, code_versions=["0.1.0"], ended="2026-01-01T01:00:00Z")
    (rd / "manifest.json").write_text(json.dumps(manifest))
    return rd


def _report(rd: Path) -> tuple[str, dict]:  # type: ignore[type-arg]
    report = build_report(load_runs([rd]), n_samples=20)
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=400))
    return " ".join(buf.getvalue().split()), json.loads(report.model_dump_json())


def test_an_intact_official_run_stays_official(make_run: MakeRun) -> None:
    text, data = _report(_official_run(make_run))
    assert data["runs"][0]["official"] is True and data["runs"][0]["missing_traces"] == []
    assert "official yes (clean tree)" in text


@pytest.mark.parametrize("grade_too", [False, True])
def test_a_missing_trace_makes_the_run_not_official(make_run: MakeRun, grade_too: bool) -> None:
    rd = _official_run(make_run)
    gone = "a__ag0__sc1__r0"
    episode_files.paths(rd / "traces")[gone].unlink()
    if grade_too:
        episode_files.paths(rd / "grades" / "gs1" / "episodes")[gone].unlink()
    text, data = _report(rd)
    run = data["runs"][0]
    assert run["official"] is False
    assert run["missing_traces"] == [gone]
    assert f"official no (clean tree; 1 planned call has no trace file: {gone})" in text
    assert data["grade_sets"][0]["official"] is False


def test_an_unfinished_run_does_not_list_its_calls_still_to_run(make_run: MakeRun) -> None:
    rd = make_run(candidates=("a",), agents=1, scenarios=3, repeats=1,
                  not_run=lambda c, a, s, r: s == 2)
    manifest = json.loads((rd / "manifest.json").read_text())
    manifest.update(completed=2)  # the third call never ran: its trace is not missing, it is to come
    (rd / "manifest.json").write_text(json.dumps(manifest))
    text, data = _report(rd)
    assert data["runs"][0]["missing_traces"] == [] and data["runs"][0]["official"] is False
    assert "no trace file" not in text
    # one of the two finished calls loses its trace: more are missing than never ran
    episode_files.paths(rd / "traces")["a__ag0__sc0__r0"].unlink()
    text, data = _report(rd)
    assert data["runs"][0]["missing_traces"] == ["a__ag0__sc0__r0", "a__ag0__sc2__r0"]
    assert "2 planned calls have no trace file: a__ag0__sc0__r0, a__ag0__sc2__r0" in text


def _runs_table(page: str) -> str:
    """The HTML of the page's runs table (from its heading to the end of its table)."""
    start = page.index('<h2 id="runs">')
    return page[start:page.index("</table>", start)]


def _pages(rd: Path, tmp_path: Path, ids: list[str] | None = None) -> dict[str, str]:
    """The one-file report and the folder's index page of ``rd`` (``ids`` replacing the run's
    missing traces, as a manifest naming other episodes would give)."""
    from callbench.report.html import render_html
    from callbench.report.html_folder import write_html_folder
    from callbench.report.viewer import call_data

    runs = load_runs([rd])
    report = build_report(runs, n_samples=20)
    if ids is not None:
        report.runs[0].missing_traces = ids
    write_html_folder(report, call_data(runs), tmp_path / "folder", reason="test")
    return {"one file": render_html(report, runs),
            "folder index": (tmp_path / "folder" / "index.html").read_text(encoding="utf-8")}


def test_the_html_runs_table_names_the_calls_without_a_trace(make_run: MakeRun, tmp_path: Path) -> None:
    rd = _official_run(make_run)
    gone = "a__ag0__sc1__r0"
    episode_files.paths(rd / "traces")[gone].unlink()
    for kind, page in _pages(rd, tmp_path).items():
        table = _runs_table(page)
        named = "1 planned call has no trace file:<wbr> a_<wbr>_<wbr>ag0_<wbr>_<wbr>sc1_<wbr>_<wbr>r0"
        assert named in table, kind
        assert "a_<wbr>_<wbr>ag0_<wbr>_<wbr>sc0_<wbr>_<wbr>r0" not in table, kind


def test_the_html_shortens_a_long_list_and_escapes_hostile_ids(make_run: MakeRun, tmp_path: Path) -> None:
    rd = _official_run(make_run)
    hostile = '"><script>alert(1)</script>'
    ids = [hostile] + [f"e{i}" for i in range(1, 14)]
    for kind, page in _pages(rd, tmp_path, ids).items():
        table = _runs_table(page)
        assert "<script>alert(1)" not in page, kind
        assert "&#34;&gt;&lt;script&gt;alert(1)&lt;/<wbr>script&gt;" in table, kind
        assert "14 planned calls have no trace file:<wbr> " in table, kind
        assert "e8, e9 (+4 more)" in table and "e10" not in table, kind  # the first 10 ids, then a count
