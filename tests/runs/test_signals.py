"""Signals sent to the real ``callbench`` command: Ctrl-C and SIGTERM stop a run
with 130 / 143 and the line of a stop (never the crash message, never a traceback), finished
episodes are kept and the same command resumes; a second Ctrl-C stops at once; the child dies with
its parent however the parent dies.

Scripted models, slowed by a ``sitecustomize`` that only the supervised child loads: every candidate
turn waits ``SLOW_S`` seconds (``SLOW_BLOCK=1``: in a thread that cancelling cannot stop, as a
llama.cpp call would), and every scripted judge call ``SLOW_JUDGE_S`` seconds (default none)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from callbench.runfolder import episode_files
from callbench.runs.supervisor import DUPLICATE_S, GRACE_S
from waiting import finish, limit, run_command, scale, wait_until

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
        hold, saved = os.environ.get("SLOW_HOLD", ""), os.environ.get("SLOW_HOLD_AFTER", "")
        def held():
            # while the test keeps the file SLOW_HOLD, turns wait once an episode is saved under
            # SLOW_HOLD_AFTER: the run stays in progress however slow the machine is
            return bool(hold) and os.path.exists(hold) and any(fs for _, _, fs in os.walk(saved))
        def slowed(orig):
            async def slow(self, request):
                while held():
                    await asyncio.sleep(0.05)
                if block:
                    if os.environ.get("SLOW_MARK"):  # the test waits for this file, not for a guessed time
                        open(os.environ["SLOW_MARK"], "a").close()
                    await asyncio.to_thread(time.sleep, 60)
                await asyncio.sleep(delay)
                return await orig(self, request)
            return slow
        m.ReferenceCandidate.complete = slowed(m.ReferenceCandidate.complete)
        g.ScriptedGenerator.complete = slowed(g.ScriptedGenerator.complete)
        if os.environ.get("SLOW_NATIVE") == "1":
            # a fake llama.cpp call: blocks on the local model's own thread, as counted native work
            from callbench.models.local import client as local
            def native(orig):
                async def slow(self, request):
                    open(os.environ["SLOW_MARK"], "a").close()
                    await local.run_native(time.sleep, 600)
                    return await orig(self, request)
                return slow
            m.ReferenceCandidate.complete = native(m.ReferenceCandidate.complete)
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


def _wait_for(check, what: str, proc: subprocess.Popen[str] | None = None) -> None:  # type: ignore[no-untyped-def]
    """Until ``check()`` (a run folder's state) is true; ``proc`` ending first fails at once."""
    wait_until(check, what, proc=proc)


def _finish(proc: subprocess.Popen[str], what: str = "the run to exit after the signal") -> tuple[int, str]:
    _, err = finish(proc, what)
    assert "Traceback" not in err, err
    return proc.returncode, err


def _resume(out: Path, env: dict[str, str]) -> None:
    env = {**env, "SLOW_S": "0", "SLOW_BLOCK": "0"}
    done = run_command(_command(out), "the resumed run to finish", env=env, text=True)
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
        _wait_for(lambda: _traces(out) >= 2, "two finished episodes", proc)
    else:
        _wait_for(lambda: bool(_children(proc.pid)), "the child process", proc)
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
    mark = tmp_path / "blocked"
    env = _env(tmp_path, SLOW_BLOCK="1", SLOW_S="0", SLOW_MARK=str(mark))
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for(lambda: mark.exists() and bool(_children(proc.pid)), "a candidate turn blocked in its thread",
              proc)
    child = _children(proc.pid)[0]
    proc.send_signal(signal.SIGINT)
    time.sleep(DUPLICATE_S + 0.5)  # the product's own window: deliveries closer than it count as one
    assert proc.poll() is None, "the graceful stop waits for the blocked thread"
    # The window runs from when the child handled the first Ctrl-C, which a loaded machine may delay:
    # a second Ctrl-C that still fell inside it is ignored, so it is sent again until one counts.
    for _ in range(int(GRACE_S / (DUPLICATE_S + 0.5))):
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=DUPLICATE_S + 0.5)
            break
    code, err = _finish(proc)
    assert code == 130
    assert "SIGINT again: stopped at once" in err
    assert not _alive(child)
    _resume(out, env)


STOP_PROMISE_S = 2.0
"""From Ctrl-C to the command's exit while a native model call is busy (the product's promise)."""
SCHEDULING_MARGIN_S = 4.0
"""Added to :data:`STOP_PROMISE_S` for the two processes being scheduled on a shared, loaded 2-core
machine: at load 14 each runnable process gets about a seventh of a core, so the stop's few tenths
of a second of CPU (the handler, the stop line, the interpreter's exit, the parent's) can take
seconds. The sum stays below the product's :data:`GRACE_S` (10 s), after which a stop that waited
for the call would end by itself; that path prints a second stop line, which the test also rules out."""
STOP_BOUND_S = (STOP_PROMISE_S + SCHEDULING_MARGIN_S) * scale()


def test_ctrl_c_abandons_a_busy_native_call_at_once(tmp_path: Path) -> None:
    """A candidate turn blocked in a native call on the local model's thread (a fake: a 600 s sleep
    counted as llama.cpp work, no model): Ctrl-C ends the run within :data:`STOP_PROMISE_S` with
    exactly one stop line (not the graceful-stop limit's second one), exit 130, and resumes."""
    out = tmp_path / "run"
    mark = tmp_path / "native"
    env = _env(tmp_path, SLOW_NATIVE="1", SLOW_S="0", SLOW_MARK=str(mark))
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for(lambda: mark.exists() and bool(_children(proc.pid)), "a candidate turn in its native call",
              proc)
    child = _children(proc.pid)[0]
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=limit(60.0))  # a safety net: the bound is asserted below
    took = time.monotonic() - sent
    code, err = _finish(proc)
    assert code == 130, err
    assert took < STOP_BOUND_S, f"took {took:.2f} s: {err}"
    lines = [line for line in err.splitlines() if line.strip() and "━" not in line]
    stops = [line for line in lines if line.startswith("interrupted") or "stopped at once" in line]
    expected = f"interrupted (Ctrl-C): finished episodes are saved in {out}; run the same command to resume"
    assert len(stops) == 1 and stops[0] == expected, err
    assert not _alive(child)
    _resume(out, {**env, "SLOW_NATIVE": "0"})


def test_the_child_dies_with_a_killed_parent(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = _env(tmp_path)
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for(lambda: _traces(out) >= 1, "a finished episode", proc)
    child = _children(proc.pid)[0]
    proc.send_signal(signal.SIGKILL)
    finish(proc, "the killed parent to be reaped")
    assert proc.returncode == -signal.SIGKILL
    _wait_for(lambda: not _alive(child), "the orphaned child to stop")
    kept = _traces(out)
    assert 1 <= kept < REPEATS
    _resume(out, env)


def test_sigkill_of_the_child_alone_is_still_reported_as_a_kill(tmp_path: Path) -> None:
    """A signal the parent did not send (here SIGKILL, as the out-of-memory killer sends) keeps the
    crash line; SIGTERM sent to the child directly is a stop."""
    out = tmp_path / "run"
    env = _env(tmp_path)
    proc = subprocess.Popen(_command(out), env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for(lambda: _traces(out) >= 1, "a finished episode", proc)
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
    done = run_command(_command(out), "the run to finish", env=env, text=True)
    assert done.returncode == 0, done.stderr
    before = {p.name for p in (out / "grades").iterdir()}
    grade = [sys.executable, "-m", "callbench", "grade", str(out), "--concurrency", "1"]
    proc = subprocess.Popen([*grade, "--new-set"], env={**env, "SLOW_JUDGE_S": "0.2"},
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    new: list[str] = []

    def two_grades() -> bool:
        new[:] = sorted({p.name for p in (out / "grades").iterdir() if p.is_dir()} - before)
        return len(new) == 1 and _grades(out, new[0]) >= 2

    _wait_for(two_grades, "two grades in a new grade set", proc)
    proc.send_signal(signal.SIGINT)
    code, err = _finish(proc)
    assert code == 130
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == ("interrupted (Ctrl-C): finished grades are saved in their grade set; run the same "
                         "command without --new-set to grade the rest"), err
    kept = _grades(out, new[0])
    assert 2 <= kept < REPEATS
    again = run_command(grade, "the grade to finish", env=env, text=True)
    assert again.returncode == 0, again.stderr
    assert {p.name for p in (out / "grades").iterdir() if p.is_dir()} - before == {new[0]}
    assert _grades(out, new[0]) == REPEATS
