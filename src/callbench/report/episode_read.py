"""Reading one episode of a run folder for the report: its trace, its grade in the chosen grade set
and its fault ledger, turned into what the report keeps (issue 27 item 1).

:func:`read_episodes` is the per-episode half of :func:`callbench.report.load.load_run`, made to
run in a worker process (:mod:`callbench.report.workers`): it takes plain paths and ids and
returns small picklable results, never whole traces. Each :class:`EpisodeRead` holds the
episode's :class:`EpisodeRecord`, a :class:`TraceSummary` of the trace fields the run's ledgers
count, the grade (the ledgers count it too; a scored record holds the same object), the saved
fault ledger and any warnings. The counting itself stays in the parent, in input order, so the
result does not depend on how the work was split.

Every problem with an input file raises :class:`ReportInputError` whose message names the file
and says what is wrong (and, for a damaged per-episode file, how to recover).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from callbench.grade.models import EpisodeGrade
from callbench.models.faults import FaultLedger
from callbench.runs import episode_files
from callbench.runs.manifest import FAULTS, EpisodeKey
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
    """The text of a run-folder file (gzip or plain, :func:`callbench.runs.episode_files.read_text`);
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
    for files it wrote this equals ``Trace.sha256()`` without re-serialising the trace."""
    return hashlib.sha256(text.removesuffix("\n").encode()).hexdigest()


def _reason_code(text: str) -> str:
    return text.split(":", 1)[0].strip() or "unspecified"


@dataclass
class TraceSummary:
    """The trace fields the run's simulator ledger, fault ledger and fairness facts count
    (``report/ledger.py``, ``report/faults.py``, :class:`callbench.report.load.TraceFacts`), with
    the per-turn lists already counted. Built by :meth:`of`."""

    episode_id: str
    agent_id: str
    scenario_id: str
    end_reason: EndReason
    skip_reason: str | None
    caller: RoleInfo
    candidate: RoleInfo
    caller_key: str  # the caller role's JSON (distinct roles are told apart by it)
    candidate_key: str
    caller_prompt_sha256: str
    caller_turns: int = 0
    caller_turns_with_rejections: int = 0
    rejection_codes: list[str] = field(default_factory=list)  # reason codes: turns, then reruns
    rerun_rejections: int = 0
    reruns: int = 0
    channel: dict[str, int] = field(default_factory=dict)  # ChannelLedger field -> count
    never_reached: int = 0
    empty_replies: int = 0  # assistant messages with an ``empty_reply`` error
    tool_calls_in_content: int = 0  # assistant messages with a ``tool_call_in_content`` error

    @property
    def skipped(self) -> bool:
        return self.end_reason == EndReason.SKIPPED

    @classmethod
    def of(cls, trace: Trace) -> TraceSummary:
        """Count ``trace`` (every caller turn's rejections and channel events, the reruns'
        rejections, unreached events, the candidate's protocol errors)."""
        channel = dict.fromkeys(("applied", "not_applied", "seeded_applied", "seeded_not_applied",
                                 "authored_applied", "authored_not_applied"), 0)
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
            end_reason=trace.end_reason,
            skip_reason=trace.skip_reason,
            caller=trace.caller,
            candidate=trace.candidate,
            caller_key=trace.caller.model_dump_json(),
            candidate_key=trace.candidate.model_dump_json(),
            caller_prompt_sha256=hashlib.sha256(trace.caller_view.system_prompt.encode()).hexdigest(),
            caller_turns=len(trace.caller_turns),
            caller_turns_with_rejections=with_rejections,
            rejection_codes=codes,
            rerun_rejections=len(trace.rerun_rejections),
            reruns=trace.reruns,
            channel=channel,
            never_reached=len(trace.unreached_channel_events),
            empty_replies=sum(e.startswith("empty_reply") for e in errors),
            tool_calls_in_content=sum(e.startswith("tool_call_in_content") for e in errors),
        )


@dataclass
class EpisodeJob:
    """One episode to read: ids, the plan's key (None for an episode not in the plan) and its
    files (either may be None)."""

    run_dir: Path
    run_id: str
    episode_id: str
    key: EpisodeKey | None
    trace_path: Path | None
    grade_path: Path | None


@dataclass
class EpisodeRead:
    """What the report keeps of one episode (module docstring)."""

    record: EpisodeRecord
    trace: TraceSummary | None
    grade: EpisodeGrade | None
    fault_ledger: FaultLedger | None
    warnings: list[str] = field(default_factory=list)


def _fault_ledger(run_dir: Path, episode_id: str) -> FaultLedger | None:
    path = run_dir / FAULTS / f"{episode_id}.json"
    try:
        return FaultLedger.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None  # runs before issue 16 have none; a damaged one counts as missing


def read_episode(job: EpisodeJob) -> EpisodeRead:
    """Read one episode's trace, grade and fault ledger (module docstring). Raises
    :class:`ReportInputError` naming the file when one is unreadable, invalid, or holds another
    episode's id."""
    trace: Trace | None = None
    text = ""
    warnings: list[str] = []
    if job.trace_path is not None:
        text = read_text(job.trace_path, "trace")
        trace = parse(job.trace_path, text, Trace, "trace")
        if trace.episode_id != job.episode_id:
            raise ReportInputError(
                f"{job.trace_path}: episode_id {trace.episode_id!r} does not match the file name")
    grade: EpisodeGrade | None = None
    if job.grade_path is not None:
        grade = read_model(job.grade_path, EpisodeGrade, "episode grade")
        if grade.episode_id != job.episode_id:
            raise ReportInputError(
                f"{job.grade_path}: episode_id {grade.episode_id!r} does not match the file name")
    if job.key is None:
        warnings.append(f"{job.run_dir}: episode {job.episode_id} is not in the manifest's plan; included")
    if (
        trace is not None
        and grade is not None
        and grade.trace_sha256 != text_sha256(text)
        and grade.trace_sha256 != trace.sha256()  # the file may be valid but not canonical
    ):
        warnings.append(
            f"{job.grade_path}: graded from a different version of its trace (trace_sha256 mismatch); "
            "regrade the run"
        )
    if grade is not None and trace is None:
        warnings.append(f"{job.run_dir}: episode {job.episode_id} has a grade but no trace; trace not shown")
    return EpisodeRead(
        record=episode_record(job.run_id, job.episode_id, job.key, trace, grade),
        trace=TraceSummary.of(trace) if trace is not None else None,
        grade=grade,
        fault_ledger=_fault_ledger(job.run_dir, job.episode_id) if trace is not None else None,
        warnings=warnings,
    )


def read_episodes(jobs: list[EpisodeJob]) -> list[EpisodeRead]:
    """:func:`read_episode` of each job, in order (the unit of work of a report worker)."""
    return [read_episode(job) for job in jobs]


def episode_record(
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
