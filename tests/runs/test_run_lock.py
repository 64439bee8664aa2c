"""One writer per run folder: a second driver on a folder in use fails at once with
one line naming the holder's pid and host, exit 2; the lock goes with its holder however it ends."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runfolder.lock import LOCK_FILE, RunFolderBusy, hold_run_folder
from waiting import finish, read_until, run_command

from .test_signals import REPEATS, _command, _env, _traces, _wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock and /proc")


HOLDER = (
    "import sys; from pathlib import Path; from callbench.runfolder.lock import hold_run_folder\n"
    "with hold_run_folder(Path(sys.argv[1]), 'callbench run ray'):\n"
    "    print('held', flush=True); sys.stdin.read()\n"
)


def _holder(run: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert read_until(proc.stdout, "held", "the lock holder to hold the folder") == ["held\n"]
    return proc


def test_another_process_holding_the_folder_refuses_a_second_holder(tmp_path: Path) -> None:
    run = tmp_path / "r"
    holder = _holder(run)
    try:
        with pytest.raises(RunFolderBusy) as caught, hold_run_folder(run, "callbench grade"):
            pass
        line = str(caught.value)
        assert "\n" not in line
        assert f"callbench run ray (pid {holder.pid} on host {socket.gethostname()})" in line
    finally:
        finish(holder, "the lock holder to end when its stdin closes", stdin="")
    with hold_run_folder(run, "callbench grade") as path:  # released with its holder
        assert path == run / LOCK_FILE
        assert "callbench grade" in path.read_text()
        with hold_run_folder(run, "callbench run local"):  # this process again: nested, no-op
            pass
        assert path.exists()


def test_a_hold_that_made_the_folder_removes_it_when_nothing_was_saved(tmp_path: Path) -> None:
    run = tmp_path / "new"
    with hold_run_folder(run, "callbench run local"):
        assert (run / LOCK_FILE).exists()
    assert not run.exists()
    run.mkdir()
    with hold_run_folder(run, "callbench run local"):
        (run / "manifest.json").write_text("{}", encoding="utf-8")
    assert (run / LOCK_FILE).exists() and (run / "manifest.json").exists()


@pytest.mark.slow  # three real command processes, one killed: about 6 s idle
def test_a_second_driver_fails_at_once_and_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    out = tmp_path / "run"
    hold = tmp_path / "hold"
    hold.touch()  # the first run stays in progress from its first saved episode on (see test_signals)
    env = _env(tmp_path)
    held = {**env, "SLOW_HOLD": str(hold), "SLOW_HOLD_AFTER": str(out / "traces")}
    first = subprocess.Popen(_command(out), env=held, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        _wait_for(lambda: _traces(out) >= 1, "a finished episode", first)
        second = run_command(_command(out), "the second driver to refuse the folder", env=env, text=True)
        assert second.returncode == 2, second.stderr
        lines = [line for line in second.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, second.stderr
        assert lines[0].startswith(f"error: run folder {out} is in use by callbench run local (pid ")
        assert f"on host {socket.gethostname()})" in lines[0]
        # grade and labels import write grades: refused the same way
        for argv in (["grade", str(out)], ["labels", "import", str(out), str(tmp_path / "sheet.csv")]):
            other = run_command([sys.executable, "-m", "callbench", *argv], f"{argv[0]} to refuse the folder",
                                env=env, text=True)
            assert other.returncode == 2 and "is in use by callbench run local" in other.stderr, other.stderr
            assert "Traceback" not in other.stderr
        assert first.poll() is None  # the holder was not disturbed
    finally:
        first.send_signal(signal.SIGKILL)  # the parent; its child goes with it and the kernel frees the lock
        finish(first, "the killed first driver to be reaped")
    resumed = None
    for _ in range(100):  # the orphaned child may need a moment to stop
        resumed = run_command(_command(out), "the resumed run to finish", env={**env, "SLOW_S": "0"},
                              text=True)
        if resumed.returncode != 2:
            break
    assert resumed is not None and resumed.returncode == 0, resumed.stderr
    assert _traces(out) == REPEATS


def test_grade_of_a_folder_in_use(tmp_path: Path) -> None:
    """The typer commands (in process) give the same line; nothing is written."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "manifest.json").write_text("{}", encoding="utf-8")
    holder = _holder(run)
    try:
        res = CliRunner().invoke(app, ["grade", str(run)])
        assert res.exit_code == 2
        assert "is in use by callbench run ray" in res.output
        assert sorted(p.name for p in run.iterdir()) == ["manifest.json", LOCK_FILE]
    finally:
        finish(holder, "the lock holder to end when its stdin closes", stdin="")
