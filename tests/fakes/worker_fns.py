"""Module-level functions for tests of ``callbench.report.model.workers`` (a spawned worker imports the
function it runs by name, so these cannot live in a test module)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from callbench.report.model.episode_read import ReportInputError


def square_with_pid(items: list[int]) -> list[tuple[int, int]]:
    """Each item squared, with the pid of the process that did it."""
    return [(i * i, os.getpid()) for i in items]


def fail_at_seven(items: list[int]) -> list[int]:
    """Raise a ReportInputError naming item 7 when the chunk holds it."""
    if 7 in items:
        raise ReportInputError("/run/traces/e7.json.gz: not valid JSON (trace): line 1 column 1")
    return items


def die_at_seven(items: list[int]) -> list[int]:
    """Kill this worker (as the system's OOM killer would) when the chunk holds item 7."""
    if 7 in items:
        os.kill(os.getpid(), signal.SIGKILL)
    return items


def slow_recording_pid(items: list[str]) -> list[str]:
    """Write this worker's pid into the folder each item names, then sleep (for Ctrl-C tests)."""
    for folder in items:
        Path(folder, f"{os.getpid()}.pid").write_text("", encoding="utf-8")
    # longer than any wait of a test (tests/waiting.py: 600 s): a worker still alive when the test
    # stops waiting outlived its parent, never one that merely finished its sleep
    time.sleep(3600)
    return items


def record_pid(items: list[str]) -> list[str]:
    """Write this worker's pid into the folder each item names (no wait)."""
    for folder in items:
        Path(folder, f"{os.getpid()}.pid").write_text("", encoding="utf-8")
    return items


def half_a_result(items: list[str]) -> list[str]:
    """For item ``"<folder>|half"``: wait for ``<folder>/go``, then write half of a result message
    on the pool's result pipe (as a worker killed while sending its result leaves it), write
    ``<folder>/half`` and sleep; other items come back as they are. The pipe is the
    ``result_queue`` argument of CPython's ``concurrent.futures.process._process_worker``, found
    on the stack."""
    import struct
    import sys

    for item in items:
        if not item.endswith("|half"):
            continue
        folder = Path(item.split("|")[0])
        while not (folder / "go").exists():
            time.sleep(0.05)
        frame = sys._getframe()
        while frame is not None and "result_queue" not in frame.f_locals:
            frame = frame.f_back
        assert frame is not None, "no result_queue on the worker's stack"
        writer = frame.f_locals["result_queue"]._writer
        os.write(writer.fileno(), struct.pack("!i", 1000) + b"x" * 10)  # a length, then 10 bytes of it
        (folder / "half").write_text("", encoding="utf-8")
        time.sleep(3600)  # see slow_recording_pid
    return items


def die_in_half_a_result(items: list[str]) -> list[str]:
    """For item ``"half"``: write half of a result message on the pool's result pipe, then die (as
    a worker killed by the system while sending a large result); other items come back as they
    are (see :func:`half_a_result`)."""
    import struct
    import sys

    if "half" in items:
        frame = sys._getframe()
        while frame is not None and "result_queue" not in frame.f_locals:
            frame = frame.f_back
        assert frame is not None, "no result_queue on the worker's stack"
        writer = frame.f_locals["result_queue"]._writer
        os.write(writer.fileno(), struct.pack("!i", 1000) + b"x" * 10)
        os.kill(os.getpid(), signal.SIGKILL)
    return items
