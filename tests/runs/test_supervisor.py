"""The CLI's crash supervisor: a child that dies from a signal gives one line of cause and remedy.

The crashes are real (the child sends itself SIGSEGV/SIGILL/SIGKILL), so no weights are needed."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import callbench
from callbench.models.local.safeguards import REBUILD_HINT, crash_message
from callbench.runs.supervisor import run_supervised, should_supervise
from waiting import limit

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals as exit causes are POSIX")


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_segfault_in_llama_gives_cause_and_remedy() -> None:
    err = io.StringIO()
    code = run_supervised(
        _python(
            """
            import os, signal
            from callbench.models.local.safeguards import note_native
            note_native("llama.cpp ran local:0.5b as the candidate (6,700 prompt tokens)")
            os.kill(os.getpid(), signal.SIGSEGV)
            """
        ),
        err=err,
    )
    assert code == 128 + signal.SIGSEGV == 139
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1
    line = lines[0]
    assert "llama.cpp crashed in native code (SIGSEGV)" in line
    assert "while llama.cpp ran local:0.5b as the candidate (6,700 prompt tokens)" in line
    assert "CALLBENCH_LOCAL_EXTRA_BUFTS=0" in line and REBUILD_HINT in line
    assert "same command resumes" in line


def test_crash_keeps_the_python_stack_file() -> None:
    err = io.StringIO()
    code = run_supervised(
        _python(
            """
            import os, signal
            from callbench.runs.supervisor import child_setup
            child_setup()
            os.kill(os.getpid(), signal.SIGSEGV)
            """
        ),
        err=err,
    )
    assert code == 139
    line = err.getvalue().strip()
    assert "native code crashed (SIGSEGV)" in line  # no note: not attributed to llama.cpp
    stack = Path(line.rsplit("Python stack at the crash: ", 1)[1].rstrip(")"))
    assert "Fatal Python error: Segmentation fault" in stack.read_text()
    stack.unlink()
    stack.parent.rmdir()


def test_illegal_instruction_and_oom_kill_messages() -> None:
    err = io.StringIO()
    assert run_supervised(_python("import os, signal; os.kill(os.getpid(), signal.SIGILL)"), err=err) == 132
    assert "built for a CPU with instructions this one lacks (SIGILL)" in err.getvalue()
    assert REBUILD_HINT in err.getvalue()
    err = io.StringIO()
    assert run_supervised(_python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), err=err) == 137
    assert "out-of-memory killer" in err.getvalue()


def test_exit_status_passes_through_silently() -> None:
    err = io.StringIO()
    assert run_supervised(_python("import sys; sys.exit(3)"), err=err) == 3
    assert run_supervised(_python("pass"), err=err) == 0
    assert err.getvalue() == ""


def test_child_is_marked_and_not_supervised_again() -> None:
    out = subprocess.run(
        _python(
            """
            from callbench.runs.supervisor import run_supervised, should_supervise
            import sys
            print(should_supervise())
            sys.exit(run_supervised([sys.executable, "-c",
                "from callbench.runs.supervisor import should_supervise; print(should_supervise())"]))
            """
        ),
        capture_output=True, text=True, check=True, env={**os.environ, "CALLBENCH_NO_SUPERVISOR": ""},
    )
    assert out.stdout.split() == ["True", "False"]
    assert should_supervise({"CALLBENCH_NO_SUPERVISOR": "1"}) is False
    assert should_supervise({"CALLBENCH_NO_SUPERVISOR": "0"}) is True


def test_console_entry_reports_a_crash_of_the_real_command(tmp_path: Path) -> None:
    """The whole path: ``python -m callbench <command>`` supervises; the child (only the child, via a
    sitecustomize that checks CALLBENCH_SUPERVISED) crashes right after the local provider's note."""
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import os, signal
            if os.environ.get("CALLBENCH_SUPERVISED"):
                from callbench.models.local.safeguards import note_native
                note_native("llama.cpp loaded local:0.5b for the caller")
                os.kill(os.getpid(), signal.SIGSEGV)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("CALLBENCH_NO_SUPERVISOR", None)
    out = subprocess.run(
        [sys.executable, "-m", "callbench", "version"], capture_output=True, text=True, env=env,
        timeout=limit(600),
    )
    assert out.returncode == 139
    assert out.stdout == ""
    assert "llama.cpp crashed in native code (SIGSEGV) while llama.cpp loaded local:0.5b" in out.stderr
    # without the crash the same entry point runs the command and passes its output through
    ok = subprocess.run(
        [sys.executable, "-m", "callbench", "version"], capture_output=True, text=True, timeout=limit(600),
        env={k: v for k, v in env.items() if k != "PYTHONPATH"},
    )
    assert ok.returncode == 0 and ok.stdout.strip() == callbench.__version__


def test_crash_message_names_unknown_signals() -> None:
    assert "(signal 200)" in crash_message(200)


def test_a_stop_signal_at_exit_does_not_kill_a_child_that_finished(tmp_path: Path) -> None:
    # the parent's copy of a Ctrl-C can reach the child after it has stopped and is exiting; a
    # Python handler would raise in the middle of the exit (and, once the interpreter resets its
    # handlers to the default action, the signal would kill it): ignored there, the exit is clean
    err = io.StringIO()
    code = run_supervised(
        _python(
            """
            import atexit, os, signal
            from pathlib import Path
            from callbench.runs.supervisor import child_setup

            def late_copy():
                os.kill(os.getpid(), signal.SIGINT)  # a handler would raise here
                Path({!r}).write_text("exit went on")

            atexit.register(late_copy)  # registered first: runs after child_setup's exit callback
            child_setup()
            """.format(str(tmp_path / "after"))
        ),
        err=err,
    )
    assert (code, err.getvalue()) == (0, "")
    assert (tmp_path / "after").read_text() == "exit went on"


def test_stop_signals_are_ignored_after_the_exit_callback() -> None:
    result = subprocess.run(
        _python(
            """
            import signal
            from callbench.runs.supervisor import ignore_stop_signals_at_exit, install_stop_handlers
            install_stop_handlers()
            before = signal.getsignal(signal.SIGINT)
            ignore_stop_signals_at_exit()
            after = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
            print(callable(before) and after == [signal.SIG_IGN] * 3)
            """
        ),
        capture_output=True, text=True, timeout=limit(120.0),
    )
    assert result.stdout.strip() == "True", result.stderr
