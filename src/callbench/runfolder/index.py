"""The run folder's SQLite index (``index.sqlite``): its schema, the rows written for a trace and
for a grade, and read-only lookups of the hashes it recorded.

The index is a cache over the run folder's files (:mod:`callbench.runfolder.store` keeps it up to
date and rebuilds it from the files at any time); a lookup here opens it read-only and returns
nothing rather than fail when it is missing, older or damaged.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from callbench.trace import Trace

INDEX = "index.sqlite"
"""The index's file name in the run folder."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
  episode_id TEXT PRIMARY KEY,
  candidate TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  scenario_id TEXT NOT NULL,
  language TEXT NOT NULL,
  difficulty TEXT NOT NULL,
  repeat INTEGER NOT NULL,
  end_reason TEXT NOT NULL,
  skip_reason TEXT,
  trace_sha256 TEXT NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  cost_usd REAL,
  trace_size INTEGER,
  trace_mtime_ns INTEGER,
  content_sha256 TEXT
);
CREATE TABLE IF NOT EXISTS grades (
  grade_set_id TEXT NOT NULL,
  episode_id TEXT NOT NULL,
  task REAL, conversation REAL, overall REAL, passed INTEGER, judge_errors INTEGER,
  file_size INTEGER, file_mtime_ns INTEGER,
  PRIMARY KEY (grade_set_id, episode_id)
);
"""
# columns added after the first index format; an older index gains them (NULL = not yet checked)
ADDED = {"episodes": ("trace_size", "trace_mtime_ns", "content_sha256"),
         "grades": ("file_size", "file_mtime_ns", "file_sha256")}
ADDED_TYPES = {"file_sha256": "TEXT", "content_sha256": "TEXT"}  # the others are INTEGER


def text_sha256(text: str) -> str:
    """The hash the index keeps for a trace file's text (``trace_sha256``, what tells an edited
    file): SHA-256 of the UTF-8 text without its final newline. ``save_trace`` writes
    ``canonical_json() + "\\n"``, so it equals ``Trace.sha256()``, the content hash a grade
    records, only for traces without timings; the index keeps the content hash beside it
    (``content_sha256``)."""
    return hashlib.sha256(text.removesuffix("\n").encode("utf-8")).hexdigest()


def content_sha256(text: str, content: str) -> str:
    """``Trace.sha256()`` from :meth:`Trace.canonical_texts` (``text``, ``content``) without a
    second hash when they are the same string (a trace without timings)."""
    return text_sha256(text) if content is text else hashlib.sha256(content.encode("utf-8")).hexdigest()


class GradeRow(BaseModel):
    """The fields of an episode grade file (``callbench.grade.models.EpisodeGrade``, the grader's
    model) that the index holds, with the same types; other fields are ignored. Read here rather
    than through the grader's model because the run folder sits below the grader in the package."""

    grade_set_id: str
    episode_id: str
    task_score: float | None = None
    conversation_score: float | None = None
    overall: float | None = None
    passed: bool | None = None
    judge_errors: int = 0


def index_trace(db: sqlite3.Connection, t: Trace, sha: str, content_sha: str, size: int,
                mtime_ns: int) -> None:
    """Write (or replace) trace ``t``'s row: its identity, end, tokens and cost (None when any
    role's cost is unknown), the file's hash ``sha`` (:func:`text_sha256`), content hash, size in
    bytes and modification time in nanoseconds."""
    inp = sum(u.input_tokens for u in t.usage.values())
    out = sum(u.output_tokens for u in t.usage.values())
    costs = [u.cost_usd for u in t.usage.values()]
    cost = None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
    db.execute(
        "INSERT OR REPLACE INTO episodes (episode_id, candidate, agent_id, scenario_id, language,"
        " difficulty, repeat, end_reason, skip_reason, trace_sha256, input_tokens, output_tokens,"
        " cost_usd, trace_size, trace_mtime_ns, content_sha256) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            t.episode_id, t.candidate.spec, t.agent_id, t.scenario_id, t.language, t.difficulty,
            t.repeat, t.end_reason.value, t.skip_reason, sha, inp, out, cost, size, mtime_ns, content_sha,
        ),
    )


def index_grade(db: sqlite3.Connection, grade_set_id: str, episode_id: str, task: float | None,
                conversation: float | None, overall: float | None, passed: bool | None,
                judge_errors: int, size: int | None, mtime_ns: int | None, sha: str | None = None) -> None:
    """Write (or replace) one episode grade's row in ``grade_set_id``: its scores and verdict, and
    the grade file's size, modification time (ns) and hash (:func:`text_sha256`; None: unknown)."""
    db.execute(
        "INSERT OR REPLACE INTO grades (grade_set_id, episode_id, task, conversation, overall,"
        " passed, judge_errors, file_size, file_mtime_ns, file_sha256) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (grade_set_id, episode_id, task, conversation, overall, None if passed is None else int(passed),
         judge_errors, size, mtime_ns, sha),
    )


def recorded_grade_hashes(run_dir: Path, grade_set_id: str) -> dict[str, str]:
    """Episode id -> the grade file hash the run index recorded for ``grade_set_id``
    (:func:`text_sha256`), read without writing; empty when there is no index or it records no
    hashes (an index from before they were kept, or one that cannot be read)."""
    rows = _read_only(run_dir, "SELECT episode_id, file_sha256 FROM grades WHERE grade_set_id = ?",
                      (grade_set_id,))
    return {str(e): str(h) for e, h in rows if h}


def set_aside(index: Path) -> None:
    """Rename a damaged index (and its WAL and shared-memory files, which must not meet a new
    database of the same name) to ``<name>.damaged-<UTC time>``: kept, never deleted."""
    import datetime as dt

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    for suffix in ("", "-wal", "-shm"):
        path = index.with_name(index.name + suffix)
        if path.exists():
            path.rename(index.with_name(f"{index.name}.damaged-{stamp}{suffix}"))


def recorded_trace_hashes(run_dir: Path) -> dict[str, tuple[str, str]]:
    """Episode id -> (hash of the trace file's text, content hash ``Trace.sha256()``) as the run
    index recorded them, read without writing. A trace file whose text still has the first hash
    has the second as its content hash, so a grade is matched to it without parsing and
    re-serialising the trace. Only rows with both hashes; empty when there is no index, it cannot
    be read, or it was made before content hashes were kept (the reader then hashes the trace)."""
    rows = _read_only(run_dir, "SELECT episode_id, trace_sha256, content_sha256 FROM episodes", ())
    return {str(e): (str(t), str(c)) for e, t, c in rows if t and c}


def _read_only(run_dir: Path, query: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
    """The rows of ``query`` on the run index opened read-only; empty when there is no index or
    the query fails on it (an older index without the column, a damaged file)."""
    path = run_dir / INDEX
    if not path.is_file():
        return []
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return db.execute(query, args).fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return []
