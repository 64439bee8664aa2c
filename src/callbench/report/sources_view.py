"""Terminal view of the judge validation of each grade set, the audit's floor agents' scores with
the run's own judges, and where each candidate's overall score comes from (issue 23 items 2-3;
data: :mod:`callbench.report.validation`, :mod:`callbench.stats.sources`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.report.build import Report
from callbench.report.fit import print_table, print_wrapped
from callbench.report.validation import GradeSetInfo
from callbench.stats.sources import SOURCE_NAMES

SOURCE_LABELS = {
    "action_checks": "action checks",
    "task_judge": "task judge",
    "conversation_judge": "conversation judge",
}
SOURCES_NOTE = (
    "share = the part of the overall score each source decides (weight at stake, mean over scored "
    "calls); pts = the points of the overall score it gave."
)
FLOOR_MISSING = (
    "Floor agents with these judges: not measured (run callbench audit BUNDLE --judges with the "
    "run's judges and --save RUN_DIR)."
)


def validation_lines(info: GradeSetInfo) -> list[str]:
    """Plain lines about one grade set's judge validation and its floor agents' scores."""
    v = info.judge_validation
    out = [
        f"{info.run_id} grade set {info.grade_set_id} (cutoff {info.cutoff:g}): {v.text}; "
        f"{'official' if info.official else 'not official'}"
    ]
    for role, r in v.judges.items():
        ba = "—" if r.balanced_accuracy is None else f"{r.balanced_accuracy:.2f}"
        null = "—" if r.null_met is None else f"{r.null_met:.0%}"
        gate = "passed" if r.passed else "failed: " + "; ".join(r.reasons)
        out.append(
            f"  {role.replace('_', ' ')} {r.spec}: balanced accuracy {ba}, null-trace criteria called met "
            f"{null}, gate {gate}; {r.scenarios} of {r.scenarios_in_bundle} scenarios, {r.created}"
        )
        if r.note:
            out.append(f"    {r.note}")
    if v.status == "human_labels":
        return out
    if v.floor_scores:
        scores = ", ".join(
            f"{spec} {'—' if f.overall is None else f'{f.overall:.1f}'} ({f.episodes} calls)"
            for spec, f in v.floor_scores.items()
        )
        out.append(f"  floor agents' overall score with these judges: {scores}")
    else:
        out.append("  " + FLOOR_MISSING)
    return out


def source_cells(report: Report) -> list[tuple[str, list[str]]]:
    """(candidate, one cell per source: ``share% (pts)``) for every candidate with scored calls."""
    rows = []
    for c in report.candidates:
        if not c.score_sources:
            continue
        cells = []
        for s in SOURCE_NAMES:
            x = c.score_sources[s]
            cells.append(f"{100 * x.weight_share:.1f}% ({x.points:.1f} pts)")
        rows.append((c.candidate, cells))
    return rows


def render_validation_terminal(report: Report, console: Console) -> None:
    """The judge-validation lines of every grade set, then the score-sources table."""
    print_wrapped(console, "Judge validation (callbench audit --judges; docs/validity.md)", style="bold")
    for info in report.grade_sets:
        for line in validation_lines(info):
            style = None if info.judge_validation.status in ("validated", "human_labels") else "red"
            print_wrapped(console, line, style=style)
    rows = source_cells(report)
    if not rows:
        return
    suffix = f" — {escape(report.judged_status)}" if report.judged_status else ""
    t = Table(title=f"Where the overall score comes from{suffix}", title_justify="left")
    t.add_column("candidate", overflow="fold")
    for s in SOURCE_NAMES:
        t.add_column(SOURCE_LABELS[s], justify="right")
    for cand, cells in rows:
        t.add_row(escape(cand), *cells)
    print_table(console, t)
    print_wrapped(console, SOURCES_NOTE)
