"""Grades from scripted judges are named as stand-ins in every output: the
terminal and HTML reports carry a banner naming them, the JSON a ``stand_in_judges`` list, and
``callbench grade``'s summary a line; a report graded by model judges carries none of these."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from callbench.grade.models import GradeSetManifest
from callbench.grade.store import grade_set_summary
from callbench.report.export.json_csv import write_json
from callbench.report.html.page import render_html
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.report.terminal.tables import render_terminal

MakeRun = Callable[..., Path]


def _set_judges(run: Path, spec: str) -> None:
    path = run / "grades" / "gs1" / "grade_set.json"
    gs = GradeSetManifest.model_validate_json(path.read_text())
    gs.task_judge = gs.task_judge.model_copy(update={"spec": spec})
    gs.conversation_judge = gs.conversation_judge.model_copy(update={"spec": spec})
    path.write_text(gs.model_dump_json())


def _outputs(run: Path, tmp_path: Path) -> tuple[str, str, dict]:
    runs = load_runs([run])
    report = build_report(runs, n_samples=20)
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=100))
    write_json(report, tmp_path / "r.json")
    return buf.getvalue(), render_html(report, runs, include_traces=False), json.loads(
        (tmp_path / "r.json").read_text())


def test_scripted_judges_are_named_as_stand_ins_everywhere(make_run: MakeRun, tmp_path: Path) -> None:
    run = make_run(candidates=("a",), agents=2, scenarios=1, repeats=1)
    _set_judges(run, "scripted:met")
    terminal, html, data = _outputs(run, tmp_path)
    rid = data["runs"][0]["run_id"]
    expected = [f"conversation judge scripted:met (run {rid})", f"task judge scripted:met (run {rid})"]
    assert data["stand_in_judges"] == expected
    flat = " ".join(terminal.replace("│", " ").split())
    assert "STAND-IN JUDGES" in flat and "not a measurement of quality" in flat
    assert f"task judge scripted:met (run {rid})" in flat
    assert 'id="stand-in-judges"' in html and "not a measurement of quality" in html
    assert f"task judge scripted:met (run {rid})" in html
    summary = grade_set_summary(run, "gs1")
    assert any(line.startswith("stand-in judges (scripted:met)") for line in summary)


def test_model_judges_carry_no_stand_in_mark(make_run: MakeRun, tmp_path: Path) -> None:
    run = make_run(candidates=("a",), agents=2, scenarios=1, repeats=1)
    _set_judges(run, "openai:gpt-4o")
    terminal, html, data = _outputs(run, tmp_path)
    assert data["stand_in_judges"] == []
    assert "STAND-IN" not in terminal and 'id="stand-in-judges"' not in html
    assert not any("stand-in" in line for line in grade_set_summary(run, "gs1"))
