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
from callbench.runs import episode_files

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
