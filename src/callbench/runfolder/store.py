"""The run store: the run folder on disk and its SQLite index.

Trace files are the source of truth; ``index.sqlite`` is a queryable index over them (status, end
reason, scores, and each trace file's size, modification time and hash) that
:meth:`RunStore.rebuild_index` recreates from the files at any time and
:meth:`RunStore.reconcile_index` brings up to date cheaply on resume (an index that is no longer
a database is renamed ``index.sqlite.damaged-<time>`` and filled again from the files). Every
write is atomic: traces and manifests via temp file + fsync + rename, index rows inside SQLite
transactions (WAL journal).
A run killed at any moment (Ctrl-C or kill -9) keeps every finished trace and never leaves a
half-written one (a leftover ``.*.tmp`` file is ignored and removed on resume).

One store holds one long-lived SQLite connection, one ordered writer thread
(:meth:`RunStore.submit`: manifest, grade sets, index rows of grades) and a few episode writer
threads (:meth:`RunStore.submit_episode`), so that every write runs off the event loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from callbench.models.faults import FaultLedger
from callbench.runfolder import episode_files
from callbench.runfolder.index import (  # noqa: F401  (INDEX and the hash lookups are re-exported)
    ADDED,
    ADDED_TYPES,
    INDEX,
    SCHEMA,
    GradeRow,
    content_sha256,
    index_grade,
    index_trace,
    recorded_grade_hashes,
    recorded_trace_hashes,
    set_aside,
    text_sha256,
)
from callbench.runfolder.manifest import FAULTS, GRADES, MANIFEST, TRACES, RunManifest
from callbench.trace import Trace, atomic_write_text, load_trace

PREFLIGHT = "preflight"
"""``faults/preflight/``: the fault ledgers of the preflights (one file per invocation)."""

EPISODE_WRITERS = 4
"""Threads saving finished episodes at once (each save fsyncs two files)."""
T = TypeVar("T")

@dataclass(frozen=True)
class Reconciled:
    """What :meth:`RunStore.reconcile_index` found: trace files trusted from their size and
    modification time, re-hashed (size or time changed), (re)indexed from their content, and
    index rows dropped because their trace file is gone."""

    trusted: int = 0
    rehashed: int = 0
    reindexed: int = 0
    dropped: int = 0


class RunStore:
    """A run folder: manifest, traces and index. ``root`` is created on first write.

    Thread-safe: index access is serialised by a lock; :meth:`submit` runs a function on the
    store's single writer thread. :meth:`close` (or leaving a ``with RunStore(...)`` block) ends
    the threads and the connection; every command closes its store when it ends, on error too, so
    no file of the run folder stays open (a folder can then be unmounted or moved)."""

    def __init__(self, root: Path, *, episode_writers: int = EPISODE_WRITERS) -> None:
        self.root = Path(root)
        self.traces = self.root / TRACES
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._writer: ThreadPoolExecutor | None = None
        self._episode_writers = max(1, episode_writers)
        self._episodes: ThreadPoolExecutor | None = None

    # -------------------------------------------------------------- lifecycle
    async def submit(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the writer thread and return its result (exceptions propagate).
        Calls run one at a time in submission order, so a later save never overtakes an earlier."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="callbench-store")
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    async def submit_episode(self, trace: Trace, ledger: FaultLedger) -> str:
        """:meth:`save_episode` on one of the episode writer threads (``episode_writers`` of them,
        so that the fsyncs of different episodes overlap on a busy disk; one episode's ledger,
        trace and index row are still written in that order by one thread)."""
        if self._episodes is None:
            self._episodes = ThreadPoolExecutor(max_workers=self._episode_writers,
                                                thread_name_prefix="callbench-episodes")
        return await asyncio.get_running_loop().run_in_executor(self._episodes, self.save_episode, trace,
                                                                ledger)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Wait for pending writes, then close the writer threads and the index connection. The
        store may be used again afterwards (threads and connection are opened on demand)."""
        for pool in (self._episodes, self._writer):
            if pool is not None:
                pool.shutdown(wait=True)
        self._episodes = self._writer = None
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _db(self) -> sqlite3.Connection:
        """The store's one connection (WAL journal; ``synchronous=NORMAL`` keeps every committed
        transaction across a process kill). Use inside ``with self._lock``."""
        if self._conn is None:
            self.root.mkdir(parents=True, exist_ok=True)
            try:
                self._conn = self._connect()
            except sqlite3.DatabaseError as e:
                if isinstance(e, sqlite3.OperationalError):  # locked, unwritable, I/O: not damage
                    raise
                # not a database any more: the trace and grade files are the source of truth, so
                # the file is kept aside and a fresh index is filled from them (reconcile_index)
                set_aside(self.root / INDEX)
                self._conn = self._connect()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        """Open the index and bring its schema up to date; raises ``sqlite3.DatabaseError``."""
        db = sqlite3.connect(self.root / INDEX, timeout=30, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(SCHEMA)
            for table, columns in ADDED.items():
                have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
                for col in columns:
                    if col not in have:
                        kind = ADDED_TYPES.get(col, "INTEGER")
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {col} {kind}")
            db.commit()
        except BaseException:
            db.close()  # a folder that refused the index (full, read-only) keeps no file open
            raise
        return db

    # -------------------------------------------------------------- manifest
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def load_manifest(self) -> RunManifest | None:
        """The saved manifest, or None when the folder holds no run yet.

        Raises ``ValueError`` naming the file when it exists but cannot be read.
        """
        p = self.manifest_path()
        if not p.exists():
            return None
        try:
            return RunManifest.model_validate_json(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"{p}: not a readable run manifest: {str(e)[:300]}") from None

    def save_manifest(self, manifest: RunManifest) -> None:
        """Save atomically. Grade set ids registered on disk meanwhile (by a grader) are kept."""
        with self._lock:
            try:
                disk = self.load_manifest()
            except ValueError:
                disk = None
            if disk is not None:
                manifest.grade_sets = manifest.grade_sets + [
                    g for g in disk.grade_sets if g not in manifest.grade_sets
                ]
            atomic_write_text(self.manifest_path(), manifest.model_dump_json(indent=1) + "\n")

    # -------------------------------------------------------------- traces
    def trace_path(self, episode_id: str) -> Path:
        """The episode's trace file: compressed, or plain in an older run; the path a save would
        write when there is none (:func:`episode_files.path_for`)."""
        return episode_files.path_for(self.traces, episode_id)

    def finished_ids(self) -> set[str]:
        """Episode ids that have a complete trace file of either form (leftover temp files are
        removed)."""
        episode_files.remove_temp_files(self.traces)
        return set(episode_files.scan(self.traces))

    def save_trace(self, trace: Trace) -> str:
        """Save atomically (compressed, :mod:`callbench.runfolder.episode_files`), then index it;
        returns the hash of the file's text (:func:`text_sha256`).

        The trace is serialised once (``Trace.canonical_texts``, the C JSON encoder): the file text
        is written, hashed and its size recorded in the index, beside the content hash
        (``Trace.sha256()``, what a grade records), so a report can match a grade to an unchanged
        trace file from the index without re-serialising the trace."""
        text, content = trace.canonical_texts()
        path = write_trace_text(self.traces, trace.episode_id, text)
        sha = text_sha256(text)
        st = path.stat()
        with self._lock:
            db = self._db()
            with db:
                index_trace(db, trace, sha, content_sha256(text, content), st.st_size, st.st_mtime_ns)
        return sha

    def save_episode(self, trace: Trace, ledger: FaultLedger) -> str:
        """Save an episode's fault ledger, then its trace (so a saved trace always has its ledger);
        returns the trace hash. For the writer thread."""
        self.save_faults(trace.episode_id, ledger)
        return self.save_trace(trace)

    def load_trace(self, episode_id: str) -> Trace:
        """The episode's trace (either file form); raises ``ValueError`` naming the file."""
        return load_trace(self.trace_path(episode_id))

    # -------------------------------------------------------------- fault ledgers
    def faults_path(self, episode_id: str) -> Path:
        return self.root / FAULTS / f"{episode_id}.json"

    def save_faults(self, episode_id: str, ledger: FaultLedger) -> None:
        """Save an episode's fault ledger atomically (``faults/<episode_id>.json``)."""
        atomic_write_text(self.faults_path(episode_id), ledger.model_dump_json(indent=1) + "\n")

    def save_preflight_faults(self, ledger: FaultLedger) -> Path:
        """Save the fault ledger of one invocation's preflight atomically, as
        ``faults/preflight/<UTC time>.json`` (one file per invocation, never overwritten)."""
        import datetime as dt

        folder = self.root / FAULTS / PREFLIGHT
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = folder / f"{stamp}.json"
        n = 1
        while path.exists():
            n += 1
            path = folder / f"{stamp}-{n}.json"
        atomic_write_text(path, ledger.model_dump_json(indent=1) + "\n")
        return path

    def load_faults(self, episode_id: str) -> FaultLedger | None:
        """An episode's fault ledger; None when absent or unreadable (runs made before ledgers)."""
        p = self.faults_path(episode_id)
        try:
            return FaultLedger.model_validate_json(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    # -------------------------------------------------------------- index
    def grade_path(self, grade_set_id: str, episode_id: str) -> Path:
        """An episode's grade file of a grade set (either form; :func:`episode_files.path_for`)."""
        return episode_files.path_for(self.root / GRADES / grade_set_id / "episodes", episode_id)

    def index_grade(
        self,
        grade_set_id: str,
        episode_id: str,
        task: float | None,
        conversation: float | None,
        overall: float | None,
        passed: bool | None,
        judge_errors: int,
    ) -> None:
        """Index one episode grade (insert or replace), with its grade file's size, time and
        content hash (:func:`text_sha256` of its text): the record that makes a later edit of the
        file visible (the report warns, as for an edited trace)."""
        size: int | None = None
        mtime: int | None = None
        sha: str | None = None
        try:
            path = self.grade_path(grade_set_id, episode_id)
            st = path.stat()
            size, mtime = st.st_size, st.st_mtime_ns
            sha = text_sha256(episode_files.read_text(path))
        except (OSError, UnicodeDecodeError):
            pass  # no grade file (an index-only caller): the next reconcile reads the file if any
        with self._lock:
            db = self._db()
            with db:
                index_grade(db, grade_set_id, episode_id, task, conversation, overall, passed,
                             judge_errors, size, mtime, sha)

    def rebuild_index(self) -> int:
        """Recreate the episodes table from the trace files and the grades table from the episode
        grade files of every grade set folder (a kill between writing a grade file and its index
        row loses nothing); returns the number of episodes indexed. Reads and re-hashes every
        file: :meth:`reconcile_index` is the cheap form a resume uses."""
        with self._lock:
            db = self._db()
            with db:
                db.execute("DELETE FROM episodes")
                db.execute("DELETE FROM grades")
            n = 0
            for eid in sorted(self.finished_ids()):
                self._reindex_trace(db, eid)
                n += 1
            self._reconcile_grades(db)
        return n

    def reconcile_index(self) -> Reconciled:
        """Bring the index up to date with the files, reading only what changed.

        A trace file whose size and modification time equal its index row's is trusted; one whose
        size or time changed is re-hashed and kept when the hash still matches; any other file
        (no row, or other content) is parsed and indexed again (its content hash computed anew);
        a row whose file is gone is dropped (that episode runs again). Rows of an index made
        before content hashes were kept stay without one (the report then hashes the trace).
        Grade rows are brought up to date the same way from the grade files. Raises ``ValueError``
        naming the file when a trace file is not a readable trace (delete it to run that episode
        again)."""
        found: dict[str, tuple[int, int]] = {}
        episode_files.remove_temp_files(self.traces)
        for eid, e in episode_files.scan(self.traces).items():
            st = e.stat()
            found[eid] = (st.st_size, st.st_mtime_ns)
        trusted = rehashed = reindexed = 0
        with self._lock:
            db = self._db()
            rows = {
                r[0]: (r[1], r[2], r[3])
                for r in db.execute(
                    "SELECT episode_id, trace_size, trace_mtime_ns, trace_sha256 FROM episodes")
            }
            gone = sorted(set(rows) - set(found))
            with db:
                db.executemany("DELETE FROM episodes WHERE episode_id = ?", [(e,) for e in gone])
            for eid, (size, mtime) in sorted(found.items()):
                row = rows.get(eid)
                if row is not None and row[0] == size and row[1] == mtime:
                    trusted += 1
                    continue
                if row is not None and row[0] == size:
                    text = _read(self.trace_path(eid))
                    if text_sha256(text) == row[2]:
                        with db:
                            db.execute("UPDATE episodes SET trace_mtime_ns = ? WHERE episode_id = ?",
                                       (mtime, eid))
                        rehashed += 1
                        continue
                self._reindex_trace(db, eid)
                reindexed += 1
            self._reconcile_grades(db)
        return Reconciled(trusted, rehashed, reindexed, len(gone))

    def _reindex_trace(self, db: sqlite3.Connection, episode_id: str) -> None:
        path = self.trace_path(episode_id)
        text = _read(path)
        try:
            trace = Trace.model_validate_json(text)
        except ValueError as e:
            raise ValueError(
                f"{path}: not a readable trace: {' '.join(str(e).split())[:300]}; "
                "delete it to run the episode again"
            ) from None
        st = path.stat()
        with db:
            index_trace(db, trace, text_sha256(text), trace.sha256(), st.st_size, st.st_mtime_ns)

    def _reconcile_grades(self, db: sqlite3.Connection) -> None:
        """Index grade files that have no row or whose size or time changed; drop rows without a
        file. An unreadable grade file is skipped (the grader reports it). A file whose content no
        longer has the hash its row recorded keeps its row (scores and hash as graded): an edit
        after grading is never taken in silently, and the report warns about it."""
        found: dict[tuple[str, str], tuple[Path, int, int]] = {}
        grades = self.root / GRADES
        if grades.is_dir():
            for gdir in grades.iterdir():
                for eid, e in episode_files.scan(gdir / "episodes").items():
                    st = e.stat()
                    found[(gdir.name, eid)] = (Path(e.path), st.st_size, st.st_mtime_ns)
        rows = {(r[0], r[1]): (r[2], r[3]) for r in
                db.execute("SELECT grade_set_id, episode_id, file_size, file_mtime_ns FROM grades")}
        hashes = {(r[0], r[1]): r[2] for r in
                  db.execute("SELECT grade_set_id, episode_id, file_sha256 FROM grades")}
        with db:
            db.executemany("DELETE FROM grades WHERE grade_set_id = ? AND episode_id = ?",
                           sorted(set(rows) - set(found)))
            for key, (path, size, mtime) in sorted(found.items()):
                if rows.get(key) == (size, mtime):
                    continue
                try:
                    text = episode_files.read_text(path)
                    if hashes.get(key) and text_sha256(text) != hashes[key]:
                        continue  # changed since it was indexed: keep the record (the report warns)
                    g = GradeRow.model_validate_json(text)
                except (OSError, ValueError):
                    continue  # an unreadable grade file is reported by the grader, not indexed
                index_grade(db, g.grade_set_id, g.episode_id, g.task_score, g.conversation_score,
                             g.overall, g.passed, g.judge_errors, size, mtime, text_sha256(text))

    def total_cost(self, episode_ids: set[str]) -> float | None:
        """Summed cost in USD of the given indexed episodes; None when any price is unknown."""
        with self._lock:
            rows = list(self._db().execute("SELECT episode_id, cost_usd FROM episodes"))
        costs = [c for e, c in rows if e in episode_ids]
        return None if any(c is None for c in costs) else float(sum(costs))

    def episode_rows(self) -> list[tuple[str, str, str | None]]:
        """(episode_id, end_reason, skip_reason) for every indexed episode, by id."""
        with self._lock:
            return list(
                self._db().execute(
                    "SELECT episode_id, end_reason, skip_reason FROM episodes ORDER BY episode_id")
            )


def write_trace_text(traces: Path, episode_id: str, text: str) -> Path:
    """Write a trace's canonical JSON ``text`` (plus a final newline) atomically and compressed
    into the ``traces`` folder; returns the file's path (:func:`episode_files.write_text`)."""
    return episode_files.write_text(traces, episode_id, text + "\n")


def _read(path: Path) -> str:
    try:
        return episode_files.read_text(path)
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a readable trace: {e}; delete it to run the episode again") from None
