"""The fault ledger of a run: what the providers and the machine did wrong, per
role, so a report says what went wrong and how often, and that none of it was charged to a
candidate.

Counted from each saved episode's fault ledger (``RUN_DIR/faults/<episode_id>.json``: candidate
and caller requests, retries and faults by kind, ``models/faults.py``), the preflights' ledgers
(``RUN_DIR/faults/preflight/*.json``), the judges' ledgers in the reported grade set's episode
grades, and:

- skipped episodes by reason category: ``infrastructure/<fault kind>`` when a provider fault
  skipped the episode (the kind from the ledger), else the reason code (``caller_validation`` ...);
- not-graded episodes by reason category (``judge_outage``: the judge's provider failed;
  ``judge_output``: its replies were unusable), excluded from every score;
- candidate ``empty_reply`` output errors: completions with no content and no tool calls twice in a
  row, recorded in the trace and graded as the candidate's;
- candidate ``tool_call_in_content`` output errors: tool calls a server returned as JSON text in
  ``content`` (``models/remote/content_calls.py``), recorded and graded the same way;
- notes per role (``RoleFaults.notes``): replies used as they were with something read in place of
  what they lacked (``usage_missing``: token counts read as 0), listed beside the fault kinds and
  marked ``(note)``, not counted as faults.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from callbench.models.faults import FaultLedger, RoleFaults
from callbench.runfolder.manifest import FAULTS
from callbench.runfolder.store import PREFLIGHT

if TYPE_CHECKING:
    from callbench.grade.models import EpisodeGrade
    from callbench.report.model.episode_read import TraceSummary

ROLE_ORDER = ("candidate", "caller", "task_judge", "conversation_judge")


class RunFaults(BaseModel):
    """``runs[].faults`` in the JSON report (see the module docstring)."""

    episodes: int = 0  # traces read
    episodes_with_ledger: int = 0  # traces with a saved fault ledger (older runs have none)
    roles: dict[str, RoleFaults] = Field(default_factory=dict)
    skipped: dict[str, int] = Field(default_factory=dict)  # reason category -> episodes
    not_graded: dict[str, int] = Field(default_factory=dict)  # reason category -> episodes
    empty_replies: int = 0  # candidate empty_reply output errors (graded)
    tool_calls_in_content: int = 0  # candidate tool_call_in_content output errors (graded)
    invalid_tool_calls: dict[str, int] = Field(default_factory=dict)  # candidate spec -> calls outside
    # their tool's schema (graded: rejected, or run under schema_errors: accept)

    @property
    def n_faults(self) -> int:
        return sum(n for r in self.roles.values() for n in r.faults.values())


def _category(text: str) -> str:
    return text.split(":", 1)[0].strip() or "unspecified"


class FaultCounter:
    """Counts a run's fault ledger one episode at a time (``report/model/load.py`` feeds it while it
    reads each trace and grade once): the preflights' ledgers at creation, :meth:`add_trace` per
    trace with its ``faults/<episode_id>.json`` (read by ``report/model/episode_read.py``),
    :meth:`add_grade` per episode grade of the chosen grade set, :meth:`result` at the end."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.out = RunFaults()
        self.roles: dict[str, RoleFaults] = {}
        self.skipped: Counter[str] = Counter()
        self.not_graded: Counter[str] = Counter()
        for path in sorted((self.run_dir / FAULTS / PREFLIGHT).glob("*.json")):
            try:  # the preflights' requests, retries and faults
                pre = FaultLedger.model_validate_json(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for role, counts in pre.roles.items():
                self.roles.setdefault(role, RoleFaults()).add(counts)

    def add_trace(self, trace: TraceSummary, ledger: FaultLedger | None) -> None:
        """Count one trace (its summary) and its saved fault ledger (None when the episode has
        none: runs older than fault ledgers, or an unreadable ledger file)."""
        out = self.out
        out.episodes += 1
        if ledger is not None:
            out.episodes_with_ledger += 1
            for role, counts in ledger.roles.items():
                self.roles.setdefault(role, RoleFaults()).add(counts)
        if trace.skipped:
            category = _category(trace.skip_reason or "")
            if category == "infrastructure" and ledger is not None and ledger.skip_kind:
                category = f"infrastructure/{ledger.skip_kind}"
            self.skipped[category] += 1
        out.empty_replies += trace.empty_replies
        out.tool_calls_in_content += trace.tool_calls_in_content
        if trace.invalid_tool_calls:
            spec = trace.candidate_spec
            out.invalid_tool_calls[spec] = out.invalid_tool_calls.get(spec, 0) + trace.invalid_tool_calls

    def add_grade(self, grade: EpisodeGrade) -> None:
        for role, counts in grade.faults.items():
            self.roles.setdefault(role, RoleFaults()).add(counts)
        if grade.not_graded:
            self.not_graded[_category(grade.not_graded_reason or "")] += 1

    def result(self) -> RunFaults:
        out = self.out.model_copy()
        order = {r: i for i, r in enumerate(ROLE_ORDER)}
        out.roles = dict(sorted(self.roles.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
        out.skipped = dict(sorted(self.skipped.items()))
        out.not_graded = dict(sorted(self.not_graded.items()))
        return out


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) if d else "none"


FAULT_COLUMNS = ("role", "requests", "retries", "faults", "faults by kind")
NOTE_MEANINGS = {
    "usage_missing": "replies used with token counts read as 0 (their tokens and cost are undercounted)",
}
"""What each note kind of :attr:`~callbench.models.faults.RoleFaults.notes` means, for the table's
footnote."""


def _kinds(c: RoleFaults) -> str:
    """Faults by kind, then notes by kind marked ``(note)`` (replies used as they were, with
    something read in place of what they lacked: not faults, not counted in ``faults``)."""
    parts = [f"{k} {v}" for k, v in sorted(c.faults.items())]
    parts += [f"{k} {v} (note)" for k, v in sorted(c.notes.items())]
    return ", ".join(parts) if parts else "none"


def fault_rows(run_id: str, f: RunFaults) -> list[list[str]]:
    """Rows of :data:`FAULT_COLUMNS` (after a run label) for one run: one per role (plain text);
    the last column lists the faults by kind and the notes by kind (``usage_missing 3 (note)``)."""
    return [[run_id, role, str(c.requests), str(c.retries), str(sum(c.faults.values())), _kinds(c)]
            for role, c in f.roles.items()]


def note_footnote(faults: list[RunFaults]) -> str:
    """One line saying what the notes in the table mean; empty when there are none."""
    kinds = sorted({k for f in faults for c in f.roles.values() for k in c.notes})
    if not kinds:
        return ""
    other = "a reply used with a value read in place of one it lacked"
    meanings = "; ".join(f"{k}: {NOTE_MEANINGS.get(k, other)}" for k in kinds)
    return f"(note) = not a fault, the reply was used: {meanings}."


def fault_summary(run_id: str, f: RunFaults) -> str:
    """One line: skipped and not-graded episodes by reason category, candidate empty replies (and
    tool calls returned as text, when there were any)."""
    as_text = (f"; candidate tool calls returned as text {f.tool_calls_in_content}"
               if f.tool_calls_in_content else "")
    if f.invalid_tool_calls:
        as_text += "; tool calls outside their schema " + ", ".join(
            f"{spec} {n}" for spec, n in sorted(f.invalid_tool_calls.items()))
    return (f"{run_id}: skipped {sum(f.skipped.values())} ({_counts(f.skipped)}); not graded "
            f"{sum(f.not_graded.values())} ({_counts(f.not_graded)}); candidate empty replies "
            f"{f.empty_replies}{as_text}; fault ledgers for {f.episodes_with_ledger} of {f.episodes} "
            "episode(s)")
