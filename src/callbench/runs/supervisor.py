"""Run a callbench command in a child process, so a native crash ends with a message, not silence.

A segmentation fault in llama.cpp (the embedded model's engine) kills the Python process that hosts
it before any Python handler runs: ``callbench demo`` used to die with nothing but the shell's
``Segmentation fault`` (exit 139). The ``callbench`` entry point (:func:`callbench.__main__.main`)
therefore runs the command itself in a child process (``python -m callbench ...``, the same
arguments, standard streams inherited) and waits:

- exit by status: the status is passed on unchanged;
- death by a signal: one line on stderr saying what failed and what to try
  (:func:`callbench.models.local.safeguards.crash_message`, with the note the local provider left
  about what llama.cpp was doing), and the shell's convention for the exit status, ``128 + signal``
  (139 for SIGSEGV); the child's Python stack at the crash (``faulthandler``) is kept in a file
  named on that line.

Stopping: SIGINT, SIGTERM and SIGHUP sent to the parent are passed on to the child (a
terminal's Ctrl-C reaches both, being sent to the process group; the child counts deliveries of one
signal within :data:`DUPLICATE_S` as one). In the child (:func:`child_setup`) the first such signal
starts a graceful stop (``KeyboardInterrupt`` in the main thread: in-flight episodes are cancelled,
finished ones are already saved), bounded by :data:`GRACE_S`; a second one stops at once. The exit
status is the shell's ``128 + signal`` (130 for SIGINT, 143 for SIGTERM) with a one-line message of
a stop, never the crash message: that is kept for a child killed by SIGSEGV, SIGABRT, SIGBUS,
SIGILL, SIGFPE or (out of memory) SIGKILL that the parent did not send.

The child dies with its parent however the parent dies: ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` (Linux,
``prctl(2)``) and, everywhere, a daemon thread that checks once a second that the parent's pid
(``$CALLBENCH_PARENT_PID``) is still its parent. ``CALLBENCH_NO_SUPERVISOR=1`` runs commands in one
process (for debuggers); the child runs with ``CALLBENCH_SUPERVISED=1``.

Scratch folder: the note and stack files live in ``$TMPDIR/callbench-supervisor-<parent pid>-*``,
removed by the parent when the child ends unless the stack file holds a crash. A parent that is
killed (SIGKILL) cannot remove it, so an orphaned child removes its own scratch folder when it
stops (while the stack file is empty), and every supervised start removes the empty scratch
folders of parents that are no longer running (:func:`remove_orphaned_scratch`), for the case
where parent and child were killed together.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from callbench.models.local.safeguards import NOTE_ENV, crash_message
from callbench.runs.stop_lines import stop_outcome

SUPERVISED_ENV = "CALLBENCH_SUPERVISED"
NO_SUPERVISOR_ENV = "CALLBENCH_NO_SUPERVISOR"
STACK_ENV = "CALLBENCH_CRASH_STACK"
"""Path where the child's ``faulthandler`` writes the Python stack on a fatal signal."""
PARENT_ENV = "CALLBENCH_PARENT_PID"
"""The supervising parent's pid, which the child watches."""
READY_ENV = "CALLBENCH_READY_FD"
"""A pipe the child writes one byte to once its stop handlers are in place: the child starts with
the stop signals ignored, and the parent holds back the ones that arrive before that byte."""

NATIVE_CRASH_SIGNALS: frozenset[int] = frozenset(
    getattr(signal, n) for n in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGKILL")
    if hasattr(signal, n)
)
"""Deaths that get the crash message (when the parent did not send the signal itself)."""
STOP_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)
)
"""Signals that ask a command to stop: passed on by the parent, a graceful stop in the child."""
DUPLICATE_S = 1.0
"""Deliveries of one stop signal this close together count as one (Ctrl-C reaches the child both
from the terminal and from the parent)."""
GRACE_S = 10.0
"""How long a graceful stop may take before the child exits at once (a native call that does not
return, such as a llama.cpp generation, cannot be cancelled)."""
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
SCRATCH_PREFIX = "callbench-supervisor-"
"""Scratch folders are ``<TMPDIR>/callbench-supervisor-<parent pid>-<random>``."""
_STACK_NAME, _NOTE_NAME = "crash-stack.txt", "native-note.txt"


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15; ``signal N`` for a number with no name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def note_command(argv: Sequence[str]) -> None:
    """Record this process's ``callbench`` arguments (without the program) for the default wording
    of :func:`stop_message` and :func:`hard_exit_line`; :func:`callbench.__main__.main` calls it."""
    _stop.argv = tuple(argv)


def stop_message(
    signum: int | None, where: str | None = None, *, command: Sequence[str] | None = None,
    written: Sequence[str] | None = None,
) -> str:
    """The one line for a command stopped by ``signum`` (Ctrl-C, SIGTERM, SIGHUP; None is Ctrl-C): a
    stop, not a crash, worded for the command of ``command`` (the ``callbench`` arguments without
    the program; default: those of :func:`note_command`). ``run``/``demo``: finished episodes are
    saved (in ``where``, the run folder, when given) and the same command resumes; ``generate``:
    the scenarios written are kept and the same command resumes the batch; ``grade``:
    finished grades are saved and the same command (without ``--new-set``) grades the rest;
    ``report``: nothing was written, or only the files of ``written`` (labels such as
    ``"JSON report r.json"``), since each report file is written whole or not at all; any other
    command: no claim of saved work. Records that the stop was reported (:func:`stop_reported`), so
    the entry point does not say it twice."""
    _stop.reported = True
    signum = signum or signal.SIGINT
    how = "interrupted (Ctrl-C)" if signum == signal.SIGINT else f"stopped by {signal_name(signum)}"
    argv = _stop.argv if command is None else tuple(command)
    return f"{how}: {stop_outcome(argv, where, written)}"


def hard_exit_line(why: str) -> str:
    """The line of a stop that could not wait for the command to finish stopping (a second signal,
    or :data:`GRACE_S` passed): ``why``, then what was kept, for the command :func:`note_command`
    recorded (a report may have left none of its files, or some whole ones)."""
    return f"{why}: {stop_outcome(_stop.argv, None, None, at_once=True)}"


def should_supervise(env: Mapping[str, str] | None = None) -> bool:
    """False inside the child (``CALLBENCH_SUPERVISED``) or when ``CALLBENCH_NO_SUPERVISOR`` is set
    to anything but ``0``/empty; True otherwise."""
    values: Mapping[str, str] = os.environ if env is None else env
    if values.get(SUPERVISED_ENV):
        return False
    return values.get(NO_SUPERVISOR_ENV, "").strip() in ("", "0")


class _Stop:
    """The stop a signal asked for in this process: the first signal and when it came."""

    signum: int | None = None
    at: float = 0.0
    reported: bool = False
    argv: tuple[str, ...] = ()


_stop = _Stop()


def requested_stop() -> int | None:
    """The signal that asked this process to stop (SIGINT, SIGTERM, SIGHUP), or None. A
    ``KeyboardInterrupt`` with None here came from Python's own Ctrl-C handler (SIGINT)."""
    return _stop.signum


def stop_reported() -> bool:
    """True once :func:`stop_message` made this process's line of a stop."""
    return _stop.reported


def stop_status() -> int:
    """The exit status for a stop: 128 + the signal that asked for it (130 when none was recorded,
    as for Python's own ``KeyboardInterrupt``)."""
    return 128 + (_stop.signum or signal.SIGINT)


def _hard_exit(signum: int, why: str) -> None:
    _remove_own_scratch()
    with contextlib.suppress(Exception):
        sys.stderr.write(hard_exit_line(why) + "\n")
        sys.stderr.flush()
    os._exit(128 + signum)


def exit_if_native_work(status: int) -> None:
    """Exit now with ``status`` when a native computation (llama.cpp, in its worker thread:
    :func:`callbench.models.local.client.native_work_running`) is still running; return otherwise.
    For a command that has printed its stop line and saved what it keeps: the computation cannot be
    cancelled, and the interpreter's exit would wait for it (it joins worker threads) until the
    :data:`GRACE_S` limit printed a second, contradicting line (measured: 10.05 s after Ctrl-C
    with the embedded model reading its prompt)."""
    client = sys.modules.get("callbench.models.local.client")
    if client is None or not client.native_work_running():
        return
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    _remove_own_scratch()
    os._exit(status)


def _on_stop_signal(signum: int, _frame: FrameType | None) -> None:
    now = time.monotonic()
    if _stop.signum is None:
        _stop.signum, _stop.at = signum, now
        why = f"{signal_name(signum)}: the stop took over {GRACE_S:.0f} s, stopped at once"
        timer = threading.Timer(GRACE_S, _hard_exit, (signum, why))
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt
    if now - _stop.at < DUPLICATE_S:
        return  # the same Ctrl-C, delivered by the terminal and passed on by the parent
    _hard_exit(_stop.signum, f"{signal_name(signum)} again: stopped at once")


def install_stop_handlers() -> None:
    """Make SIGINT, SIGTERM and SIGHUP a graceful stop in this process (main thread only): the first
    raises ``KeyboardInterrupt`` (recorded for :func:`requested_stop`) and starts a
    :data:`GRACE_S` limit; a later one (not within :data:`DUPLICATE_S`) exits at once with
    128 + the first signal."""
    with contextlib.suppress(ValueError):  # not the main thread
        for signum in STOP_SIGNALS:
            signal.signal(signum, _on_stop_signal)


def ignore_stop_signals_at_exit() -> None:
    """Ignore SIGINT, SIGTERM and SIGHUP from here on: called at exit (``atexit``), when the
    command's work is over. Python's finalization sets every signal with a Python handler back to
    its default action (``_PySignal_Fini``), so the parent's copy of a Ctrl-C that reached the child
    late on a loaded machine then killed a child that had already stopped cleanly ("stopped",
    status 0 became "interrupted (Ctrl-C)", 130). An ignored signal stays ignored to the end."""
    with contextlib.suppress(ValueError, OSError):  # not the main thread; a platform without one
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def _die_with_parent(parent: int) -> None:
    """SIGTERM this process when ``parent`` dies: PR_SET_PDEATHSIG where Linux has it, then a
    check that the parent is still ours (it may have died before the prctl), and a watcher thread."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, name="callbench-parent-watch", daemon=True).start()


def _holds_no_crash(folder: Path) -> bool:
    """True when ``folder``'s stack file is missing or empty (no crash was written there)."""
    try:
        return (folder / _STACK_NAME).stat().st_size == 0
    except FileNotFoundError:
        return True
    except OSError:
        return False


class _OwnScratch:
    """In the child: the supervisor's pid and its scratch folder, once :func:`child_setup` ran."""

    parent: int = 0
    folder: Path | None = None


_own = _OwnScratch()


def _remove_own_scratch() -> None:
    """In the child, at exit: remove the scratch folder when the parent that should have removed it
    is gone (it was killed) and no crash stack was written there."""
    folder = _own.folder
    if folder is None or os.getppid() == _own.parent or not _holds_no_crash(folder):
        return
    _own.folder = None
    shutil.rmtree(folder, ignore_errors=True)


def _pid_running(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs, as another user
        return True
    return True


def remove_orphaned_scratch(tmpdir: Path | str | None = None) -> int:
    """Remove the scratch folders in ``tmpdir`` (default :func:`tempfile.gettempdir`) left by
    supervisors that are no longer running: named ``callbench-supervisor-<pid>-*`` with that pid
    not running, owned by this user, and with an empty or no stack file (a folder holding a crash
    stack is kept: the crash message named it). Folders of the older name without a pid are left
    alone (whether their supervisor still runs cannot be told). Returns how many were removed;
    never raises."""
    root = Path(tempfile.gettempdir() if tmpdir is None else tmpdir)
    removed = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for entry in entries:
        pid_text = entry.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if not entry.name.startswith(SCRATCH_PREFIX) or not pid_text.isdigit():
            continue
        pid = int(pid_text)
        try:
            st = entry.stat(follow_symlinks=False)
            mine = entry.is_dir(follow_symlinks=False) and st.st_uid == os.getuid()
        except OSError:
            continue
        if not mine or pid == os.getpid() or _pid_running(pid) or not _holds_no_crash(Path(entry.path)):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += not os.path.exists(entry.path)
    return removed


def child_setup() -> None:
    """In the child: stop gracefully on SIGINT/SIGTERM/SIGHUP (:func:`install_stop_handlers`), die
    with the parent (``$CALLBENCH_PARENT_PID``), and write the Python stack to
    ``$CALLBENCH_CRASH_STACK`` on a fatal signal (``faulthandler``; the signal still kills the
    process, so the parent sees it). When the parent is gone by the time this process exits, the
    scratch folder is removed here (:func:`_remove_own_scratch`). Without a supervisor only the stop
    handlers are installed. At exit the stop signals are ignored (:func:`ignore_stop_signals_at_exit`)."""
    install_stop_handlers()
    atexit.register(ignore_stop_signals_at_exit)
    ready = os.environ.pop(READY_ENV, "")
    if ready.isdigit():
        with contextlib.suppress(OSError):
            os.write(int(ready), b"1")
            os.close(int(ready))
    parent = os.environ.get(PARENT_ENV, "")
    path = os.environ.get(STACK_ENV)
    if parent.isdigit() and path and Path(path).parent.name.startswith(f"{SCRATCH_PREFIX}{parent}-"):
        # only a folder named for this parent is ours to remove if the parent dies
        _own.parent, _own.folder = int(parent), Path(path).parent
        atexit.register(_remove_own_scratch)
    if parent.isdigit():
        _die_with_parent(int(parent))
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

    A child that exits passes its status on. A child killed by a signal the parent passed on, or by
    SIGINT/SIGTERM/SIGHUP, gets the line of :func:`stop_message`; one killed by another signal N
    gets the line of :func:`crash_message` on ``err`` (default stderr); both return 128 + N. The
    note and stack files live in a temporary folder that is removed unless the stack file holds
    something worth reading (or, when this process is killed, by the child or the next start:
    :func:`remove_orphaned_scratch`). Raises OSError when the child cannot start.
    """
    err = sys.stderr if err is None else err
    remove_orphaned_scratch()
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
    note, stack = scratch / _NOTE_NAME, scratch / _STACK_NAME
    child_env = dict(os.environ if env is None else env)
    child_env.update({SUPERVISED_ENV: "1", NOTE_ENV: str(note), STACK_ENV: str(stack),
                      PARENT_ENV: str(os.getpid())})
    keep = False
    ready_r, ready_w = os.pipe()
    child_env[READY_ENV] = str(ready_w)
    try:
        with _signals_for_child(ready_r) as (attach, forwarded):
            try:
                child = subprocess.Popen(
                    list(command), env=child_env, pass_fds=(ready_w,), preexec_fn=_ignore_stop_signals
                )
            finally:
                os.close(ready_w)
            attach(child)
            status = child.wait()
        if status >= 0:
            return status
        signum = -status
        if signum in forwarded or signum not in NATIVE_CRASH_SIGNALS:
            print(stop_message(signum), file=err, flush=True)
            return 128 + signum
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


def _ignore_stop_signals() -> None:
    """In the forked child before exec: ignore the stop signals until :func:`child_setup` handles them."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def _signals_for_child(ready_fd: int) -> Any:
    """Pass SIGINT, SIGTERM and SIGHUP on to the child while it runs (recording which were sent),
    holding back those that arrive before the child says on ``ready_fd`` that it handles them;
    restore the previous handlers after. Outside the main thread nothing changes. Closes ``ready_fd``."""
    holder: list[subprocess.Popen[bytes]] = []
    forwarded: set[int] = set()
    pending: list[int] = []
    lock = threading.Lock()
    ready = threading.Event()

    def send(signum: int) -> None:
        for child in holder:
            with contextlib.suppress(OSError):
                child.send_signal(signum)

    def forward(signum: int, _frame: object) -> None:
        forwarded.add(signum)
        with lock:
            if not ready.is_set():
                pending.append(signum)
                return
        send(signum)

    def wait_ready() -> None:
        with contextlib.suppress(OSError):
            os.read(ready_fd, 1)  # one byte, or EOF when the child exits first
        with lock:
            ready.set()
            held = list(dict.fromkeys(pending))
        for signum in held:
            send(signum)

    watcher = threading.Thread(target=wait_ready, name="callbench-child-ready", daemon=True)

    previous: dict[int, Any] = {}
    try:
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, forward)
    except ValueError:  # not the main thread: leave the handlers alone
        previous = {}
    def attach(child: subprocess.Popen[bytes]) -> None:
        holder.append(child)
        watcher.start()

    try:
        yield attach, forwarded
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if watcher.is_alive():
            watcher.join(timeout=1.0)
        with contextlib.suppress(OSError):
            os.close(ready_fd)


def child_command(argv: Sequence[str]) -> list[str]:
    """The command that runs ``callbench <argv>`` in a child: this interpreter, ``-m callbench``."""
    return [sys.executable, "-m", "callbench", *argv]
