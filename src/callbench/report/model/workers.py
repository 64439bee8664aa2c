"""Per-episode report work spread over worker processes (a 10,000-episode report
in under 30 s on 2 cores).

Reading an episode (decompressing and validating its trace and grade, reading its fault ledger,
building its summary) and writing its call file for the HTML folder cost about a millisecond each
and are independent per episode, so :func:`map_ordered` runs them in chunks on a
:class:`concurrent.futures.ProcessPoolExecutor` and hands the results back in input order: the
report is byte-for-byte the one a single process makes (tests/report/test_workers.py).

The pool follows the project's process rules (DESIGN.md, "process control"):

- workers are started with ``spawn`` (a fresh interpreter: no copied threads or locks);
- a worker ignores SIGINT (Ctrl-C reaches the whole process group; the parent alone decides) and
  exits within a second of its parent's death (a watcher thread);
- when the parent stops for any reason (an input error from a worker, Ctrl-C, a crash of a
  worker), pending chunks are cancelled and every worker is terminated before the exception goes
  on, so nothing the report started outlives it;
- an exception raised in a worker (e.g. :class:`~callbench.report.model.load.ReportInputError` naming a
  damaged file) is raised again in the parent unchanged; a worker killed by the system surfaces as
  :class:`WorkerCrash` with a plain message naming the signal, and workers that exit by themselves
  before any chunk comes back (they could not start: most often a script with no ``__main__``
  guard) as :class:`WorkerStartError`, whose message names that cause.

Small inputs run in the calling process (:data:`PARALLEL_MIN_ITEMS`): starting interpreters costs
about half a second of CPU each. Each map starts its own pool and shuts it down when it ends.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

PARALLEL_MIN_ITEMS = 1_000
"""Fewer items than this run in the calling process (the pool's start-up would cost more)."""

CHUNK_ITEMS = 200
"""Items per task sent to a worker: large enough that pickling the task and its results is small
beside the work (~1 ms per episode), small enough that the pool stays balanced at the end."""

WORKERS_ENV = "CALLBENCH_REPORT_WORKERS"
"""Environment variable overriding :func:`default_workers` (an integer >= 1; 1 = no pool)."""



class WorkerCrash(RuntimeError):
    """A worker process died without an answer (killed by the system, out of memory, a native
    crash); the message says so (with the signal when known) and how to retry in one process."""


class WorkerStartError(WorkerCrash):
    """The pool's worker processes could not start: a worker exited on its own (an exit status, not
    a signal) before any chunk came back. The usual cause is a script with no
    ``if __name__ == "__main__":`` guard: a spawned worker imports the main script again (Python's
    ``multiprocessing`` guide, "Safe importing of main module"), so it reruns the report and dies
    trying to start workers of its own. The message names that cause and the one-process remedy."""


RERUN_MAIN_LINE = (
    'error: a callbench report worker process ran the main script again (it has no `if __name__ == '
    '"__main__":` guard) and stopped; put the script\'s top-level code under that guard, or set '
    f"{WORKERS_ENV}=1"
)
"""What a spawned worker prints, instead of ``multiprocessing``'s traceback, when importing the main
script again reaches :func:`map_ordered` (Python's ``multiprocessing`` guide, "Safe importing of
main module"); the parent then raises :class:`WorkerStartError`."""

_configured = 1


def use_cpus(limit: int = 8) -> int:
    """Let this process's report work use the CPUs it may run on (``os.sched_getaffinity`` where
    available), at most ``limit``; returns that number. ``callbench report`` calls it; a library
    user who calls :func:`~callbench.report.model.load.load_runs` directly works in one process unless
    it calls this (worker processes are started with ``spawn``, which imports the caller's main
    module again: a script doing so needs the ``if __name__ == "__main__":`` guard, Python's
    multiprocessing guide, "Safe importing of main module")."""
    global _configured
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    _configured = max(1, min(cpus, limit))
    return _configured


def default_workers() -> int:
    """Worker processes for report work: ``$CALLBENCH_REPORT_WORKERS`` when set to an integer >= 1,
    else what :func:`use_cpus` set (1, no worker process, until it is called). Raises
    ``ValueError`` naming the variable when it is set to anything else."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"${WORKERS_ENV}={raw!r}: expected a whole number >= 1")
        return int(raw)
    return _configured


def _worker_init(parent: int) -> None:
    """In each worker: ignore SIGINT (the parent handles Ctrl-C and terminates the pool) and exit
    within a second of the parent's death (a watcher thread; not ``PR_SET_PDEATHSIG``, which fires
    when the *thread* that started the worker ends, and pools are started from threads too)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="callbench-worker-watch", daemon=True).start()


MANAGER_WAIT_S = 1.0
"""How long :func:`_terminate` lets the pool's manager thread end by itself once every worker is
gone, before it ends that thread's read of a half-sent result (a safety net, not a timing)."""


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and stop every worker now (a running chunk is not waited for).

    A worker stopped while sending its result leaves half a message in the result pipe, and the
    pool's manager thread, reading it, would wait for the rest forever: the parent holds its own
    copy of the pipe's write end, so no end of file comes, and interpreter exit joins that thread
    (``concurrent.futures.process``, CPython 3.11-3.13). Once every worker is gone, nothing else
    writes to that pipe (the parent only reads it), so closing the parent's write end lets the read
    end: the manager sees a broken pool and stops."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # CPython's table (None once shut)
    results = getattr(pool, "_result_queue", None)  # shutdown() drops these references
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        with contextlib.suppress(Exception):
            p.terminate()
    for p in processes:
        with contextlib.suppress(Exception):
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    if manager is None or results is None or any(p.is_alive() for p in processes):
        return
    manager.join(timeout=MANAGER_WAIT_S)
    if manager.is_alive():
        with contextlib.suppress(Exception):
            results._writer.close()
        manager.join(timeout=5)


_live: set[ProcessPoolExecutor] = set()
"""Pools of maps in progress (each map starts its own and shuts it down when it ends, so no pool
outlives its map: a pool left to interpreter exit can hang ``concurrent.futures``' exit handler)."""


WATCH_S = 1.0
"""How often a map waiting for a chunk looks for a worker that died without its pool noticing
(:func:`_result`); a liveness check, not a timing."""


def _dead_worker(pool: ProcessPoolExecutor) -> bool:
    """Whether a worker of ``pool`` has ended (workers end only at shutdown, so during a map an
    ended one died)."""
    return any(p.exitcode is not None for p in (getattr(pool, "_processes", None) or {}).values())


def _result(pool: ProcessPoolExecutor, future: Future[list[R]]) -> list[R]:
    """``future.result()``, or :class:`BrokenProcessPool` when a worker died and the pool did not
    notice. A worker killed while sending its result (out of memory, say) leaves half a message in
    the result pipe; the pool's manager thread reads it forever instead of watching the workers
    (``concurrent.futures.process``, CPython 3.11-3.13), so the future would never end. A death
    that the pool does notice ends the future within :data:`WATCH_S`; one it has not noticed
    :data:`WATCH_S` later is taken as that case (:func:`_terminate` then ends the stuck read)."""
    dead_seen = False
    while True:
        try:
            return future.result(timeout=WATCH_S)
        except TimeoutError:
            if not _dead_worker(pool):
                dead_seen = False
            elif dead_seen:
                raise BrokenProcessPool("a worker died while its result was being read") from None
            else:
                dead_seen = True


def close_pool(*, terminate: bool = False) -> None:
    """Stop the pools of maps in progress now (``terminate``: without waiting for their chunks);
    their maps then raise. For a caller that must stop work running on another thread."""
    for pool in list(_live):
        _live.discard(pool)
        if terminate:
            _terminate(pool)
        else:
            pool.shutdown(wait=True, cancel_futures=True)


def _exit_codes(pool: ProcessPoolExecutor) -> list[int]:
    """The exit codes of the pool's workers that have ended (``multiprocessing.Process.exitcode``:
    an exit status >= 0, or minus the signal that killed it), read once the pool's manager thread
    has finished stopping a broken pool (at most 5 s): it reaps the workers, and a code read while
    it does may not be known yet."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # CPython's table of its workers
    manager = getattr(pool, "_executor_manager_thread", None)
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.join(timeout=5)
    codes = []
    for p in processes:
        with contextlib.suppress(Exception):
            if p.exitcode is not None:
                codes.append(p.exitcode)
    return codes


def crash_error(codes: Sequence[int], *, answered: bool) -> WorkerCrash:
    """The one-line error for a pool broken by a dead worker, from the ended workers' exit
    ``codes`` (statuses >= 0 or minus a signal, as :func:`_exit_codes`) and whether any chunk had
    ``answered``. A worker that exited by itself before any answer is a
    :class:`WorkerStartError` (the pool could not start); a death by a signal names it (the
    pool's own SIGTERM to the other workers, which ``concurrent.futures`` sends once one has died,
    is named only when no other signal is seen)."""
    remedy = f"nothing was written. Retry, or run in one process with {WORKERS_ENV}=1"
    statuses = [c for c in codes if c >= 0]
    if statuses and not answered:
        return WorkerStartError(
            f"the report's worker processes could not start (a worker exited with status {statuses[0]} "
            "before returning anything): a script that reads runs with worker processes needs its "
            'top-level code under `if __name__ == "__main__":` (each worker imports the script '
            f"again), or set {WORKERS_ENV}=1 to read in one process; nothing was written"
        )
    signals = [-c for c in codes if c < 0]
    first = next((s for s in signals if s != signal.SIGTERM), signals[0] if signals else None)
    if first is None and statuses:
        return WorkerCrash(f"a report worker process exited unexpectedly (status {statuses[0]}); {remedy}")
    try:
        of = f" of {signal.Signals(first).name}" if first is not None else ""
    except ValueError:
        of = f" of signal {first}"
    return WorkerCrash(
        f"a report worker process died{of} (killed by the system, out of memory, or a native crash); {remedy}"
    )


def chunks(items: Sequence[T], size: int = CHUNK_ITEMS) -> list[list[T]]:
    """``items`` cut into consecutive lists of at most ``size`` (order kept)."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def map_ordered(
    fn: Callable[[list[T]], list[R]], items: Sequence[T], *, workers: int | None = None,
    chunk: int | None = None, min_items: int | None = None, ahead: int | None = None,
) -> Iterator[R]:
    """Yield ``fn(c)``'s results for consecutive chunks ``c`` of ``items``, flattened, in input
    order. ``fn`` must be a module-level function (it is pickled by reference) taking a list and
    returning one result per item. Chunks hold ``chunk`` items (default :data:`CHUNK_ITEMS`). With
    ``workers`` (default :func:`default_workers`) > 1 and at least ``min_items`` items (default
    :data:`PARALLEL_MIN_ITEMS`), chunks run on a spawn-started pool of its own, at most ``ahead``
    chunks (default ``2 * workers``: bounded memory) ahead of the consumer; otherwise in this
    process. A consumer that shares its process with other work (a background thread) should
    send every chunk at once (a large ``ahead``) so that the workers never wait for it.

    Raises whatever ``fn`` raises (from the first failing chunk in order), :class:`WorkerCrash`
    when a worker dies (:class:`WorkerStartError` when the workers could not start); either way
    every worker is stopped first. Called with workers in a spawned process that is still importing
    its parent's main script (a script with no ``__main__`` guard), it prints
    :data:`RERUN_MAIN_LINE` and exits that process (``SystemExit(1)``)."""
    workers = default_workers() if workers is None else workers
    parts = chunks(items, CHUNK_ITEMS if chunk is None else chunk)
    threshold = PARALLEL_MIN_ITEMS if min_items is None else min_items
    if workers <= 1 or len(items) < threshold or len(parts) < 2:
        for part in parts:
            yield from fn(part)
        return
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # a spawned process still importing the parent's main script (CPython sets ``_inheriting``
        # while it does, and refuses to start processes then): one line and exit status 1, not a
        # traceback per worker. One write of the whole line: the workers share the parent's stderr
        # and a write this short to a pipe is atomic, so their lines do not interleave.
        with contextlib.suppress(Exception):
            sys.stderr.write(RERUN_MAIN_LINE + "\n")
            sys.stderr.flush()
        raise SystemExit(1)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(parts)), mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init, initargs=(os.getpid(),),
    )
    _live.add(pool)
    window = 2 * workers if ahead is None else max(1, ahead)
    pending: deque[Future[list[R]]] = deque()
    todo = iter(parts)
    answered = False  # whether any chunk came back (a pool that never answered may not have started)
    try:
        try:
            for part in todo:
                pending.append(pool.submit(fn, part))
                if len(pending) >= window:
                    break
            while pending:
                done = _result(pool, pending.popleft())
                answered = True
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(fn, nxt))
                yield from done
        except BrokenProcessPool:  # from result() or from a submit() after the crash
            raise crash_error(_exit_codes(pool), answered=answered) from None
    except BaseException:  # an error, Ctrl-C, or the consumer stopped early: stop every worker now
        _live.discard(pool)
        _terminate(pool)
        raise
    _live.discard(pool)
    pool.shutdown(wait=True)
