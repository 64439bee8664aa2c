"""The report's wording that the terminal and the HTML report both show, as plain text (neither
rich markup nor HTML; each view escapes it): the banners that say which roles are stand-ins (the
smoke-test model, the reference replay, scripted judges), the judge validation of each grade set
with the audit's floor agents' scores under the run's own judges, and where each candidate's
overall score comes from (data: :mod:`callbench.report.model.validation`,
:mod:`callbench.stats.sources`). It lives below both views so that neither imports the other."""

from __future__ import annotations

from callbench.report.model.build import Report
from callbench.report.model.validation import GradeSetInfo
from callbench.stats.sources import SOURCE_NAMES

SMOKE_TEST_TEXT = (
    "SMOKE TEST: the roles named below ran on the embedded smoke-test model, a small local model that "
    "shows the harness works end to end. Its scores say nothing about how good any phone agent is."
)
REFERENCE_TEXT = (
    "REFERENCE: the candidate(s) named below replay each scenario's reference path from the bundle, "
    "turn by turn and with no model: the authored correct call, a reference ceiling to compare "
    "against, not a model. Its caller and judges are the run's own."
)
STAND_IN_TEXT = (
    "STAND-IN JUDGES: the judges named below are scripted (fixed labels or replies from a file, no "
    "model). Their grades show that grading works; they are not a measurement of quality (under "
    "scripted:met an agent that hangs up at once passes most calls)."
)
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
