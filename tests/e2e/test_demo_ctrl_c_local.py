"""Ctrl-C on the real ``callbench demo`` with the embedded model (the scripted signal tests in
``tests/runs/test_signals.py`` cover the same logic with a fake native call).

Starts ``callbench demo --scenarios 1`` on a pseudo-terminal in its own session and process group
(as a shell runs a foreground job), reads what it draws until the embedded model is at work in
native code (``loading for the``, ``reading the ... prompt`` or ``writing the ...'s answer`` on
the progress line), then sends SIGINT to the whole group, as a terminal's Ctrl-C does. The command
must end with 130 within :data:`STOP_BOUND_S` of the signal (the llama.cpp call in progress is
abandoned, not waited for), with exactly one stop line (not the crash message, not the
graceful-stop limit's second line, no traceback), leave no process of the group or of the
supervisor's tree running (the supervised child, and any process llama.cpp could have started),
release the run folder's lock,
and leave what it saved intact (the manifest and every trace load, the SQLite index passes its
integrity check, no half-written file).

Skipped unless llama-cpp-python and the 0.5B weights are installed (the ``[local]`` extra); with
``CALLBENCH_REQUIRE_LOCAL=1`` (CI's ``[local]`` job) their absence fails instead. Loading the model
takes tens of seconds on 2 cores.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import require_local_model

require_local_model(("reads /proc (Linux only)", not sys.platform.startswith("linux")))

from callbench.runfolder import episode_files  # noqa: E402
from callbench.runfolder.lock import hold_run_folder  # noqa: E402
from callbench.runfolder.store import RunStore  # noqa: E402
from waiting import limit, scale  # noqa: E402

SRC = Path(__file__).parents[2] / "src"
START_LIMIT_S = limit(600.0)
"""How long the demo may take to get the embedded model working (start-up, preflight, loading)."""
STOP_PROMISE_S = 2.0
"""From Ctrl-C to exit while the model works: the product's promise (the busy llama.cpp call is
abandoned; run/demo print their stop line and exit without it)."""
SCHEDULING_MARGIN_S = 4.0
"""Added to the promise for the two processes being scheduled on a shared, loaded 2-core machine
(llama.cpp's own threads keep the cores busy until the exit): at load 14 each runnable process gets
about a seventh of a core, so the stop's few tenths of a second of CPU can take seconds. The bound
stays below the product's graceful-stop limit (``GRACE_S``, 10 s), whose second stop line the test
also rules out."""
STOP_BOUND_S = (STOP_PROMISE_S + SCHEDULING_MARGIN_S) * scale()
BUSY = re.compile(r"loading for the|reading the \w+ prompt|writing the \w+'s answer")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


class Terminal:
    """The master side of a pseudo-terminal, drained by a thread into :attr:`text`."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every process holding the slave side has exited
                return
            if not data:
                return
            with self._lock:
                self._chunks.append(data)

    @property
    def text(self) -> str:
        with self._lock:
            raw = b"".join(self._chunks)
        return ANSI.sub("", raw.decode("utf-8", errors="replace"))

    def close(self) -> None:
        self._thread.join(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.master)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of ``pid``, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2])


def _group(pgid: int) -> set[int]:
    """Running (not zombie) processes whose process group is ``pgid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None and st[0] != "Z" and st[1] == pgid:
                found.add(int(entry.name))
    return found


def _tree(pid: int) -> set[int]:
    """``pid``'s descendants (every thread's children), read from /proc."""
    seen: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                for c in (task / "children").read_text().split():
                    if int(c) not in seen:
                        seen.add(int(c))
                        todo.append(int(c))
    return seen


def _running(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def test_ctrl_c_stops_the_demo_with_the_embedded_model_at_work(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if k != "CALLBENCH_NO_SUPERVISOR"}
    env.update({"PYTHONPATH": str(SRC), "COLUMNS": "160", "LINES": "40", "TERM": "xterm"})
    term = Terminal()
    command = [sys.executable, "-m", "callbench", "demo", "--scenarios", "1", "--out", str(out)]
    proc = subprocess.Popen(command, env=env, stdin=term.slave, stdout=term.slave, stderr=term.slave,
                            start_new_session=True)
    os.close(term.slave)
    term.start()
    try:
        end = time.monotonic() + START_LIMIT_S
        while not BUSY.search(term.text):
            assert proc.poll() is None, f"the demo ended with {proc.returncode} first:\n{term.text[-3000:]}"
            assert time.monotonic() < end, f"the embedded model never started:\n{term.text[-3000:]}"
            time.sleep(0.2)
        busy = BUSY.findall(term.text)[-1]
        members = _group(proc.pid) | _tree(proc.pid)
        assert len(members) >= 2, "the supervisor runs the command in a child"

        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does to its foreground group
        sent = time.monotonic()
        try:
            code = proc.wait(timeout=limit(60.0))  # a safety net: the bound is asserted below
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit 60 s after Ctrl-C (the model was at: {busy}):\n{term.text[-3000:]}")
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    end = time.monotonic() + limit(60.0)  # the reaped child's children: the kernel needs a moment
    while (_group(proc.pid) or any(_running(p) for p in members)) and time.monotonic() < end:
        time.sleep(0.1)
    left = _group(proc.pid) | {p for p in members if _running(p)}
    term.close()
    text = term.text
    print(f"Ctrl-C while '{busy}': exit {code} after {took:.1f} s")  # the measured figure, with -s

    assert code == 130, text[-3000:]
    assert took < STOP_BOUND_S, f"exit {took:.2f} s after Ctrl-C (the model was at: {busy}):\n{text[-3000:]}"
    assert not left, f"processes left running after Ctrl-C: {sorted(left)}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    stop = [line for line in lines if line.startswith("interrupted") or "stopped at once" in line]
    assert len(stop) == 1 and stop[0].startswith("interrupted (Ctrl-C): "), text[-3000:]
    assert "run the same command to resume" in stop[0]
    assert "Traceback" not in text and "crash" not in text.lower(), text[-3000:]

    # what was saved is intact, and the folder is free for the same command to resume
    with hold_run_folder(out, "the test"):
        pass
    assert not list(out.rglob(".*.tmp")), "a half-written file was left"
    with RunStore(out) as store:
        manifest = store.load_manifest()
        assert manifest is not None and len(manifest.planned) == 2  # the model and the reference path
        saved = sorted(episode_files.paths(store.traces))
        for episode_id in saved:
            assert store.load_trace(episode_id).episode_id == episode_id
    index = out / "index.sqlite"
    if index.exists():
        with contextlib.closing(sqlite3.connect(f"file:{index}?mode=ro", uri=True)) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
