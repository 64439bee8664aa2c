"""The CSV export says, on every row, which grade set scored it, that grade set's judge-validation
status and whether it is official (docs/report.md, "The CSV export")."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from callbench.audit.store import save_judge_audit
from callbench.cli import app
from callbench.report.export.json_csv import CSV_COLUMNS, read_csv, write_csv
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.trace import RoleInfo

from .test_judge_validation import _audit

MakeRun = Callable[..., Path]


def _make_official(rd: Path) -> None:
    manifest = json.loads((rd / "manifest.json").read_text())
    planned = len(manifest["planned"])
    manifest.update(official=True, completed=planned, code_versions=["0.1.0"])
    (rd / "manifest.json").write_text(json.dumps(manifest))


def test_rows_carry_grade_set_validation_and_official(make_run: MakeRun, tmp_path: Path) -> None:
    validated = make_run("ok", candidates=("a",), agents=1, scenarios=2, repeats=1)
    # another task judge: the saved validation (of scripted:judge) does not cover it
    plain = make_run("plain", candidates=("b",), agents=1, scenarios=2, repeats=1,
                     task_judge=RoleInfo(spec="scripted:other"))
    for rd in (validated, plain):
        _make_official(rd)
    save_judge_audit(_audit(0.92, True, scenarios=4), validated / "judge_audits" / "v.json")
    out = tmp_path / "episodes.csv"
    result = CliRunner().invoke(app, ["report", str(validated), str(plain), "--csv", str(out), "--no-html",
                                      "--samples", "20"])
    assert result.exit_code == 0, result.output
    rows = read_csv(out)
    assert CSV_COLUMNS[-3:] == ["grade_set_id", "judge_validation", "official"]
    by_run = {(r["run_id"], r["grade_set_id"], r["judge_validation"], r["official"]) for r in rows}
    assert by_run == {("ok", "gs1", "validated", True), ("plain", "gs1", "not_validated", False)}
    assert len(rows) == 4


def test_without_report_status_the_columns_are_empty(make_run: MakeRun, tmp_path: Path) -> None:
    runs = load_runs([make_run(candidates=("a",), agents=1, scenarios=1, repeats=1)])
    write_csv([r for run in runs for r in run.records], tmp_path / "e.csv")
    (row,) = read_csv(tmp_path / "e.csv")
    assert row["grade_set_id"] is None and row["judge_validation"] is None and row["official"] is None
    report = build_report(runs, n_samples=20)
    write_csv([r for run in runs for r in run.records], tmp_path / "f.csv", report.grade_sets)
    (row,) = read_csv(tmp_path / "f.csv")
    assert (row["grade_set_id"], row["judge_validation"], row["official"]) == ("gs1", "not_validated", False)
