"""A stopped ``callbench report`` says what it wrote (runs/supervisor.py ``stop_message``): report
files are written whole or not at all, so the line names the files finished before the stop, or
says that nothing was written, and never the ``run`` command's "resume" wording."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli.app import app
from callbench.report.export import json_csv as export
from fakes.synthetic import synthetic_runs


def _stop(*_: object, **__: object) -> None:
    raise KeyboardInterrupt


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_runs().make_synthetic_run(tmp_path_factory.mktemp("r") / "syn", 6, seed=3,
                                               candidates=2)


def test_a_stop_after_the_json_names_it_and_nothing_else(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "write_csv", _stop)
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    done = CliRunner().invoke(app, ["report", str(run), "--json", str(out_json), "--csv", str(out_csv),
                                    "--html", str(tmp_path / "r.html"), "--samples", "50"])
    assert done.exit_code == 130
    assert done.stderr.strip().splitlines()[-1] == (
        f"interrupted (Ctrl-C): the report was not finished; written before the stop: JSON report "
        f"{out_json}; nothing else was written; run the same command to make the whole report"
    )
    assert out_json.is_file() and not out_csv.exists() and not (tmp_path / "r.html").exists()


def test_a_stop_before_any_file_says_nothing_was_written(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "write_json", _stop)
    done = CliRunner().invoke(app, ["report", str(run), "--json", str(tmp_path / "r.json"),
                                    "--html", str(tmp_path / "r.html"), "--samples", "50"])
    assert done.exit_code == 130
    assert done.stderr.strip().splitlines()[-1] == (
        "interrupted (Ctrl-C): the report was not finished and nothing was written; run the same "
        "command to make it"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []
