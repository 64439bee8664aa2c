"""The simulator and channel ledger of a run: what the caller simulator, the
channel and the judges did wrong or left undone, counted over the run's traces and the reported
grade set, so faults that never reach a score are still visible in aggregate.

Counted from each trace (``callbench/trace``):

- caller rejections by reason: every entry of ``CallerTurn.rejections`` (a caller reply the
  harness refused: bad JSON, a plan step out of order, a leaked field name ...), grouped by its
  reason code, the text before the first ``:`` (``invalid_json``, ``step_out_of_order``,
  ``leak`` ...), plus those of conversations a rerun discarded (``Trace.rerun_rejections``; also
  counted apart as ``caller_rejections_in_reruns``). Traces written before that field existed
  hold only their kept conversation's rejections.
- conversation reruns: ``Trace.reruns`` summed (conversations restarted after the caller failed
  validation on every attempt at a turn), and the number of episodes with any.
- skipped episodes by reason: the reason code of ``Trace.skip_reason`` (``caller_validation``,
  ``infrastructure`` ...); the full reasons are listed in the report's skipped table.
- channel events: authored ASR and VAD events applied, not applied (the span or anchor was not
  in what the caller said, or the turn was already split), never reached (their turn never came:
  ``Trace.unreached_channel_events``); seeded noise applied and not applied (no eligible word).
- judge errors: items labelled ``judge_error`` in the reported grade set, by item source.
- caller ended early: episodes whose caller said it was done while plan steps were still open
  (``EndReason.CALLER_DONE_EARLY``). Such a call is scored as the candidate's, like any call a
  real caller ends (its unmet items count against the candidate); the count shows, per candidate,
  how often the simulator rather than the candidate may have cut the call short.

A run's ledger is also split per candidate (the candidate's replies change how far a call goes,
hence which channel events are reached); the report shows the split when candidates differ.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from callbench.grade.models import EpisodeGrade, Label
from callbench.trace import EndReason

if TYPE_CHECKING:
    from callbench.report.model.episode_read import TraceSummary


class ChannelLedger(BaseModel):
    """Channel events counted over traces (see the module docstring). ``applied`` and
    ``not_applied`` count authored and seeded events together; ``never_reached`` is authored only
    (seeded noise has no target turn)."""

    applied: int = 0
    not_applied: int = 0
    never_reached: int = 0
    authored_applied: int = 0
    authored_not_applied: int = 0
    seeded_applied: int = 0
    seeded_not_applied: int = 0


class SimulatorLedger(BaseModel):
    """Counts over the episodes of one run, or of one candidate in it (module docstring)."""

    episodes: int = 0  # traces read
    caller_turns: int = 0
    caller_rejections: dict[str, int] = Field(default_factory=dict)  # reason code -> count
    caller_turns_with_rejections: int = 0  # in the kept conversations
    caller_rejections_in_reruns: int = 0  # of the rejections, those in discarded conversations
    conversation_reruns: int = 0
    episodes_rerun: int = 0
    caller_done_early: int = 0  # episodes the caller ended before its plan's last step
    skipped: dict[str, int] = Field(default_factory=dict)  # reason code -> episodes
    channel: ChannelLedger = Field(default_factory=ChannelLedger)
    judge_errors: int = 0
    judge_errors_by_source: dict[str, int] = Field(default_factory=dict)
    episodes_with_judge_errors: int = 0

    @property
    def n_rejections(self) -> int:
        return sum(self.caller_rejections.values())

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())


class RunLedger(SimulatorLedger):
    """A run's ledger (``runs[].simulator`` in the JSON report) with its per-candidate split."""

    by_candidate: dict[str, SimulatorLedger] = Field(default_factory=dict)
    candidates_differ: bool = False  # True when the per-candidate ledgers are not all equal


def reason_code(text: str) -> str:
    """The reason code of a rejection or skip reason: the text before the first ``:``, trimmed
    (``"invalid_json: the reply is empty"`` -> ``"invalid_json"``); ``"unspecified"`` if empty."""
    return text.split(":", 1)[0].strip() or "unspecified"


_CHANNEL = ("applied", "not_applied", "seeded_applied", "seeded_not_applied", "authored_applied",
            "authored_not_applied")


class _Tally:
    """One :class:`SimulatorLedger` being counted in plain Python (a pydantic model per update
    costs more than the reading of the episode it counts)."""

    _INTS = ("episodes", "caller_turns", "caller_turns_with_rejections", "caller_rejections_in_reruns",
             "conversation_reruns", "episodes_rerun", "caller_done_early", "judge_errors",
             "episodes_with_judge_errors")

    def __init__(self) -> None:
        self.ints: Counter[str] = Counter(dict.fromkeys(self._INTS, 0))
        self.channel: Counter[str] = Counter(dict.fromkeys((*_CHANNEL, "never_reached"), 0))
        self.rejections: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.judge_errors_by_source: Counter[str] = Counter()

    def add(self, trace: TraceSummary | None, grade: EpisodeGrade | None) -> None:
        ints = self.ints
        if trace is not None:
            ints["episodes"] += 1
            ints["caller_turns"] += trace.caller_turns
            ints["caller_turns_with_rejections"] += trace.caller_turns_with_rejections
            self.rejections.update(trace.rejection_codes)
            for key in _CHANNEL:
                self.channel[key] += trace.channel[key]
            self.channel["never_reached"] += trace.never_reached
            ints["caller_rejections_in_reruns"] += trace.rerun_rejections
            ints["conversation_reruns"] += trace.reruns
            ints["episodes_rerun"] += trace.reruns > 0
            ints["caller_done_early"] += trace.end_reason == EndReason.CALLER_DONE_EARLY
        if trace is not None and trace.skipped:
            self.skipped[reason_code(trace.skip_reason or "")] += 1
        elif grade is not None and grade.skipped:
            self.skipped[reason_code(grade.skip_reason or "")] += 1
        if grade is not None and not grade.skipped:
            self.judge_errors_by_source.update(i.source for i in grade.items if i.label == Label.JUDGE_ERROR)
            ints["judge_errors"] += grade.judge_errors
            ints["episodes_with_judge_errors"] += grade.judge_errors > 0

    def ledger(self) -> SimulatorLedger:
        return SimulatorLedger(
            **dict(self.ints),
            caller_rejections=dict(sorted(self.rejections.items())),
            skipped=dict(sorted(self.skipped.items())),
            channel=ChannelLedger(**dict(self.channel)),
            judge_errors_by_source=dict(sorted(self.judge_errors_by_source.items())),
        )


class LedgerCounter:
    """Counts a run's ledger one episode at a time (``report/model/load.py`` feeds it while it reads
    each trace once, so no trace is kept): :meth:`add` per episode, :meth:`result` at the end."""

    def __init__(self) -> None:
        self.total = _Tally()
        self.per: dict[str, _Tally] = {}

    def add(self, candidate: str, trace: TraceSummary | None, grade: EpisodeGrade | None) -> None:
        """Count one episode (its trace's summary and its grade in the chosen grade set, either
        may be None) for the total and for ``candidate`` (the plan's label)."""
        if trace is None and grade is None:
            return
        self.total.add(trace, grade)
        self.per.setdefault(candidate, _Tally()).add(trace, grade)

    def result(self) -> RunLedger:
        """The counted ledger, per candidate too (``candidates_differ`` set)."""
        per = {c: t.ledger() for c, t in sorted(self.per.items())}
        total = RunLedger(**self.total.ledger().model_dump(), by_candidate=per)
        total.candidates_differ = len({ledger.model_dump_json() for ledger in per.values()}) > 1
        return total


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) if d else "none"


LEDGER_COLUMNS = (
    "episodes", "caller turns", "caller rejections (by reason)", "reruns", "caller ended early",
    "skipped (by reason)",
    "channel authored: applied / not applied / never reached", "seeded noise: applied / not",
    "judge errors",
)  # fmt: skip


def ledger_cells(led: SimulatorLedger) -> list[str]:
    """One row of :data:`LEDGER_COLUMNS` for ``led`` (plain text, not markup-escaped)."""
    c = led.channel
    rej = f"{led.n_rejections}" + (f" ({_counts(led.caller_rejections)})" if led.caller_rejections else "")
    skipped = f"{led.n_skipped}" + (f" ({_counts(led.skipped)})" if led.skipped else "")
    judge = f"{led.judge_errors}" + (
        f" ({_counts(led.judge_errors_by_source)})" if led.judge_errors_by_source else ""
    )
    return [
        str(led.episodes),
        str(led.caller_turns),
        rej,
        f"{led.conversation_reruns} in {led.episodes_rerun} episode(s)",
        str(led.caller_done_early),
        skipped,
        f"{c.authored_applied} / {c.authored_not_applied} / {c.never_reached}",
        f"{c.seeded_applied} / {c.seeded_not_applied}",
        judge,
    ]


def ledger_rows(run_id: str, led: RunLedger) -> list[tuple[str, list[str]]]:
    """``(label, cells)`` rows for a run: the total, then each candidate when candidates differ."""
    rows = [(f"{run_id} (all)", ledger_cells(led))]
    if led.candidates_differ:
        rows += [(f"  {cand}", ledger_cells(sub)) for cand, sub in led.by_candidate.items()]
    return rows
