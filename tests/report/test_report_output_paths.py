"""``callbench report`` checks its output paths before it computes anything: an ``--html`` path that
is a folder, a ``--json``/``--csv`` path under a file, a folder that cannot be written. Each gives one
located line (the option and the path), no errno text, and nothing is written; the exit code is 2
for a bad path and 4 for a write the machine refuses (docs/running.md, "Provider faults, exit codes
and transport")."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app

MakeRun = Callable[..., Path]


@pytest.fixture
def never_computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts calls of the report's statistics (none may happen when an output path is bad)."""
    import callbench.report.build as build

    calls: list[int] = []
    real = build.build_report

    def counted(*a: object, **kw: object) -> object:
        calls.append(1)
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(build, "build_report", counted)
    return calls


def _report(rd: Path, *args: str) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(app, ["report", str(rd), "--samples", "20", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    return result.exit_code, errors, result.output


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _check_refused(rd: Path, out: Path, never_computed: list[int], *args: str, exit_code: int = 2) -> str:
    before = _files(out)
    code, errors, output = _report(rd, *args)
    assert code == exit_code, output
    assert len(errors) == 1, output
    assert "Errno" not in output and "Traceback" not in output
    assert "Leaderboard" not in output  # the terminal report was not shown
    assert never_computed == []
    assert _files(out) == before  # nothing written (the JSON given beside it neither)
    return errors[0]


def test_html_path_that_is_a_folder(make_run: MakeRun, tmp_path: Path, never_computed: list[int]) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1)
    out = tmp_path / "out"
    (out / "mine.html").mkdir(parents=True)
    (out / "mine.html" / "notes.txt").write_text("keep me")
    line = _check_refused(rd, out, never_computed, "--html", str(out / "mine.html"),
                          "--json", str(out / "r.json"))
    assert line.startswith(f"error: --html {out / 'mine.html'}: is a folder")
    assert "--html-folder" in line
    assert (out / "mine.html" / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("option", ["--json", "--csv", "--html", "--html-folder"])
def test_output_under_a_file(
    make_run: MakeRun, tmp_path: Path, never_computed: list[int], option: str
) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1)
    out = tmp_path / "out"
    out.mkdir()
    blocker = out / "plain.txt"
    blocker.write_text("a file, not a folder")
    target = blocker / "deeper" / "report.out"
    line = _check_refused(rd, out, never_computed, option, str(target))
    assert line == (f"error: {option} {target}: {blocker} is a file, not a folder; choose another path")


def test_html_folder_that_is_not_a_report_folder(
    make_run: MakeRun, tmp_path: Path, never_computed: list[int]
) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1)
    out = tmp_path / "out"
    (out / "photos").mkdir(parents=True)
    (out / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    line = _check_refused(rd, out, never_computed, "--html-folder", str(out / "photos"))
    assert line.startswith(f"error: --html-folder {out / 'photos'}: ")
    assert "not a callbench report folder" in line


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A read-only file system (a tmpfs mounted ro): needs root, skipped elsewhere."""
    point = tmp_path / "ro"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(point)],
                          capture_output=True, check=False) if os.geteuid() == 0 else None
    if done is None or done.returncode != 0:
        pytest.skip("needs root and tmpfs mounts")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


@pytest.mark.parametrize("option", ["--json", "--csv", "--html", "--html-folder"])
def test_output_on_a_read_only_file_system(
    make_run: MakeRun, read_only: Path, never_computed: list[int], option: str
) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1)
    target = read_only / "sub" / "report.out"
    line = _check_refused(rd, read_only, never_computed, option, str(target), exit_code=4)
    assert line == (f"error: {option} {target}: the folder {read_only} cannot be written (read-only file "
                    "system); choose another path")


def test_output_in_a_folder_without_write_permission(
    make_run: MakeRun, tmp_path: Path, never_computed: list[int]
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes any folder whatever its mode")
    rd = make_run(agents=1, scenarios=1, repeats=1)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        line = _check_refused(rd, locked, never_computed, "--json", str(locked / "r.json"), exit_code=4)
    finally:
        locked.chmod(0o755)
    assert line.endswith(f"the folder {locked} cannot be written (permission denied); choose another path")


def test_good_paths_still_write_everything(
    make_run: MakeRun, tmp_path: Path, never_computed: list[int]
) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1)
    out = tmp_path / "new" / "deeper"  # missing folders are made
    code, errors, output = _report(rd, "--json", str(out / "r.json"), "--csv", str(out / "r.csv"),
                                   "--html", str(out / "r.html"))
    assert code == 0 and errors == [], output
    assert never_computed == [1]
    assert [p.name for p in _files(out)] == ["r.csv", "r.html", "r.json"]
