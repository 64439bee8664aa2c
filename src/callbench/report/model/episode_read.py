"""Reading one episode of a run folder for the report: its trace, its grade in the chosen grade set
and its fault ledger, turned into what the report keeps.

:func:`read_episodes` is the per-episode half of :func:`callbench.report.model.load.load_run`, made to
run in a worker process (:mod:`callbench.report.model.workers`): it takes plain paths and ids and
returns small picklable results, never whole traces. Each :class:`EpisodeRead` holds a
:class:`TraceSummary` (the trace fields the episode's record and the run's ledgers need, as plain
values), the grade file's text, the fault ledger file's bytes and any warnings. The parent
validates the grade (``EpisodeRead.grade``: pydantic validates a 6 KB grade in about 0.16 ms,
while pickling the validated model there and back costs about 0.5 ms), builds the record and
does the counting, in input order, so the result does not depend on how the work was split.

Every problem with an input file raises :class:`ReportInputError` whose message names the file
and says what is wrong (and, for a damaged per-episode file, how to recover).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from callbench.grade.models import EpisodeGrade
from callbench.models.faults import FaultLedger
from callbench.report.model.voice_tally import voice_tally
from callbench.runfolder import episode_files
from callbench.runfolder.manifest import FAULTS, EpisodeKey
from callbench.stats.latency import CallTimings
from callbench.stats.summary import EpisodeRecord
from callbench.trace import EndReason, RoleInfo, Trace

M = TypeVar("M", bound=BaseModel)


class ReportInputError(Exception):
    """An unreadable or inconsistent report input; the message names the file."""


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


def read_text(path: Path, what: str) -> str:
    """The text of a run-folder file (gzip or plain, :func:`callbench.runfolder.episode_files.read_text`);
    raises :class:`ReportInputError` naming ``path`` and ``what`` it is when missing or unreadable."""
    try:
        return episode_files.read_text(path)
    except FileNotFoundError:
        raise ReportInputError(f"{path}: missing ({what})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportInputError(f"{path}: cannot read {what}: {e}{_RECOVER.get(what, '')}") from None


def parse(path: Path, text: str, model: type[M], what: str) -> M:
    """``text`` (read from ``path``) as ``model``; raises :class:`ReportInputError` naming the
    file: JSON syntax errors with line and column, else the model's first field errors."""
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
    return parse(path, read_text(path, what), model, what)


def text_sha256(text: str) -> str:
    """Hash of a trace file's text. ``save_trace`` writes exactly ``canonical_json() + "\\n"``, so
    for files it wrote without timings this equals ``Trace.sha256()`` (the content hash) without
    re-serialising the trace; with timings the run index's record of the file gives the content
    hash (:func:`trace_matches`)."""
    return hashlib.sha256(text.removesuffix("\n").encode()).hexdigest()


def trace_matches(graded_sha256: str, text: str, trace: Trace, indexed: tuple[str, str] | None) -> bool:
    """Whether a grade that records ``graded_sha256`` (``Trace.sha256()`` of the trace it graded)
    was made from ``trace``, read from a file whose text is ``text``. ``indexed``: the run index's
    (file text hash, content hash) of that file (None: not recorded).

    Cheapest first: the text's own hash (a trace without timings, whose file text is its content);
    then, when the text still has the hash the index recorded for it, the index's content hash;
    only otherwise (a file edited or copied in after indexing, no index, an index from before
    content hashes were kept, a valid but not canonical file) the parsed trace is serialised and
    hashed again."""
    sha = text_sha256(text)
    if graded_sha256 == sha:
        return True
    if indexed is not None and indexed[0] == sha:
        return graded_sha256 == indexed[1]
    return graded_sha256 == trace.sha256()


def _reason_code(text: str) -> str:
    return text.split(":", 1)[0].strip() or "unspecified"


_CHANNEL = ("applied", "not_applied", "seeded_applied", "seeded_not_applied", "authored_applied",
            "authored_not_applied")


@dataclass
class TraceSummary:
    """What the report keeps of a trace: the fields of the episode's record and those the run's
    simulator ledger, fault ledger and fairness facts count (``report/model/ledger.py``,
    ``report/model/faults.py``, :class:`callbench.report.model.load.TraceFacts`), with the per-turn lists
    already counted; plain values only (cheap to pickle). Built by :meth:`of`."""

    episode_id: str
    agent_id: str
    scenario_id: str
    repeat: int
    language: str
    difficulty: str
    end_reason: EndReason
    skip_reason: str | None
    candidate_spec: str
    caller_key: str  # the caller role's JSON (RoleInfo; distinct roles are told apart by it)
    candidate_key: str  # the candidate role's JSON
    caller_prompt_sha256: str
    tool_calls: int = 0  # tool events
    usage: dict[str, dict[str, object]] = field(default_factory=dict)  # role -> Usage as JSON
    caller_turns: int = 0
    caller_turns_with_rejections: int = 0
    rejection_codes: list[str] = field(default_factory=list)  # reason codes: turns, then reruns
    rerun_rejections: int = 0
    reruns: int = 0
    channel: dict[str, int] = field(default_factory=dict)  # ChannelLedger field -> count
    never_reached: int = 0
    empty_replies: int = 0  # assistant messages with an ``empty_reply`` error
    tool_calls_in_content: int = 0  # assistant messages with a ``tool_call_in_content`` error
    invalid_tool_calls: int = 0  # tool events whose arguments broke the tool's schema (either mode)
    voice: dict[str, Any] | None = None  # the voice channel's tally (report/model/voice.py; None: text)
    timings: dict[str, object] | None = None  # stats.latency.CallTimings as JSON (None: no timings)
    persona: str | None = None  # the persona library id of a persona sweep

    @property
    def skipped(self) -> bool:
        return self.end_reason == EndReason.SKIPPED

    @property
    def caller(self) -> RoleInfo:
        return RoleInfo.model_validate_json(self.caller_key)

    @property
    def candidate(self) -> RoleInfo:
        return RoleInfo.model_validate_json(self.candidate_key)

    @classmethod
    def of(cls, trace: Trace) -> TraceSummary:
        """Count ``trace`` (every caller turn's rejections and channel events, the reruns'
        rejections, unreached events, the candidate's protocol errors)."""
        channel = dict.fromkeys(_CHANNEL, 0)
        codes: list[str] = []
        with_rejections = 0
        for turn in trace.caller_turns:
            codes.extend(_reason_code(r) for r in turn.rejections)
            with_rejections += bool(turn.rejections)
            for ev in turn.channel_events:
                side = "seeded" if ev.source == "seeded" else "authored"
                state = "applied" if ev.applied else "not_applied"
                channel[state] += 1
                channel[f"{side}_{state}"] += 1
        codes.extend(_reason_code(r) for r in trace.rerun_rejections)
        errors = [m.error or "" for m in trace.messages if m.role == "assistant" and m.error]
        return cls(
            episode_id=trace.episode_id,
            agent_id=trace.agent_id,
            scenario_id=trace.scenario_id,
            repeat=trace.repeat,
            language=trace.language,
            difficulty=trace.difficulty,
            end_reason=trace.end_reason,
            skip_reason=trace.skip_reason,
            candidate_spec=trace.candidate.spec,
            caller_key=trace.caller.model_dump_json(),
            candidate_key=trace.candidate.model_dump_json(),
            caller_prompt_sha256=hashlib.sha256(trace.caller_view.system_prompt.encode()).hexdigest(),
            tool_calls=len(trace.tool_events),
            usage={role: u.model_dump(mode="json") for role, u in trace.usage.items()},
            caller_turns=len(trace.caller_turns),
            caller_turns_with_rejections=with_rejections,
            rejection_codes=codes,
            rerun_rejections=len(trace.rerun_rejections),
            reruns=trace.reruns,
            channel=channel,
            never_reached=len(trace.unreached_channel_events),
            empty_replies=sum(e.startswith("empty_reply") for e in errors),
            tool_calls_in_content=sum(e.startswith("tool_call_in_content") for e in errors),
            invalid_tool_calls=sum(bool(e.schema_errors) for e in trace.tool_events),
            voice=voice_tally(trace),
            timings=None if trace.latency is None else CallTimings.of(trace.latency).model_dump(mode="json"),
            persona=trace.persona,
        )


class CallWriter(Protocol):
    """Writes one episode's call file of a folder report from what was just read (the record
    without its grade, the trace and grade, either may be None), as call number ``n`` into the
    folder ``calls_dir``; ``sent``: the shared texts the worker's chunk already sent (updated);
    ``chunk_start``: the first call of the chunk; ``run_dir``: the episode's run folder (where the
    call's recorded media, such as the voice channel's audio, is found). Returns what the parent
    hands on, in call order, to the one that asked for the call files
    (:class:`callbench.report.model.load.CallFiles`).
    The HTML report supplies it; this layer only carries it to the worker and back, so it reads
    episodes without knowing any view. It must be a module-level function, or a
    ``functools.partial`` of one fixing its other options: a spawned worker unpickles it by name."""

    def __call__(
        self, record: EpisodeRecord, trace: Trace | None, grade: EpisodeGrade | None, n: int,
        calls_dir: str, sent: set[str], *, chunk_start: bool, run_dir: str,
    ) -> object: ...


@dataclass
class CallSpec:
    """Write the episode's call file of a folder report while it is read (one reading of the trace
    for both): call number ``n``, the run id and plan key its record is built from, the folder, and
    the writer (:class:`CallWriter`)."""

    n: int
    run_id: str
    key: EpisodeKey | None
    calls_dir: str
    write: CallWriter


@dataclass
class EpisodeJob:
    """One episode to read, as a worker gets it: plain strings only (cheap to pickle): the run
    folder, the episode id, its trace and grade files (either may be None) and where its fault
    ledger would be."""

    run_dir: str
    episode_id: str
    trace_path: str | None
    grade_path: str | None
    ledger_path: str
    call: CallSpec | None = None  # also write the episode's folder-report call file
    grade_sha256: str | None = None  # the grade file's hash the run index recorded (None: unknown)
    trace_hashes: tuple[str, str] | None = None  # the index's (file text, content) hashes of the trace

    @classmethod
    def of(
        cls, run_dir: Path, episode_id: str, trace_path: Path | None, grade_path: Path | None
    ) -> EpisodeJob:
        return cls(str(run_dir), episode_id, None if trace_path is None else str(trace_path),
                   None if grade_path is None else str(grade_path),
                   str(run_dir / FAULTS / f"{episode_id}.json"))


class _GradeHead(BaseModel):
    """The two fields of an episode grade a worker checks against its trace."""

    episode_id: str
    trace_sha256: str


@dataclass
class EpisodeRead:
    """One episode as a worker sends it back (module docstring): the trace's summary, the grade
    file's text (the parent validates it: a grade is cheaper to validate than to pickle), the saved
    fault ledger's bytes, and warnings."""

    trace: TraceSummary | None
    grade_text: str | None
    fault_ledger: bytes | None
    warnings: list[str] = field(default_factory=list)
    call: object = None  # what ``EpisodeJob.call``'s writer returned for the call file it wrote

    def grade(self, job: EpisodeJob) -> EpisodeGrade | None:
        """The grade of ``job`` (the job this was read for), validated; raises
        :class:`ReportInputError` naming the file."""
        if job.grade_path is None or self.grade_text is None:
            return None
        return parse(Path(job.grade_path), self.grade_text, EpisodeGrade, "episode grade")

    def ledger(self) -> FaultLedger | None:
        """The saved fault ledger, or None (none saved, as in runs before fault ledgers, or unreadable)."""
        if self.fault_ledger is None:
            return None
        try:
            return FaultLedger.model_validate_json(self.fault_ledger)
        except ValueError:
            return None


def read_episode(job: EpisodeJob, sent: set[str] | None = None, *, chunk_start: bool = True) -> EpisodeRead:
    """Read one episode's trace (validated), grade text (its id and trace hash checked) and fault
    ledger bytes (module docstring), and with ``job.call`` write its folder-report call file
    (:class:`CallWriter`; ``sent``: the shared texts this chunk sent).
    Raises :class:`ReportInputError` naming the file when one is unreadable, invalid, or holds
    another episode's id, ``OSError`` when the call file cannot be written."""
    trace: Trace | None = None
    text = ""
    warnings: list[str] = []
    tpath = None if job.trace_path is None else Path(job.trace_path)
    gpath = None if job.grade_path is None else Path(job.grade_path)
    if tpath is not None:
        text = read_text(tpath, "trace")
        trace = parse(tpath, text, Trace, "trace")
        if trace.episode_id != job.episode_id:
            raise ReportInputError(f"{tpath}: episode_id {trace.episode_id!r} does not match the file name")
    grade_text: str | None = None
    if gpath is not None:
        grade_text = read_text(gpath, "episode grade")
        try:
            head = _GradeHead.model_validate_json(grade_text)
        except ValidationError:
            parse(gpath, grade_text, EpisodeGrade, "episode grade")  # raises the located error
            raise  # not reached: a valid grade has both fields
        if head.episode_id != job.episode_id:
            raise ReportInputError(f"{gpath}: episode_id {head.episode_id!r} does not match the file name")
        if job.grade_sha256 is not None and text_sha256(grade_text) != job.grade_sha256:
            warnings.append(
                f"{gpath}: changed after grading (its content no longer matches the hash the run index "
                "recorded); its scores are shown as the file now says; regrade the run"
            )
        if trace is not None and not trace_matches(head.trace_sha256, text, trace, job.trace_hashes):
            warnings.append(
                f"{gpath}: graded from a different version of its trace (trace_sha256 mismatch); regrade "
                "the run"
            )
        elif trace is None:
            warnings.append(
                f"{job.run_dir}: episode {job.episode_id} has a grade but no trace; trace not shown")
    ledger: bytes | None = None
    if trace is not None:
        with contextlib.suppress(OSError):
            ledger = Path(job.ledger_path).read_bytes()
    summary = TraceSummary.of(trace) if trace is not None else None
    call: object = None
    if job.call is not None:
        spec = job.call
        grade = parse(gpath, grade_text, EpisodeGrade, "episode grade") if gpath and grade_text else None
        record = episode_record(spec.run_id, job.episode_id, spec.key, summary, grade)
        call = spec.write(record.model_copy(update={"grade": None}), trace, grade, spec.n, spec.calls_dir,
                          set() if sent is None else sent, chunk_start=chunk_start, run_dir=job.run_dir)
    return EpisodeRead(summary, grade_text, ledger, warnings, call)


def read_episodes(jobs: list[EpisodeJob]) -> list[EpisodeRead]:
    """:func:`read_episode` of each job, in order (the unit of work of a report worker)."""
    sent: set[str] = set()
    out: list[EpisodeRead] = []
    first_call = True
    for job in jobs:
        out.append(read_episode(job, sent, chunk_start=first_call))
        first_call = first_call and job.call is None
    return out


def episode_record(
    run_id: str, episode_id: str, key: EpisodeKey | None, trace: TraceSummary | None,
    grade: EpisodeGrade | None,
) -> EpisodeRecord:
    """One record; the plan's candidate label wins, then the grade's, then the trace's spec."""
    candidate = key.candidate if key else grade.candidate if grade else trace.candidate_spec if trace else ""
    src: TraceSummary | EpisodeGrade | EpisodeKey | None = trace or grade or key
    assert src is not None
    where: dict[str, object] = {
        "agent_id": src.agent_id,
        "scenario_id": src.scenario_id,
        "repeat": src.repeat,
        "language": getattr(src, "language", ""),
        "difficulty": getattr(src, "difficulty", ""),
        "persona": (key.persona if key is not None else None)
        or (trace.persona if trace is not None else None) or "",
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
            "tool_calls": trace.tool_calls if trace is not None else 0,
            "timings": trace.timings if trace is not None else None,
            "grade": grade if status == "scored" else None,
            # Judge usage lives in the grade (task_judge, conversation_judge); the other roles' in the trace.
            "usage": {
                **(trace.usage if trace is not None else {}),
                **(grade.usage if grade is not None else {}),
            },
        }
    )
