"""The run store: the run folder on disk and its SQLite index.

Trace files are the source of truth; ``index.sqlite`` is a queryable index over them (status, end
reason, scores) that :func:`RunIndex.rebuild` recreates from the files at any time. Every write is
atomic: traces and manifests via temp file + rename, index rows inside SQLite transactions. A run
killed at any moment (Ctrl-C or kill -9) keeps every finished trace and never leaves a half-written
one (a leftover ``.*.tmp`` file is ignored and removed on resume).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from callbench.models.faults import FaultLedger
from callbench.runs.manifest import FAULTS, GRADES, MANIFEST, TRACES, RunManifest
from callbench.trace import Trace, atomic_write_text, load_trace, save_trace

INDEX = "index.sqlite"

_SCHEMA = """
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
  cost_usd REAL
);
CREATE TABLE IF NOT EXISTS grades (
  grade_set_id TEXT NOT NULL,
  episode_id TEXT NOT NULL,
  task REAL, conversation REAL, overall REAL, passed INTEGER, judge_errors INTEGER,
  PRIMARY KEY (grade_set_id, episode_id)
);
"""


class RunStore:
    """A run folder: manifest, traces and index. ``root`` is created on first write."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.traces = self.root / TRACES

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
        return self.traces / f"{episode_id}.json"

    def finished_ids(self) -> set[str]:
        """Episode ids that have a complete trace file (leftover temp files are removed)."""
        if not self.traces.is_dir():
            return set()
        for tmp in self.traces.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
        return {p.stem for p in self.traces.glob("*.json")}

    def save_trace(self, trace: Trace) -> None:
        """Save atomically, then index it."""
        save_trace(trace, self.trace_path(trace.episode_id))
        with self._db() as db:
            _index_trace(db, trace)

    def load_trace(self, episode_id: str) -> Trace:
        return load_trace(self.trace_path(episode_id))

    # -------------------------------------------------------------- fault ledgers
    def faults_path(self, episode_id: str) -> Path:
        return self.root / FAULTS / f"{episode_id}.json"

    def save_faults(self, episode_id: str, ledger: FaultLedger) -> None:
        """Save an episode's fault ledger atomically (``faults/<episode_id>.json``)."""
        atomic_write_text(self.faults_path(episode_id), ledger.model_dump_json(indent=1) + "\n")

    def load_faults(self, episode_id: str) -> FaultLedger | None:
        """An episode's fault ledger; None when absent or unreadable (runs made before ledgers)."""
        p = self.faults_path(episode_id)
        try:
            return FaultLedger.model_validate_json(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    # -------------------------------------------------------------- index
    def _db(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.root / INDEX, timeout=30)
        db.executescript(_SCHEMA)
        return db

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
        """Index one episode grade (insert or replace)."""
        with self._db() as db:
            _index_grade(db, grade_set_id, episode_id, task, conversation, overall, passed, judge_errors)

    def rebuild_index(self) -> int:
        """Recreate the episodes table from the trace files and the grades table from the episode
        grade files of every grade set folder (a kill between writing a grade file and its index
        row loses nothing); returns the number of episodes indexed."""
        from callbench.grade.models import EpisodeGrade

        n = 0
        with self._db() as db:
            db.execute("DELETE FROM episodes")
            for eid in sorted(self.finished_ids()):
                _index_trace(db, self.load_trace(eid))
                n += 1
            grades = self.root / GRADES
            for path in sorted(grades.glob("*/episodes/*.json")) if grades.is_dir() else []:
                try:
                    g = EpisodeGrade.model_validate_json(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue  # an unreadable grade file is reported by the grader, not indexed
                _index_grade(db, g.grade_set_id, g.episode_id, g.task_score, g.conversation_score,
                             g.overall, g.passed, g.judge_errors)
        return n

    def total_cost(self, episode_ids: set[str]) -> float | None:
        """Summed cost in USD of the given indexed episodes; None when any price is unknown."""
        with self._db() as db:
            rows = list(db.execute("SELECT episode_id, cost_usd FROM episodes"))
        costs = [c for e, c in rows if e in episode_ids]
        return None if any(c is None for c in costs) else float(sum(costs))

    def episode_rows(self) -> list[tuple[str, str, str | None]]:
        """(episode_id, end_reason, skip_reason) for every indexed episode, by id."""
        with self._db() as db:
            return list(
                db.execute("SELECT episode_id, end_reason, skip_reason FROM episodes ORDER BY episode_id")
            )


def _index_trace(db: sqlite3.Connection, t: Trace) -> None:
    inp = sum(u.input_tokens for u in t.usage.values())
    out = sum(u.output_tokens for u in t.usage.values())
    costs = [u.cost_usd for u in t.usage.values()]
    cost = None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
    db.execute(
        "INSERT OR REPLACE INTO episodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            t.episode_id,
            t.candidate.spec,
            t.agent_id,
            t.scenario_id,
            t.language,
            t.difficulty,
            t.repeat,
            t.end_reason.value,
            t.skip_reason,
            t.sha256(),
            inp,
            out,
            cost,
        ),
    )


def _index_grade(db: sqlite3.Connection, grade_set_id: str, episode_id: str, task: float | None,
                 conversation: float | None, overall: float | None, passed: bool | None,
                 judge_errors: int) -> None:
    db.execute(
        "INSERT OR REPLACE INTO grades VALUES (?,?,?,?,?,?,?)",
        (grade_set_id, episode_id, task, conversation, overall, None if passed is None else int(passed),
         judge_errors),
    )
