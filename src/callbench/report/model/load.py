"""Load run folders (``runfolder/manifest.py`` layout) into typed records for the report, streaming.

Reads ``RUN_DIR/manifest.json`` (:class:`RunManifest`), each trace file
(``RUN_DIR/traces/<episode_id>.json.gz``, or ``.json`` in older runs; :class:`Trace`) and the chosen
grade set ``RUN_DIR/grades/<id>/grade_set.json`` (:class:`GradeSetManifest`) with its episode
grades (:class:`EpisodeGrade`). The default grade set is the last one listed in
``manifest.grade_sets`` (the latest regrade). File names and formats:
:mod:`callbench.runfolder.episode_files`.

Each trace is read once and dropped: what the report needs from it is kept as
the episode's :class:`EpisodeRecord` and counted into the run's simulator ledger, fault ledger and
:class:`TraceFacts` as it goes, so memory holds per-episode summaries, not traces. Reading an
episode (:mod:`callbench.report.model.episode_read`) runs in worker processes when a run is large
(:mod:`callbench.report.model.workers`); the counting stays here, in plan order, so the report is the
same however the reading was split. The HTML trace viewer reads traces again one at a time
through :meth:`RunData.iter_episodes`.

Every problem with an input file raises :class:`ReportInputError` whose message names the file
and says what is wrong; the CLI prints it and exits 2. Inconsistencies that still allow an honest
report (a grade computed from an older trace, a trace not in the plan) become warnings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callbench.grade.models import EpisodeGrade, GradeSetManifest
from callbench.report.model.episode_read import (
    CallSpec,
    CallWriter,
    EpisodeJob,
    ReportInputError,
    TraceSummary,
    episode_record,
    parse,
    read_episodes,
    read_model,
    read_text,
)
from callbench.report.model.faults import FaultCounter, RunFaults
from callbench.report.model.ledger import LedgerCounter, RunLedger
from callbench.report.model.workers import map_ordered
from callbench.runfolder import episode_files
from callbench.runfolder.index import recorded_grade_hashes, recorded_trace_hashes
from callbench.runfolder.manifest import MANIFEST, RunManifest, grades_dir, traces_dir
from callbench.stats.summary import EpisodeRecord
from callbench.trace import RoleInfo, Trace

__all__ = ["CallFiles", "CallsRequest", "ReportInputError", "RunData", "TraceFacts", "load_run", "load_runs",
           "read_model"]

_record = episode_record  # the name benchmarks/html_bench.py uses


@dataclass
class TraceFacts:
    """What the fairness checks need from a run's traces: the distinct caller and candidate
    roles the traces record (by their JSON) and, per (agent, scenario), the SHA-256 of each
    distinct caller system prompt."""

    callers: list[RoleInfo] = field(default_factory=list)
    candidates: list[RoleInfo] = field(default_factory=list)
    caller_prompts: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)

    def add(self, trace: TraceSummary) -> None:
        for kind, role_key, into in (("caller", trace.caller_key, self.callers),
                                     ("candidate", trace.candidate_key, self.candidates)):
            if kind + role_key not in self._seen:
                self._seen.add(kind + role_key)
                into.append(RoleInfo.model_validate_json(role_key))
        self.caller_prompts.setdefault((trace.agent_id, trace.scenario_id), set()).add(
            trace.caller_prompt_sha256)


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
    voice: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Episode id -> the voice channel's tally of its trace
    (:func:`~callbench.report.model.voice_tally.voice_tally`); only episodes spoken through the
    voice channel."""

    def iter_episodes(self) -> Iterator[tuple[EpisodeRecord, Trace | None, EpisodeGrade | None]]:
        """``(record, trace, grade)`` of every record that has a trace or a grade, in record
        order, each read from its file when reached and not kept (for the HTML viewer). Raises
        :class:`ReportInputError` naming the file when a file changed into an unreadable one since
        :func:`load_run`."""
        for rec in self.records:
            tpath, gpath = self.trace_files.get(rec.episode_id), self.grade_files.get(rec.episode_id)
            if tpath is None and gpath is None:
                continue
            trace = parse(tpath, read_text(tpath, "trace"), Trace, "trace") if tpath else None
            grade = read_model(gpath, EpisodeGrade, "episode grade") if gpath else None
            yield rec, trace, grade


@dataclass
class CallFiles:
    """Where and how :func:`load_run` writes a folder report's call files while it reads the
    episodes: the folder ``calls_dir``, the ``write`` function its workers call for each episode
    with a trace or a grade (:class:`~callbench.report.model.episode_read.CallWriter`), and
    ``take``, given each call's result of ``write`` in call order (in this process). The HTML
    report makes it (:meth:`callbench.report.html.folder.FolderBuild.while_reading`)."""

    calls_dir: Path
    write: CallWriter
    take: Callable[[Any], None]  # takes what ``write`` returns (opaque to the loader)


CallsRequest = Callable[[int], "CallFiles | None"]
"""Asked by :func:`load_run` with the run's number of calls once its files are listed: the
:class:`CallFiles` to write each call's file while the episodes are read, or None for no call
files."""


def load_run(
    run_dir: Path, grade_set_id: str | None = None, *, workers: int | None = None,
    calls: CallsRequest | None = None,
) -> RunData:
    """Load one run folder, reading each trace and grade file once (module docstring).
    ``grade_set_id`` picks a grade set (default: the manifest's last). Episodes are read in worker
    processes when there are many (:func:`callbench.report.model.workers.map_ordered`; ``workers``
    default :func:`~callbench.report.model.workers.default_workers`, 1 = this process only); the result
    is the same either way.

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
    ids = [*planned, *sorted((set(trace_files) | set(grade_files)) - set(planned))]
    jobs = [EpisodeJob.of(run_dir, i, trace_files.get(i), grade_files.get(i)) for i in ids]
    recorded = recorded_grade_hashes(run_dir, grade_set_id)  # an edited grade file is warned about
    indexed = recorded_trace_hashes(run_dir)  # a grade is matched to an unchanged trace from these
    for job in jobs:
        job.grade_sha256 = recorded.get(job.episode_id)
        job.trace_hashes = indexed.get(job.episode_id)
    shown = [j for j in jobs if j.trace_path is not None or j.grade_path is not None]
    wanted = calls(len(shown)) if calls is not None else None
    sink = None
    if wanted is not None:
        sink = wanted.take
        for n, job in enumerate(shown):
            job.call = CallSpec(n, manifest.run_id, planned.get(job.episode_id), str(wanted.calls_dir),
                                wanted.write)
    ledger = LedgerCounter()
    faults = FaultCounter(run_dir)
    facts = TraceFacts()
    records: list[EpisodeRecord] = []
    voice: dict[str, dict[str, Any]] = {}
    for job, read in zip(jobs, map_ordered(read_episodes, jobs, workers=workers), strict=True):
        key = planned.get(job.episode_id)
        if key is None:
            warnings.append(f"{run_dir}: episode {job.episode_id} is not in the manifest's plan; included")
        warnings.extend(read.warnings)
        if sink is not None and read.call is not None:
            sink(read.call)
        grade = read.grade(job)
        rec = episode_record(manifest.run_id, job.episode_id, key, read.trace, grade)
        records.append(rec)
        ledger.add(rec.candidate, read.trace, grade)
        if read.trace is not None:
            faults.add_trace(read.trace, read.ledger())
            facts.add(read.trace)
            if read.trace.voice is not None:
                voice[job.episode_id] = read.trace.voice
        if grade is not None:
            faults.add_grade(grade)
    return RunData(run_dir, manifest, grade_set, records, ledger.result(), faults.result(), facts,
                   warnings, trace_files, grade_files, voice)


def load_runs(
    run_dirs: list[Path], grade_set_id: str | None = None, *, workers: int | None = None,
    calls: CallsRequest | None = None,
) -> list[RunData]:
    """Load several runs. A candidate label that occurs in more than one run is made distinct as
    ``"<candidate> [<run_id>]"`` so episodes of different runs are never pooled silently.
    ``calls`` (:data:`CallsRequest`) is asked only when one run is given: with several, candidate
    labels may change after loading, so the calls are written afterwards.
    Raises :class:`ReportInputError` for any unreadable run or a run id given twice."""
    runs = [load_run(d, grade_set_id, workers=workers, calls=calls if len(run_dirs) == 1 else None)
            for d in run_dirs]
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
