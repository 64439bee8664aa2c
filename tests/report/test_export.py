from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from callbench.bundle.models import Diagnostic
from callbench.cli import app
from callbench.report.export.json_csv import (
    CSV_COLUMNS,
    episode_row,
    read_csv,
    read_json,
    write_csv,
    write_json,
)
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.report.terminal.tables import render_terminal

MakeRun = Callable[..., Path]


def test_json_round_trip(make_run: MakeRun, tmp_path: Path) -> None:
    runs = load_runs([make_run(skip=lambda c, a, s, r: (a, s, r) == (0, 1, 0))])
    report = build_report(runs, n_samples=100)
    path = tmp_path / "out" / "report.json"
    write_json(report, path)
    back = read_json(path)
    assert back == report
    assert back.candidates[0].diagnostics[Diagnostic.OUTCOME_REACHED].score == pytest.approx(
        report.candidates[0].overall.estimate
    )
    assert len(back.skipped) == 2 and back.paired[0].wins == 6
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match=r"bad\.json: not a callbench report JSON"):
        read_json(tmp_path / "bad.json")


def test_csv_round_trip(make_run: MakeRun, tmp_path: Path) -> None:
    runs = load_runs(
        [
            make_run(
                skip=lambda c, a, s, r: (a, s, r) == (0, 1, 0),
                not_run=lambda c, a, s, r: (a, s, r) == (2, 1, 1),
            )
        ]
    )
    records = [r for run in runs for r in run.records]
    path = tmp_path / "episodes.csv"
    write_csv(records, path)
    rows = read_csv(path)
    assert len(rows) == len(records) == 24
    for rec, row in zip(records, rows, strict=True):
        expected = episode_row(rec)
        # empty strings are written as empty cells and read back as None
        expected = {k: (None if v == "" else v) for k, v in expected.items()}
        assert row == expected
    scored = next(r for r in rows if r["status"] == "scored" and r["episode_id"] == "cand-a__ag1__sc0__r1")
    assert scored["overall"] == pytest.approx(71.0) and scored["passed"] is True
    assert scored["outcome_reached_weight"] == 2.0 and scored["memory_points"] is None
    assert scored["input_tokens"] == 150 and scored["cost_usd"] == pytest.approx(0.0015)
    skipped = next(r for r in rows if r["status"] == "skipped")
    assert skipped["overall"] is None and skipped["skip_reason"] == "caller validation failed 3 times"
    assert list(json.loads(json.dumps(CSV_COLUMNS))) == path.read_text().splitlines()[0].split(",")


def test_cli_writes_all_outputs(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run()
    out = tmp_path / "o"
    args = ["report", str(rd), "--html", str(out / "r.html"), "--json", str(out / "r.json")]
    args += ["--csv", str(out / "r.csv"), "--samples", "100"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    # the path on the label's line when it fits the terminal, else on a line of its own
    uri = (out / "r.html").resolve().as_uri()
    assert f"HTML report: {uri}" in result.output or f"HTML report:\n  {uri}\n" in result.output
    assert (out / "r.html").read_text().count('id="fig-leaderboard"') == 1
    assert read_json(out / "r.json").settings.n_samples == 100
    assert len(read_csv(out / "r.csv")) == 24
    result = CliRunner().invoke(app, ["report", str(rd), "--samples", "50"])
    assert result.exit_code == 0 and (rd / "report.html").is_file()


def test_terminal_tables(make_run: MakeRun) -> None:
    runs = load_runs([make_run(skip=lambda c, a, s, r: (c, a, s) == ("cand-b", 0, 0))])  # both repeats
    report = build_report(runs, n_samples=100)
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=250))
    text = buf.getvalue()
    a = report.candidates[0]
    assert a.candidate == "cand-a"
    assert f"{a.overall.estimate:.1f} [{a.overall.low:.1f}, {a.overall.high:.1f}]" in text
    # cand-a beats cand-b by exactly 10 on each of the 5 scenarios both completed
    assert report.paired[0].n_scenarios == 5 and report.paired[0].only_a == 1
    assert "+10.0 [10.0, 10.0]† *" in text  # 5 shared scenarios: marked too few
    assert "caller validation failed 3 times" in text
    assert "Skipped episodes (2; excluded from scores)" in text
    assert "outcome reached" in text and "SMOKE TEST" not in text and "UNFAIR" not in text
    assert "$0.0180" in text  # cand-a: 12 traces x (0.001 + 0.0005)
    # the total row sums each column (it once put the token total under "cached input")
    cost_table = text[text.index("Cost and tokens") :]
    total = next(line for line in cost_table.splitlines() if "total" in line)
    usages = list(a.usage.values())
    expected = [sum(u.calls for u in usages), sum(u.input_tokens for u in usages)]
    expected += [sum(u.output_tokens for u in usages), sum(u.cached_input_tokens for u in usages)]
    cells = total.split()[1:5]  # total, calls, input, output, cached input, cost
    assert cells == [f"{n:,}" for n in expected]


def test_report_command_called_as_a_function_uses_real_defaults(make_run: MakeRun) -> None:
    from callbench.cli import report as report_command

    rd = make_run(agents=1, scenarios=1, repeats=1)
    report_command(run_dirs=[rd], samples=50)  # as `callbench demo` calls it
    html = (rd / "report.html").read_text(encoding="utf-8")
    assert 'id="e0"' in html  # trace viewer included by default


@pytest.mark.parametrize(
    ("option", "target"),
    [
        ("--csv", "manifest.json"),
        ("--html", "traces/x.json"),
        ("--json", "grades/g.json"),
        ("--csv", "index.sqlite"),
    ],
)
def test_report_never_overwrites_a_runs_saved_data(make_run: MakeRun, option: str, target: str) -> None:
    """Regression: ``--csv RUN/manifest.json`` replaced the manifest, and the run was lost."""
    rd = make_run(agents=1, scenarios=1, repeats=1)
    path = rd / target
    before = path.read_bytes() if path.exists() else None
    result = CliRunner().invoke(app, ["report", str(rd), option, str(path), "--samples", "20"])
    assert result.exit_code == 2 and "would overwrite the saved data" in result.output
    assert (path.read_bytes() if path.exists() else None) == before


def test_report_refuses_two_outputs_on_one_path(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1)
    same = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["report", str(rd), "--json", str(same), "--html", str(same)])
    assert result.exit_code == 2 and "both write" in result.output and not same.exists()
