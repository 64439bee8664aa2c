"""The supervisor's scratch folder (``callbench-supervisor-<pid>-*``: the native note and the crash
stack) never outlives a killed parent while empty: the orphaned child removes it when it stops, and
the next supervised start removes those of dead parents. Each test has its own ``TMPDIR``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from callbench.runs.supervisor import SCRATCH_PREFIX, remove_orphaned_scratch, run_supervised
from waiting import finish, read_until, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SRC = str(Path(__file__).parents[2] / "src")
# a supervising parent whose child sets itself up as callbench's does, says so, then waits
PARENT = textwrap.dedent(
    """
    import sys
    from callbench.runs.supervisor import run_supervised
    child = (
        "import sys, time\\n"
        "from callbench.runs.supervisor import child_setup\\n"
        "child_setup()\\n"
        "print('ready', flush=True)\\n"
        "time.sleep(3600)\\n"
    )
    sys.exit(run_supervised([sys.executable, "-c", child]))
    """
)


def _scratch(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(f"{SCRATCH_PREFIX}*"))


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(check, what: str) -> None:  # type: ignore[no-untyped-def]
    wait_until(check, what)


def _start_parent(tmp: Path) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-c", PARENT], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    read_until(proc.stdout, "ready", "the supervised child to set itself up")
    children = _children(proc.pid)
    assert len(children) == 1
    return proc, children[0]


def test_a_killed_parent_leaves_no_empty_scratch_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, child = _start_parent(tmp)
    (folder,) = _scratch(tmp)
    assert folder.name.startswith(f"{SCRATCH_PREFIX}{proc.pid}-")
    assert (folder / "crash-stack.txt").stat().st_size == 0  # the child's faulthandler file, empty
    proc.send_signal(signal.SIGKILL)
    finish(proc, "the killed parent to be reaped")
    assert proc.returncode == -signal.SIGKILL
    _wait_for(lambda: not _alive(child), "the orphaned child to stop")
    assert _scratch(tmp) == []


def test_the_next_start_removes_the_folders_of_dead_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parent and child both SIGKILLed (as the out-of-memory killer or a process-group kill does):
    nobody could clean up, so the next supervised start does."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, child = _start_parent(tmp)
    os.killpg(proc.pid, signal.SIGKILL)  # both at once (their own process group): nobody cleans up
    finish(proc, "the killed parent to be reaped")
    _wait_for(lambda: not _alive(child), "the child to die")
    (left,) = _scratch(tmp)
    # a dead parent's folder with a crash stack in it is kept (it is named in the crash message)
    crashed = tmp / f"{SCRATCH_PREFIX}{proc.pid}-crashed"
    crashed.mkdir()
    (crashed / "crash-stack.txt").write_text("Fatal Python error: Segmentation fault\n")
    # a live parent's folder is its own business, and so is a folder of another name
    live = tmp / f"{SCRATCH_PREFIX}{os.getpid()}-live"
    live.mkdir()
    (live / "crash-stack.txt").write_text("")
    other = tmp / f"{SCRATCH_PREFIX}abcd1234"  # the old name (no pid): not known to be dead
    other.mkdir()

    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    assert run_supervised([sys.executable, "-c", "pass"]) == 0
    assert not left.exists()
    assert sorted(p.name for p in _scratch(tmp)) == sorted([crashed.name, live.name, other.name])


def test_remove_orphaned_scratch_counts_what_it_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(dead.stdout)
    for i in range(3):
        folder = tmp_path / f"{SCRATCH_PREFIX}{pid}-{i}"
        folder.mkdir()
        (folder / "crash-stack.txt").write_text("")
        (folder / "native-note.txt").write_text("llama.cpp ran local:0.5b as the candidate")
    assert remove_orphaned_scratch(tmp_path) == 3
    assert _scratch(tmp_path) == []
    assert remove_orphaned_scratch(tmp_path / "missing") == 0
