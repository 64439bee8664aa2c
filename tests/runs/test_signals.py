"""Signals sent to the real ``callbench`` command (issue 25 item 1): Ctrl-C and SIGTERM stop a run
with 130 / 143 and the line of a stop (never the crash message, never a traceback), finished
episodes are kept and the same command resumes; a second Ctrl-C stops at once; the child dies with
its parent however the parent dies.

Scripted models, slowed by a ``sitecustomize`` that only the supervised child loads: every candidate
turn waits ``SLOW_S`` seconds (``SLOW_BLOCK=1``: in a thread that cancelling cannot stop, as a
llama.cpp call would), and every scripted judge call ``SLOW_JUDGE_S`` seconds (default none)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from callbench.runfolder import episode_files

from .conftest import DAIRY

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SRC = Path(__file__).parents[2] / "src"
REPEATS = 24
SLOW = textwrap.dedent(
    """
    import os
    if os.environ.get("CALLBENCH_SUPERVISED"):
        import asyncio, time
        from callbench.models.scripted import models as m
        from callbench.models.scripted import generator as g
        delay = float(os.environ.get("SLOW_S", "0.3"))
        block = os.environ.get("SLOW_BLOCK") == "1"
        def slowed(orig):
            async def slow(self, request):
                if block:
                    await asyncio.to_thread(time.sleep, 60)
                await asyncio.sleep(delay)
                return await orig(self, request)
            return slow
        m.ReferenceCandidate.complete = slowed(m.ReferenceCandidate.complete)
        g.ScriptedGenerator.complete = slowed(g.ScriptedGenerator.complete)
        judge_delay = float(os.environ.get("SLOW_JUDGE_S", "0"))
        if judge_delay:
            from callbench.models.scripted import judge as j
            def judged(orig):
                async def slow(self, request):
                    await asyncio.sleep(judge_delay)
                    return await orig(self, request)
                return slow
            j.ScriptedJudge.complete = judged(j.ScriptedJudge.complete)
    """
)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SLOW, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CALLBENCH_NO_SUPERVISOR"}
    env.update({"PYTHONPATH": f"{site}{os.pathsep}{SRC}", "COLUMNS": "100", **extra})
    return env


def _command(out: Path) -> list[str]:
    return [
        sys.executable, "-m", "callbench", "run", str(DAIRY), "--candidate", "scripted:reference",
        "--caller", "scripted:plan", "--task-judge", "scripted:met", "--conversation-judge", "scripted:met",
        "--repeats", str(REPEATS), "--concurrency", "2", "--out", str(out),
    ]


def _traces(out: Path) -> int:
    return len(episode_files.paths(out / "traces"))


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped has stopped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(check, what: str, limit: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + limit
    while not check():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=90)
    assert "Traceback" not in err, err
    return proc.returncode, err


def _resume(out: Path, env: dict[str, str]) -> None:
    env = {**env, "SLOW_S": "0", "SLOW_BLOCK": "0"}
    done = subprocess.run(_command(out), env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert _traces(out) == REPEATS


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("when", ["at start", "mid-run"])
def test_a_stop_signal_stops_the_run_keeps_episodes_and_resumes(
    tmp_path: Path, signum: int, when: str
) -> None:
    out = tmp_path / "run"
    env = _env(tmp_path)
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if when == "mid-run":
        _wait_for(lambda: _traces(out) >= 2, "two finished episodes")
    else:
        _wait_for(lambda: bool(_children(proc.pid)), "the child process")
    child = _children(proc.pid)[0]
    proc.send_signal(signum)
    code, err = _finish(proc)
    assert code == 128 + signum
    lines = [line for line in err.splitlines() if line.strip() and "━" not in line]
    expected = "interrupted (Ctrl-C)" if signum == signal.SIGINT else "stopped by SIGTERM"
    assert lines and lines[-1].startswith(expected), err
    assert "run the same command to resume" in lines[-1]
    assert "crash" not in err and "llama" not in err
    assert not _alive(child)
    kept = _traces(out)
    assert kept < REPEATS
    if when == "mid-run":
        assert kept >= 2
    _resume(out, env)


def test_a_second_ctrl_c_stops_at_once(tmp_path: Path) -> None:
    """The graceful stop cannot finish (a thread that cancelling does not stop); the second Ctrl-C
    ends the run without waiting for it."""
    out = tmp_path / "run"
    env = _env(tmp_path, SLOW_BLOCK="1", SLOW_S="0")
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for(lambda: (out / "manifest.json").exists() and bool(_children(proc.pid)), "the run to start")
    time.sleep(0.5)
    child = _children(proc.pid)[0]
    proc.send_signal(signal.SIGINT)
    time.sleep(1.5)  # more than the window in which two deliveries count as one
    assert proc.poll() is None, "the graceful stop waits for the blocked thread"
    proc.send_signal(signal.SIGINT)
    code, err = _finish(proc)
    assert code == 130
    assert "SIGINT again: stopped at once" in err
    assert not _alive(child)
    _resume(out, env)


def test_the_child_dies_with_a_killed_parent(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = _env(tmp_path)
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for(lambda: _traces(out) >= 1, "a finished episode")
    child = _children(proc.pid)[0]
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    _wait_for(lambda: not _alive(child), "the orphaned child to stop", limit=30)
    kept = _traces(out)
    assert 1 <= kept < REPEATS
    _resume(out, env)


def test_sigkill_of_the_child_alone_is_still_reported_as_a_kill(tmp_path: Path) -> None:
    """A signal the parent did not send (here SIGKILL, as the out-of-memory killer sends) keeps the
    crash line; SIGTERM sent to the child directly is a stop."""
    out = tmp_path / "run"
    env = _env(tmp_path)
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for(lambda: _traces(out) >= 1, "a finished episode")
    os.kill(_children(proc.pid)[0], signal.SIGKILL)
    code, err = _finish(proc)
    assert code == 137 and "out-of-memory killer" in err


def _grades(out: Path, gid: str) -> int:
    folder = out / "grades" / gid / "episodes"
    return len(episode_files.paths(folder)) if folder.is_dir() else 0


def test_a_stopped_grade_keeps_its_grades_and_its_line_says_how_to_finish(tmp_path: Path) -> None:
    """Ctrl-C in ``grade --new-set``: the line is grade's own (not run's "resume"), and doing what it
    says (the same command without --new-set) finishes the interrupted grade set."""
    out = tmp_path / "run"
    env = _env(tmp_path, SLOW_S="0")
    done = subprocess.run(_command(out), env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    before = {p.name for p in (out / "grades").iterdir()}
    grade = [sys.executable, "-m", "callbench", "grade", str(out), "--concurrency", "1"]
    proc = subprocess.Popen([*grade, "--new-set"], env={**env, "SLOW_JUDGE_S": "0.2"},
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    new: list[str] = []

    def two_grades() -> bool:
        new[:] = sorted({p.name for p in (out / "grades").iterdir() if p.is_dir()} - before)
        return len(new) == 1 and _grades(out, new[0]) >= 2

    _wait_for(two_grades, "two grades in a new grade set")
    proc.send_signal(signal.SIGINT)
    code, err = _finish(proc)
    assert code == 130
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == ("interrupted (Ctrl-C): finished grades are saved in their grade set; run the same "
                         "command without --new-set to grade the rest"), err
    kept = _grades(out, new[0])
    assert 2 <= kept < REPEATS
    again = subprocess.run(grade, env=env, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stderr
    assert {p.name for p in (out / "grades").iterdir() if p.is_dir()} - before == {new[0]}
    assert _grades(out, new[0]) == REPEATS
