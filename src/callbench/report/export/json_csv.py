"""Machine-readable exports, written atomically (``callbench.trace.atomic_write_text``).

- ``--json PATH``: the whole :class:`~callbench.report.model.build.Report` (leaderboard with intervals,
  pillars, pass rates, splits, diagnostics, paired comparisons, skipped episodes, fairness flags,
  runs), readable back with :func:`read_json`.
- ``--csv PATH``: one row per planned episode (:data:`CSV_COLUMNS`): ids, status, skip reason,
  pillar and overall scores, pass, raw point totals per pillar and per diagnostic (so a reader can
  reweight), tokens and cost, the trace's end reason and why an episode was not graded, then the
  reported grade set of the episode's run, its judge-validation status (``validated``,
  ``not_validated``, ``failed``, ``human_labels``) and whether it is official. Floats
  are written with Python's shortest round-trip repr; empty cells mean undefined.
  :func:`read_csv` parses the rows back into typed values.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from callbench.bundle.models import Diagnostic
from callbench.report.model.build import Report
from callbench.report.model.validation import GradeSetInfo
from callbench.stats.summary import EpisodeRecord
from callbench.trace import atomic_write_text

_BASE = [
    ("run_id", str), ("episode_id", str), ("candidate", str), ("agent_id", str), ("scenario_id", str),
    ("language", str), ("difficulty", str), ("repeat", int), ("status", str), ("skip_reason", str),
    ("task_score", float), ("conversation_score", float), ("overall", float), ("passed", bool),
    ("cutoff", float), ("judge_errors", int), ("task_points", float), ("task_weight", float),
    ("conversation_points", float), ("conversation_weight", float),
]  # fmt: skip
_DIAG = [(f"{d.value}_{part}", float) for d in Diagnostic for part in ("points", "weight")]
_USAGE = [("input_tokens", int), ("output_tokens", int), ("cost_usd", float)]
_END: list[tuple[str, type]] = [("end_reason", str), ("not_graded_reason", str)]
_STATUS: list[tuple[str, type]] = [("grade_set_id", str), ("judge_validation", str), ("official", bool)]
_OUTCOME: list[tuple[str, type]] = [("outcome_met", bool), ("cut", bool), ("pass_rule", str),
                                    ("outcome_reason", str)]
CSV_TYPES: dict[str, type] = dict(_BASE + _DIAG + _USAGE + _END + _OUTCOME + _STATUS)
CSV_COLUMNS: list[str] = list(CSV_TYPES)


def write_json(report: Report, path: Path) -> None:
    """Write the report as indented JSON, atomically."""
    atomic_write_text(path, report.model_dump_json(indent=1) + "\n")


def read_json(path: Path) -> Report:
    """Read a report written by :func:`write_json`; raises ``ValueError`` naming the file."""
    try:
        return Report.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a callbench report JSON: {e}") from None


def episode_row(r: EpisodeRecord, grade_set: GradeSetInfo | None = None) -> dict[str, Any]:
    """The CSV row of one episode (typed values; None for undefined). ``grade_set`` is the
    report's view of the episode's run's grade set (:class:`~callbench.report.model.validation.GradeSetInfo`):
    its id, judge-validation status and whether it is official; None leaves those cells empty."""
    g = r.grade
    row: dict[str, Any] = {k: None for k in CSV_COLUMNS}
    if grade_set is not None:
        row.update(grade_set_id=grade_set.grade_set_id, judge_validation=grade_set.judge_validation.status,
                   official=grade_set.official)
    row.update(
        run_id=r.run_id, episode_id=r.episode_id, candidate=r.candidate, agent_id=r.agent_id,
        scenario_id=r.scenario_id, language=r.language, difficulty=r.difficulty, repeat=r.repeat,
        status=r.status, skip_reason=r.skip_reason, end_reason=r.end_reason,
        not_graded_reason=r.not_graded_reason,
    )  # fmt: skip
    if g is not None:
        row.update(
            task_score=g.task_score, conversation_score=g.conversation_score, overall=g.overall,
            passed=None if r.value("pass") is None else r.value("pass") == 100.0, cutoff=g.cutoff,
            outcome_met=g.outcome_met, cut=g.cut, pass_rule=g.pass_rule, outcome_reason=g.outcome_reason,
            judge_errors=g.judge_errors, task_points=g.task.points, task_weight=g.task.weight,
            conversation_points=g.conversation.points, conversation_weight=g.conversation.weight,
        )  # fmt: skip
        for d, totals in g.diagnostics.items():
            row[f"{d.value}_points"] = totals.points
            row[f"{d.value}_weight"] = totals.weight
    if r.usage:
        row["input_tokens"] = sum(u.input_tokens for u in r.usage.values())
        row["output_tokens"] = sum(u.output_tokens for u in r.usage.values())
        costs = [u.cost_usd for u in r.usage.values()]
        row["cost_usd"] = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
    return row


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def write_csv(records: list[EpisodeRecord], path: Path, grade_sets: Iterable[GradeSetInfo] = ()) -> None:
    """Write one row per episode record, atomically. ``grade_sets`` (``Report.grade_sets``: one per
    run, matched by run id) fill the grade set, judge-validation and official columns."""
    by_run = {g.run_id: g for g in grade_sets}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in records:
        row = episode_row(r, by_run.get(r.run_id))
        writer.writerow([_cell(row[k]) for k in CSV_COLUMNS])
    atomic_write_text(path, buf.getvalue())


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Parse a CSV written by :func:`write_csv` back into typed rows (empty cell -> None).
    Raises ``ValueError`` naming the file and line on a malformed file."""
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != CSV_COLUMNS:
            raise ValueError(f"{path}: unexpected columns {reader.fieldnames}")
        for line, raw in enumerate(reader, start=2):
            row: dict[str, Any] = {}
            for key, typ in CSV_TYPES.items():
                text = raw[key]
                try:
                    if text == "":
                        row[key] = None
                    elif typ is bool:
                        row[key] = {"true": True, "false": False}[text]
                    else:
                        row[key] = typ(text)
                except (KeyError, ValueError):
                    raise ValueError(f"{path}:{line}: column {key}: bad value {text!r}") from None
            rows.append(row)
    return rows
