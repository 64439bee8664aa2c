"""Run a callbench command in a child process, so a native crash ends with a message, not silence.

A segmentation fault in llama.cpp (the embedded model's engine) kills the Python process that hosts
it before any Python handler runs: ``callbench demo`` used to die with nothing but the shell's
``Segmentation fault`` (exit 139, issue 18). The ``callbench`` entry point (:func:`callbench.__main__.main`)
therefore runs the command itself in a child process (``python -m callbench ...``, the same
arguments, standard streams inherited) and waits:

- exit by status: the status is passed on unchanged;
- death by a signal: one line on stderr saying what failed and what to try
  (:func:`callbench.models.local.safeguards.crash_message`, with the note the local provider left
  about what llama.cpp was doing), and the shell's convention for the exit status, ``128 + signal``
  (139 for SIGSEGV); the child's Python stack at the crash (``faulthandler``) is kept in a file
  named on that line.

Ctrl-C reaches the child directly (same process group), so the parent ignores SIGINT while it waits;
SIGTERM and SIGHUP sent to the parent are passed on to the child. ``CALLBENCH_NO_SUPERVISOR=1``
runs commands in one process (for debuggers); the child runs with ``CALLBENCH_SUPERVISED=1``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from callbench.models.local.safeguards import NOTE_ENV, crash_message

SUPERVISED_ENV = "CALLBENCH_SUPERVISED"
NO_SUPERVISOR_ENV = "CALLBENCH_NO_SUPERVISOR"
STACK_ENV = "CALLBENCH_CRASH_STACK"
"""Path where the child's ``faulthandler`` writes the Python stack on a fatal signal."""


def should_supervise(env: Mapping[str, str] | None = None) -> bool:
    """False inside the child (``CALLBENCH_SUPERVISED``) or when ``CALLBENCH_NO_SUPERVISOR`` is set
    to anything but ``0``/empty; True otherwise."""
    values: Mapping[str, str] = os.environ if env is None else env
    if values.get(SUPERVISED_ENV):
        return False
    return values.get(NO_SUPERVISOR_ENV, "").strip() in ("", "0")


def child_setup() -> None:
    """In the child: write the Python stack to ``$CALLBENCH_CRASH_STACK`` on a fatal signal
    (``faulthandler``; the signal still kills the process, so the parent sees it). No-op elsewhere."""
    path = os.environ.get(STACK_ENV)
    if not path:
        return
    import faulthandler

    try:
        stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 (kept open for the process's life)
    except OSError:
        return
    faulthandler.enable(file=stream, all_threads=True)


def run_supervised(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, err: TextIO | None = None
) -> int:
    """Run ``command`` as a child with ``CALLBENCH_SUPERVISED=1`` and return its exit status.

    A child killed by signal N gets the line of :func:`crash_message` on ``err`` (default stderr)
    and the status 128 + N. The note and stack files live in a temporary folder that is removed
    unless the stack file holds something worth reading. Raises OSError when the child cannot start.
    """
    err = sys.stderr if err is None else err
    scratch = Path(tempfile.mkdtemp(prefix="callbench-supervisor-"))
    note, stack = scratch / "native-note.txt", scratch / "crash-stack.txt"
    child_env = dict(os.environ if env is None else env)
    child_env.update({SUPERVISED_ENV: "1", NOTE_ENV: str(note), STACK_ENV: str(stack)})
    keep = False
    try:
        with _signals_for_child() as attach:
            child = subprocess.Popen(list(command), env=child_env)
            attach(child)
            status = child.wait()
        if status >= 0:
            return status
        signum = -status
        said = note.read_text(encoding="utf-8", errors="replace") if note.exists() else ""
        line = crash_message(signum, said)
        if stack.exists() and stack.stat().st_size > 0:
            keep = True
            line += f" (Python stack at the crash: {stack})"
        print(line, file=err, flush=True)
        return 128 + signum
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def _signals_for_child() -> Any:
    """Ignore SIGINT (the terminal sends it to the child too) and pass SIGTERM/SIGHUP on to the child
    while it runs; restore the previous handlers after. Outside the main thread nothing changes."""
    holder: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, _frame: object) -> None:
        for child in holder:
            with contextlib.suppress(OSError):
                child.send_signal(signum)

    wanted: dict[int, Any] = {signal.SIGINT: signal.SIG_IGN}
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            wanted[getattr(signal, name)] = forward
    previous: dict[int, Any] = {}
    try:
        for signum, handler in wanted.items():
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread: leave the handlers alone
        previous = {}
    try:
        yield holder.append
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def child_command(argv: Sequence[str]) -> list[str]:
    """The command that runs ``callbench <argv>`` in a child: this interpreter, ``-m callbench``."""
    return [sys.executable, "-m", "callbench", *argv]
