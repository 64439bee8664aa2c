"""Load run folders (``runs/manifest.py`` layout) into typed records for the report, streaming.

Reads ``RUN_DIR/manifest.json`` (:class:`RunManifest`), each trace file
(``RUN_DIR/traces/<episode_id>.json.gz``, or ``.json`` in older runs; :class:`Trace`) and the chosen
grade set ``RUN_DIR/grades/<id>/grade_set.json`` (:class:`GradeSetManifest`) with its episode
grades (:class:`EpisodeGrade`). The default grade set is the last one listed in
``manifest.grade_sets`` (the latest regrade). File names and formats:
:mod:`callbench.runs.episode_files`.

Each trace is read once and dropped (issue 27 item 1): what the report needs from it is kept as
the episode's :class:`EpisodeRecord` and counted into the run's simulator ledger, fault ledger and
:class:`TraceFacts` as it goes, so memory holds per-episode summaries, not traces. The HTML trace
viewer reads traces again one at a time through :meth:`RunData.iter_episodes`.

Every problem with an input file raises :class:`ReportInputError` whose message names the file
and says what is wrong; the CLI prints it and exits 2. Inconsistencies that still allow an honest
report (a grade computed from an older trace, a trace not in the plan) become warnings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from callbench.grade.models import EpisodeGrade, GradeSetManifest
from callbench.report.faults import FaultCounter, RunFaults
from callbench.report.ledger import LedgerCounter, RunLedger
from callbench.runs import episode_files
from callbench.runs.manifest import MANIFEST, EpisodeKey, RunManifest, grades_dir, traces_dir
from callbench.stats.summary import EpisodeRecord
from callbench.trace import RoleInfo, Trace

M = TypeVar("M", bound=BaseModel)


class ReportInputError(Exception):
    """An unreadable or inconsistent report input; the message names the file."""


@dataclass
class TraceFacts:
    """What the fairness checks need from a run's traces: the distinct caller and candidate
    roles the traces record (by their JSON) and, per (agent, scenario), the SHA-256 of each
    distinct caller system prompt."""

    callers: list[RoleInfo] = field(default_factory=list)
    candidates: list[RoleInfo] = field(default_factory=list)
    caller_prompts: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)

    def add(self, trace: Trace) -> None:
        for kind, role, into in (("caller", trace.caller, self.callers),
                                 ("candidate", trace.candidate, self.candidates)):
            key = kind + role.model_dump_json()
            if key not in self._seen:
                self._seen.add(key)
                into.append(role)
        digest = hashlib.sha256(trace.caller_view.system_prompt.encode()).hexdigest()
        self.caller_prompts.setdefault((trace.agent_id, trace.scenario_id), set()).add(digest)


@dataclass
class RunData:
    """One loaded run: its manifest, chosen grade set, one record per episode (plan order, then
    episodes not in the plan by id), and what was counted from its traces and grades as they
    were read (simulator ledger, fault ledger, :class:`TraceFacts`). Traces and grades are not
    kept: :meth:`iter_episodes` reads them again, one at a time."""

    run_dir: Path
    manifest: RunManifest
    grade_set: GradeSetManifest
    records: list[EpisodeRecord]
    ledger: RunLedger
    faults: RunFaults
    facts: TraceFacts
    warnings: list[str] = field(default_factory=list)
    trace_files: dict[str, Path] = field(default_factory=dict)
    grade_files: dict[str, Path] = field(default_factory=dict)

    def iter_episodes(self) -> Iterator[tuple[EpisodeRecord, Trace | None, EpisodeGrade | None]]:
        """``(record, trace, grade)`` of every record that has a trace or a grade, in record
        order, each read from its file when reached and not kept (for the HTML viewer). Raises
        :class:`ReportInputError` naming the file when a file changed into an unreadable one since
        :func:`load_run`."""
        for rec in self.records:
            tpath, gpath = self.trace_files.get(rec.episode_id), self.grade_files.get(rec.episode_id)
            if tpath is None and gpath is None:
                continue
            trace = _parse(tpath, _read_text(tpath, "trace"), Trace, "trace") if tpath else None
            grade = read_model(gpath, EpisodeGrade, "episode grade") if gpath else None
            yield rec, trace, grade


def _short_error(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{e.error_count() - 3} more)" if e.error_count() > 3 else ""
    return "; ".join(parts) + more


_RECOVER = {
    "trace": "; delete it and run the same `callbench run` command to simulate that episode again",
    "episode grade": "; delete it and regrade the run (`callbench grade RUN_DIR`)",
}
"""How to recover from a damaged per-episode file, appended to its error (everything else in the
run folder is kept; report it again afterwards)."""


def _read_text(path: Path, what: str) -> str:
    try:
        return episode_files.read_text(path)
    except FileNotFoundError:
        raise ReportInputError(f"{path}: missing ({what})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportInputError(f"{path}: cannot read {what}: {e}{_RECOVER.get(what, '')}") from None


def _parse(path: Path, text: str, model: type[M], what: str) -> M:
    try:
        return model.model_validate_json(text)
    except ValidationError:
        pass  # diagnose below: JSON syntax first, then the model's field errors
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        empty = " (the file is empty)" if not text.strip() else ""
        raise ReportInputError(
            f"{path}: not valid JSON ({what}){empty}: line {e.lineno} column {e.colno}: {e.msg}"
            f"{_RECOVER.get(what, '')}"
        ) from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ReportInputError(f"{path}: not a valid {what}: {_short_error(e)}") from None


def read_model(path: Path, model: type[M], what: str) -> M:
    """Parse ``path`` as ``model``; raises :class:`ReportInputError` naming the file when it is
    missing, unreadable, not JSON, or does not match the model (first field errors quoted)."""
    return _parse(path, _read_text(path, what), model, what)


def _text_sha256(text: str) -> str:
    """Hash of a trace file's text. ``save_trace`` writes exactly ``canonical_json() + "\n"``, so
    for files it wrote this equals ``Trace.sha256()`` without re-serialising the trace."""
    return hashlib.sha256(text.removesuffix("\n").encode()).hexdigest()


def load_run(run_dir: Path, grade_set_id: str | None = None) -> RunData:
    """Load one run folder, reading each trace and grade file once (module docstring).
    ``grade_set_id`` picks a grade set (default: the manifest's last).

    Raises :class:`ReportInputError` when the folder, manifest, grade set or any trace/grade file
    is missing or corrupt, or the run has no grade set.
    """
    if not run_dir.is_dir():
        raise ReportInputError(f"{run_dir}: not a run folder (no such directory)")
    manifest = read_model(run_dir / MANIFEST, RunManifest, "run manifest")
    if grade_set_id is None:
        if not manifest.grade_sets:
            raise ReportInputError(
                f"{run_dir / MANIFEST}: the run has no grade set yet; grade it first (callbench grade)"
            )
        grade_set_id = manifest.grade_sets[-1]
    elif grade_set_id not in manifest.grade_sets and not (grades_dir(run_dir, grade_set_id)).is_dir():
        known = ", ".join(manifest.grade_sets) or "none"
        raise ReportInputError(f"{run_dir}: no grade set {grade_set_id!r} (known: {known})")
    gdir = grades_dir(run_dir, grade_set_id)
    grade_set = read_model(gdir / "grade_set.json", GradeSetManifest, "grade set manifest")
    warnings: list[str] = []

    trace_files = episode_files.paths(traces_dir(run_dir))
    grade_files = episode_files.paths(gdir / "episodes")
    planned = {k.episode_id: k for k in manifest.planned}
    ledger = LedgerCounter()
    faults = FaultCounter(run_dir)
    facts = TraceFacts()
    by_id: dict[str, EpisodeRecord] = {}
    for episode_id in [*planned, *sorted((set(trace_files) | set(grade_files)) - set(planned))]:
        key = planned.get(episode_id)
        tpath, gpath = trace_files.get(episode_id), grade_files.get(episode_id)
        trace: Trace | None = None
        if tpath is not None:
            text = _read_text(tpath, "trace")
            trace = _parse(tpath, text, Trace, "trace")
            if trace.episode_id != episode_id:
                raise ReportInputError(
                    f"{tpath}: episode_id {trace.episode_id!r} does not match the file name")
        grade: EpisodeGrade | None = None
        if gpath is not None:
            grade = read_model(gpath, EpisodeGrade, "episode grade")
            if grade.episode_id != episode_id:
                raise ReportInputError(
                    f"{gpath}: episode_id {grade.episode_id!r} does not match the file name")
        if key is None:
            warnings.append(f"{run_dir}: episode {episode_id} is not in the manifest's plan; included")
        if (
            trace is not None
            and grade is not None
            and grade.trace_sha256 != _text_sha256(text)
            and grade.trace_sha256 != trace.sha256()  # the file may be valid but not canonical
        ):
            warnings.append(
                f"{gpath}: graded from a different version of its trace (trace_sha256 mismatch); "
                "regrade the run"
            )
        if grade is not None and trace is None:
            warnings.append(f"{run_dir}: episode {episode_id} has a grade but no trace; trace not shown")
        rec = _record(manifest.run_id, episode_id, key, trace, grade)
        by_id[episode_id] = rec
        ledger.add(rec.candidate, trace, grade)
        if trace is not None:
            faults.add_trace(trace)
            facts.add(trace)
        if grade is not None:
            faults.add_grade(grade)
    records = list(by_id.values())
    return RunData(run_dir, manifest, grade_set, records, ledger.result(), faults.result(), facts,
                   warnings, trace_files, grade_files)


def _record(
    run_id: str, episode_id: str, key: EpisodeKey | None, trace: Trace | None, grade: EpisodeGrade | None
) -> EpisodeRecord:
    """One record; the plan's candidate label wins, then the grade's, then the trace's spec."""
    candidate = key.candidate if key else grade.candidate if grade else trace.candidate.spec if trace else ""
    src: Trace | EpisodeGrade | EpisodeKey | None = trace or grade or key
    assert src is not None
    where: dict[str, object] = {
        "agent_id": src.agent_id,
        "scenario_id": src.scenario_id,
        "repeat": src.repeat,
        "language": getattr(src, "language", ""),
        "difficulty": getattr(src, "difficulty", ""),
    }
    reason: str | None = None
    if trace is None and grade is None:
        status = "not_run"
    elif (trace is not None and trace.skipped) or (grade is not None and grade.skipped):
        status = "skipped"
        reason = (trace.skip_reason if trace else None) or (grade.skip_reason if grade else None)
    elif grade is None or grade.not_graded:
        status = "ungraded"  # a not-graded episode (judge outage) is excluded like an ungraded one
    else:
        status = "scored"
    return EpisodeRecord.model_validate(
        {
            "run_id": run_id,
            "episode_id": episode_id,
            "candidate": candidate,
            **where,
            "status": status,
            "skip_reason": reason,
            "end_reason": trace.end_reason.value if trace is not None else None,
            "not_graded_reason": grade.not_graded_reason if grade is not None else None,
            "tool_calls": len(trace.tool_events) if trace is not None else 0,
            "grade": grade if status == "scored" else None,
            # Judge usage lives in the grade (task_judge, conversation_judge); the other roles' in the trace.
            "usage": {
                **(trace.usage if trace is not None else {}),
                **(grade.usage if grade is not None else {}),
            },
        }
    )


def load_runs(run_dirs: list[Path], grade_set_id: str | None = None) -> list[RunData]:
    """Load several runs. A candidate label that occurs in more than one run is made distinct as
    ``"<candidate> [<run_id>]"`` so episodes of different runs are never pooled silently.
    Raises :class:`ReportInputError` for any unreadable run or a run id given twice."""
    runs = [load_run(d, grade_set_id) for d in run_dirs]
    seen: dict[str, Path] = {}
    for run in runs:
        if run.manifest.run_id in seen:
            raise ReportInputError(
                f"{run.run_dir}: run {run.manifest.run_id!r} is also given as {seen[run.manifest.run_id]}"
            )
        seen[run.manifest.run_id] = run.run_dir
    if len(runs) > 1:
        owners: dict[str, set[str]] = {}
        for run in runs:
            for r in run.records:
                owners.setdefault(r.candidate, set()).add(run.manifest.run_id)
        for run in runs:
            for r in run.records:
                if len(owners[r.candidate]) > 1:
                    r.candidate = f"{r.candidate} [{run.manifest.run_id}]"
            run.ledger.by_candidate = {
                (f"{c} [{run.manifest.run_id}]" if len(owners.get(c, ())) > 1 else c): led
                for c, led in run.ledger.by_candidate.items()
            }
    return runs
