"""``callbench run`` refuses bad input with a clear error (exit 2), never a traceback, and leaves
saved data alone (cases found by trying to break it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runfolder import episode_files

from .conftest import DAIRY

BASE = [
    "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
    "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--repeats", "1",
]


def _run(*extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*BASE, *extra])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        result.exception
    )
    return result.exit_code, result.output


@pytest.mark.parametrize("cutoff", ["nan", "150", "-1"])
def test_cutoff_outside_0_to_100_is_refused(tmp_path: Path, cutoff: str) -> None:
    """Regression: --cutoff nan was accepted, and the grade set it wrote broke the run folder."""
    code, out = _run("--cutoff", cutoff, "--out", str(tmp_path / "r"))
    assert code == 2 and "--cutoff" in out
    assert not (tmp_path / "r" / "grades").exists()


def test_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "afile"
    target.write_text("keep me", encoding="utf-8")
    code, out = _run("--out", str(target))
    assert code == 2 and "is a file" in out
    assert target.read_text(encoding="utf-8") == "keep me"


@pytest.mark.parametrize("kind", ["folder", "not sqlite"])
def test_cache_path_that_is_not_a_cache_is_refused(tmp_path: Path, kind: str) -> None:
    cache = tmp_path / "cache"
    if kind == "folder":
        cache.mkdir()
    else:
        cache.write_text("not a database " * 100, encoding="utf-8")
    code, out = _run("--cache", str(cache), "--out", str(tmp_path / "r"))
    assert code == 2 and "--cache" in out


def test_replay_only_without_a_cache_is_refused(tmp_path: Path) -> None:
    """Regression: it ran with no cache at all, so a real model would have been called."""
    code, out = _run("--cache-mode", "replay_only", "--out", str(tmp_path / "r"))
    assert code == 2 and "needs --cache" in out
    code, out = _run("--cache-mode", "bogus", "--out", str(tmp_path / "r"))
    assert code == 2 and "--cache-mode 'bogus'" in out


def test_corrupt_grade_file_on_resume_is_a_clear_error(tmp_path: Path) -> None:
    out_dir = tmp_path / "r"
    code, _ = _run("--limit", "2", "--out", str(out_dir))
    assert code == 0
    grade_file = next((out_dir / "grades").glob("gs*/episodes/*.json.gz"))
    grade_file.write_text('{"x":', encoding="utf-8")
    traces_before = sorted(p.name for p in (out_dir / "traces").glob("*.json.gz"))
    code, out = _run("--limit", "3", "--out", str(out_dir))
    assert code == 2 and grade_file.name in out
    traces = sorted((out_dir / "traces").glob("*.json.gz"))
    assert {p.name for p in traces} >= set(traces_before)
    assert all(json.loads(episode_files.read_text(p)) for p in traces)


@pytest.mark.parametrize("flag", [["--languages", "xx-XX"], ["--agents", "nope"], ["--difficulty", "easy"]])
def test_refused_run_leaves_no_empty_folder(tmp_path: Path, flag: list[str]) -> None:
    out_dir = tmp_path / "new" / "run"
    code, out = _run(*flag, "--out", str(out_dir))
    assert code == 2 and "error: --" in out
    assert not out_dir.exists()


def test_settings_file_spec_must_match_the_role(tmp_path: Path) -> None:
    """Regression: the file's spec was silently replaced by the command's, keeping its settings."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("caller: {spec: 'scripted:hangup', temperature: 0.5}\n", encoding="utf-8")
    code, out = _run("--settings", str(bad), "--limit", "1", "--out", str(tmp_path / "r1"))
    assert code == 2 and "caller.spec is 'scripted:hangup' but --caller gives 'scripted:plan'" in out
    good = tmp_path / "good.yaml"
    good.write_text("candidate: {spec: 'scripted:reference', temperature: 0.5}\n", encoding="utf-8")
    out_dir = tmp_path / "r2"
    code, out = _run(
        "--candidate", "scripted:hangup", "--settings", str(good), "--limit", "1", "--out", str(out_dir)
    )
    assert code == 0, out
    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    temps = {c["spec"]: c["settings"]["temperature"] for c in manifest["candidates"]}
    assert temps == {"scripted:reference": 0.5, "scripted:hangup": None}


def test_version_flag_prints_the_version() -> None:
    from callbench import __version__

    for flag in ("--version", "-V"):
        result = CliRunner().invoke(app, [flag])
        assert result.exit_code == 0 and result.output.strip() == f"callbench {__version__}"


def test_out_that_is_a_non_empty_folder_but_not_a_run_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "photos"
    target.mkdir()
    (target / "holiday.jpg").write_text("keep me", encoding="utf-8")
    code, out = _run("--out", str(target))
    assert code == 2
    line = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and "not empty and not a callbench run" in line[0] and "holiday.jpg" in line[0]
    assert sorted(p.name for p in target.iterdir()) == ["holiday.jpg"]
    # an empty folder is fine
    (tmp_path / "empty").mkdir()
    code, out = _run("--out", str(tmp_path / "empty"), "--limit", "1")
    assert code == 0, out


@pytest.mark.parametrize(
    "bad",
    [["--scenarios", "no_such_scenario"], ["--candidate", "nosuchprovider:x"]],
)
def test_no_progress_bar_before_a_configuration_error(tmp_path: Path, bad: list[str]) -> None:
    code, out = _run("--out", str(tmp_path / "r"), *bad)
    assert code == 2 and "error:" in out
    assert "episodes" not in out and "tokens" not in out  # the bar was never drawn


def test_progress_totals_count_judges_like_the_cost_table() -> None:
    """Regression: the progress bar's token count left the judges out (92,358 against the cost
    table's 105,222)."""
    from callbench.models.base import Usage
    from callbench.runs.session import RunTotals

    totals = RunTotals()
    totals.add_usage([Usage(input_tokens=100, output_tokens=20, cost_usd=0.5)])  # a trace's roles
    totals.add_usage([Usage(input_tokens=1000, output_tokens=7, cost_usd=0.25)])  # a grade's judges
    assert totals.tokens == 1127 and totals.cost_text() == "$0.75"
    totals.add_usage([Usage(input_tokens=1, cost_usd=None)])
    assert totals.cost_text() == "unknown" and totals.tokens == 1128


def test_cache_path_that_cannot_be_created_says_so(tmp_path: Path) -> None:
    """Regression: an unopenable --cache path was called "not a response cache"."""
    (tmp_path / "plain-file").write_text("x", encoding="utf-8")
    code, out = _run("--cache", str(tmp_path / "plain-file" / "cache.sqlite"), "--out", str(tmp_path / "r"))
    assert code == 2 and "cannot be opened for writing" in out and "not a response cache" not in out


def test_an_unknown_executor_is_refused(tmp_path: Path) -> None:
    code, out = _run("--executor", "spark", "--out", str(tmp_path / "r"))
    assert code == 2 and "--executor 'spark': expected local or ray" in out
    assert not (tmp_path / "r").exists()


def test_a_ray_address_without_the_ray_executor_is_refused(tmp_path: Path) -> None:
    code, out = _run("--ray-address", "auto", "--out", str(tmp_path / "r"))
    assert code == 2 and "--ray-address needs --executor ray" in out


def test_spec_in_an_error_line_is_printed_as_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: rich turned the ``:x:`` of ``openai:x: set OPENAI_API_KEY`` into an emoji."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = [a if a != "scripted:reference" else "openai:x" for a in BASE]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "openai:x: set OPENAI_API_KEY" in result.output
    assert "\N{CROSS MARK}" not in result.output


@pytest.mark.parametrize("columns", [80, 160])
def test_progress_line_fits_the_terminal(tmp_path: Path, columns: int) -> None:
    """Regression: at 80 columns the progress line was cut off with ellipses."""
    result = CliRunner().invoke(app, [*BASE, "--out", str(tmp_path / "r")], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if "1/1" in ln)
    assert len(line) <= columns and "…" not in line
    assert ("tokens 0 (all roles) · cost $0.00" in line) == (columns >= 120)
    assert "skipped 0 · tokens 0" in line
