"""Waiting in tests for the event a test needs (a line printed, a file written, a process gone),
never for a guessed amount of wall-clock time.

Every limit here is a safety net against a hang, not a measurement: it is set far above what the
slowest plausible machine needs (a 2-core machine at load average 10 runs these steps 5 to 20 times
slower than an idle one), and when it runs out the test fails with what it was waiting for and the
output of the process so far, never with a bare ``TimeoutExpired``.

``CALLBENCH_TEST_TIMEOUT_SCALE`` (a positive number, default 1) multiplies every limit, for a
machine slower still (an emulator, a sanitizer build) or to make a hang show sooner while debugging.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

SCALE_ENV = "CALLBENCH_TEST_TIMEOUT_SCALE"

PROCESS_S = 600.0
"""The default limit for a process to start, answer or end: minutes, where an idle machine needs
seconds."""


def scale() -> float:
    """The factor from ``CALLBENCH_TEST_TIMEOUT_SCALE`` (default 1.0).

    Raises:
        ValueError: the variable is set but is not a positive number (named with its value).
    """
    raw = os.environ.get(SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{SCALE_ENV}={raw!r}: expected a positive number such as 1 or 2.5")
    return value


def limit(seconds: float = PROCESS_S) -> float:
    """``seconds`` times :func:`scale`: the limit in seconds to pass to a wait."""
    return seconds * scale()


def _tail(text: str | bytes | None, n: int = 3000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-n:]


def wait_until(check: Callable[[], object], what: str, timeout: float = PROCESS_S, *,
               proc: subprocess.Popen[Any] | None = None, interval: float = 0.05) -> None:
    """Poll ``check()`` every ``interval`` seconds until it is true.

    ``timeout`` is in seconds before scaling. With ``proc``, a process that ends first fails the
    wait at once (with its exit status): it can no longer bring about the event.

    Raises:
        AssertionError: the limit ran out, or ``proc`` ended first; the message names ``what``.
    """
    lim = limit(timeout)
    end = time.monotonic() + lim
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit status {proc.returncode}) while the test was "
                                 f"waiting for {what}")
        if time.monotonic() > end:
            raise AssertionError(f"gave up after {lim:.0f} s waiting for {what}")
        time.sleep(interval)


def finish(proc: subprocess.Popen[Any], what: str, timeout: float = PROCESS_S,
           stdin: str | bytes | None = None, *, dump_signal: int | None = None) -> tuple[Any, Any]:
    """``proc.communicate()`` within the scaled ``timeout``: the process's (stdout, stderr).

    ``dump_signal``: a signal the process answers by writing its threads' stacks to stderr
    (``faulthandler.register``), sent before it is killed so that the failure shows where it hung.

    Raises:
        AssertionError: the process was still running at the limit; it is killed, and the message
            names ``what`` and gives the end of what it wrote.
    """
    lim = limit(timeout)
    try:
        return proc.communicate(stdin, timeout=lim)
    except subprocess.TimeoutExpired:
        if dump_signal is not None:
            proc.send_signal(dump_signal)
            time.sleep(2.0)  # a diagnostic only: the stacks are usually written within milliseconds
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"gave up after {lim:.0f} s waiting for {what}; the process was still running "
                             f"(killed now). Its stdout ended:\n{_tail(out)}\nits stderr ended:\n{_tail(err)}"
                             ) from None


def wait_exit(proc: subprocess.Popen[Any], what: str, timeout: float = PROCESS_S) -> int:
    """``proc.wait()`` within the scaled ``timeout``: the exit status. For a process whose output
    is not piped (or is read elsewhere); otherwise use :func:`finish`.

    Raises:
        AssertionError: the process was still running at the limit (it is killed); names ``what``.
    """
    lim = limit(timeout)
    try:
        return proc.wait(timeout=lim)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"gave up after {lim:.0f} s waiting for {what}; the process was still running "
                             "(killed now)") from None


def run_command(cmd: Sequence[str], what: str, timeout: float = PROCESS_S,
                **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(cmd, **kwargs)`` within the scaled ``timeout`` (output captured unless the
    caller says otherwise).

    Raises:
        AssertionError: the command was still running at the limit; names ``what`` and gives the end
            of its output.
    """
    if "stdout" not in kwargs and "stderr" not in kwargs:
        kwargs.setdefault("capture_output", True)
    lim = limit(timeout)
    try:
        return subprocess.run(cmd, timeout=lim, **kwargs)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"gave up after {lim:.0f} s waiting for {what}; the command was still running "
                             f"(killed). Its stdout ended:\n{_tail(e.stdout)}\n"
                             f"its stderr ended:\n{_tail(e.stderr)}") from None


def read_until(stream: IO[str], marker: str, what: str, timeout: float = PROCESS_S) -> list[str]:
    """Read lines of ``stream`` (a text pipe) until one contains ``marker``; the lines read, the
    marker's last. The lines after it stay unread in the pipe.

    Raises:
        AssertionError: the stream ended (the process closed it) or the scaled limit ran out before
            the marker; the message names ``what`` and gives the lines read so far.
    """
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
            if marker in line:
                return
        lines.put(None)

    # a daemon thread: on a timeout the caller kills the process, which ends the read
    threading.Thread(target=pump, name="read-until", daemon=True).start()
    lim = limit(timeout)
    end = time.monotonic() + lim
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"gave up after {lim:.0f} s waiting for {what} ({marker!r} on the output); "
                                 f"read so far:\n{_tail(''.join(seen))}") from None
        if line is None:
            raise AssertionError(f"the output ended before {what} ({marker!r}); "
                                 f"read:\n{_tail(''.join(seen))}")
        seen.append(line)
        if marker in line:
            return seen
