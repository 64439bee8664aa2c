"""Machine faults on a real file system: a small tmpfs that fills up, and one
remounted read-only. Needs root (mount); skipped elsewhere. The monkeypatched variants are in
test_fault_attribution.py."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runs.machine import EXIT_MACHINE_FAULT

from .conftest import DAIRY


def _mount(point: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "mnt"
    if not _mount(point, "3m"):
        pytest.skip("needs root and tmpfs mounts")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def _run(out: Path, repeats: int) -> tuple[int, str]:
    result = CliRunner().invoke(app, [
        "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--repeats", str(repeats),
        "--concurrency", "1", "--out", str(out),
    ], env={"COLUMNS": "250"})  # fmt: skip
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def _fill(folder: Path) -> Path:
    """Write a file until the file system is full; returns it."""
    filler = folder / "filler.bin"
    with contextlib.suppress(OSError), filler.open("wb", buffering=0) as f:
        while True:
            f.write(b"\0" * 4096)
    return filler


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "traces").glob("*.json.gz"))}


def test_a_really_full_disk_is_one_line_and_the_same_command_resumes(tmpfs: Path) -> None:
    out = tmpfs / "run"
    assert _run(out, 1)[0] == 0
    before = _snapshot(out)
    grades_before = sorted((out / "grades").glob("*/episodes/*.json.gz"))
    filler = _fill(tmpfs)
    with pytest.raises(OSError) as full:
        (tmpfs / "probe").write_bytes(b"x" * 8192)
    assert full.value.errno == errno.ENOSPC
    code, output = _run(out, 3)
    assert code == EXIT_MACHINE_FAULT, output
    (line,) = _errors(output)
    assert "the disk is full; free some space, then run the same command again" in line, line
    assert str(out) in line and "Traceback" not in output
    assert {k: v for k, v in _snapshot(out).items() if k in before} == before  # finished episodes intact
    assert sorted((out / "grades").glob("*/episodes/*.json.gz"))[: len(grades_before)] == grades_before
    filler.unlink()
    code, output = _run(out, 3)
    assert code == 0, output
    after = _snapshot(out)
    assert len(after) == 3 and {k: after[k] for k in before} == before
    assert not list(out.rglob(".*.tmp"))  # no half-written file left behind
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["completed"] == 3 and manifest["skipped"] == 0


def test_a_read_only_run_folder_is_one_line_and_the_same_command_resumes(tmpfs: Path,
                                                                          tmp_path: Path) -> None:
    out = tmpfs / "run"
    assert _run(out, 1)[0] == 0
    before = _snapshot(out)
    # a read-only bind mount over the folder (works while files are open, unlike remount,ro)
    subprocess.run(["mount", "--bind", str(tmpfs), str(tmpfs)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(tmpfs)], check=True)
    try:
        code, output = _run(out, 2)
        assert code == EXIT_MACHINE_FAULT, output
        (line,) = _errors(output)
        assert "the file system is read-only" in line and str(out) in line, line
        assert "Traceback" not in output
        # the default report of a read-only folder (whose parent is read-only too): the terminal
        # report and one warning naming where the HTML could not go, exit 0
        report = CliRunner().invoke(app, ["report", str(out)])
        assert report.exit_code == 0, report.output
        warnings = [ln for ln in report.output.splitlines() if ln.startswith("warning:")]
        assert len(warnings) == 1 and "read-only" in warnings[0] and "report.html" in warnings[0]
        assert "Leaderboard" in report.output
        elsewhere = CliRunner().invoke(app, ["report", str(out), "--html", str(tmp_path / "r.html")])
        assert elsewhere.exit_code == 0, elsewhere.output
        # grading into the read-only folder
        graded = CliRunner().invoke(app, ["grade", str(out), "--new-set"])
        assert graded.exit_code == EXIT_MACHINE_FAULT, graded.output
        assert len(_errors(graded.output)) == 1 and "read-only" in graded.output
    finally:
        subprocess.run(["umount", str(tmpfs)], check=True)  # the bind mount: writable again
    assert _snapshot(out) == before
    code, output = _run(out, 2)
    assert code == 0, output
    assert len(_snapshot(out)) == 2
