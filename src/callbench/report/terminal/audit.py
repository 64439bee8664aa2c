"""Terminal tables of ``callbench audit`` (:class:`callbench.audit.core.AuditReport`): the reference
replay per scenario and check, the null floor per scenario and for the bundle, the judges'
accuracy on known answers, and the problems. Every dynamic string is markup-escaped."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.audit.core import AuditReport, EpisodeAudit
from callbench.audit.store import JudgeAccuracy, Rate

MARKS = {"met": "✓", "not_met": "✗", "not_applicable": "–"}
"""Check marks: met, not met, not applicable (a guarded check whose guards are unmet)."""


def pct(x: float | None) -> str:
    """A share 0..1 as a percentage with one decimal, or an em dash."""
    return "—" if x is None else f"{100 * x:.1f}%"


def _checks(ep: EpisodeAudit) -> str:
    """One mark per action check, in scenario order."""
    return "".join(MARKS[c.label] for c in ep.checks) or "(none)"


def _unmet(ep: EpisodeAudit) -> str:
    return ", ".join(f"{MARKS[c.label]} {c.id}" for c in ep.checks if c.label != "met")


def _channel(ep: EpisodeAudit) -> str:
    c = ep.channel
    total = c.applied + c.not_applied + c.never_reached
    return f"{c.applied}/{total}" if total else "—"


def render_judge_accuracy(acc: JudgeAccuracy, title: str) -> Table:
    """One judge's accuracy per expectation (trace kind, expected label) with counts."""
    t = Table(title=escape(title), title_justify="left")
    for col in ("traces", "expected", "agree / n", "accuracy", "labels given", "judge errors"):
        t.add_column(col, overflow="fold")
    for e in acc.by_expectation:
        labels = ", ".join(f"{k} {v}" for k, v in sorted(e.labels.items()))
        t.add_row(
            escape(e.traces),
            e.expected,
            f"{e.agree} / {e.n}",
            pct(e.accuracy),
            escape(labels),
            str(e.judge_errors),
        )
    t.add_row("all", "", f"{acc.agree} / {acc.n}", pct(acc.accuracy), "", str(acc.judge_errors), style="bold")
    return t


def rate_text(r: Rate) -> str:
    """``pct (k/n) [low, high]`` (Wilson 95%), or an em dash when n is 0."""
    if r.n == 0:
        return "—"
    return f"{pct(r.value)} ({r.k}/{r.n}) [{pct(r.low)}, {pct(r.high)}]"


def ba_text(ba: float | None, low: float | None = None, high: float | None = None) -> str:
    """A balanced accuracy as ``0.50`` (with ``[low, high]`` when given), or an em dash."""
    if ba is None:
        return "—"
    return f"{ba:.2f}" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def validation_lines(acc: JudgeAccuracy) -> list[str]:
    """The judge's balanced accuracy, per-class recall, null-trace share called met and the gate."""
    g = acc.gate
    verdict = "PASSED" if g.passed else "FAILED: " + "; ".join(g.reasons)
    ba = ba_text(acc.balanced_accuracy, acc.balanced_accuracy_low, acc.balanced_accuracy_high)
    return [
        f"balanced accuracy {ba}"
        f" (bootstrap 95%); recall on known met {rate_text(acc.classes.recall_met)}, on known not met "
        f"{rate_text(acc.classes.recall_not_met)} (Wilson 95%)",
        f"null-trace criteria called met: {rate_text(acc.null_met)}",
        f"gate (balanced accuracy >= {g.min_balanced_accuracy:.2f}, null-trace met <= "
        f"{g.max_null_met:.0%}): {verdict}",
    ]


def render_judge_breakdown(acc: JudgeAccuracy, title: str) -> Table:
    """Recall per known class and balanced accuracy by diagnostic, then agreement by trace kind."""
    t = Table(title=escape(title), title_justify="left")
    for col in ("diagnostic / trace kind", "recall: known met", "recall: known not met", "balanced accuracy"):
        t.add_column(col, overflow="fold")
    for d, split in acc.by_diagnostic.items():
        t.add_row(escape(d), rate_text(split.recall_met), rate_text(split.recall_not_met),
                  ba_text(split.balanced_accuracy))
    for kind, r in acc.by_kind.items():
        t.add_row(escape(f"trace kind: {kind}"), "", "", f"agree {rate_text(r)}")
    return t


def render_audit(report: AuditReport, console: Console) -> None:
    """Print the audit: reference replay, null floor, judges (when audited), problems, a summary."""
    head = f"{report.bundle_name} {report.bundle_version} (hash {report.bundle_hash[:12]})"
    ref = Table(
        title=escape(
            f"Reference replay: {head}. Checks in scenario order: ✓ met, ✗ not met, – not applicable; "
            "channel = authored events applied / authored"
        ),
        title_justify="left",
    )
    for col in ("scenario", "ended", "met", "checks", "channel", "not met"):
        ref.add_column(col, overflow="fold")
    for s in report.scenarios:
        if s.reference is None:
            ref.add_row(escape(s.scenario_id), "no reference path", "—", "", "—", "", style="red")
            continue
        ep = s.reference
        met = sum(c.label == "met" for c in ep.checks)
        ok = s.reference_met and ep.channel.not_applied + ep.channel.never_reached == 0
        ref.add_row(
            escape(s.scenario_id),
            escape(ep.end_reason),
            f"{met}/{len(ep.checks)}",
            _checks(ep),
            _channel(ep),
            escape(_unmet(ep)),
            style=None if ok else "red",
        )
    console.print(ref)
    specs = list(report.null_floor.candidates)
    floor = Table(
        title=escape(
            "Null and gaming floor: share of the applicable action-check weight a do-nothing or "
            "gaming candidate meets "
            f"(bounds: mean {pct(report.null_floor.mean_bound)}, "
            f"any scenario {pct(report.null_floor.max_bound)})"
        ),
        title_justify="left",
    )
    floor.add_column("scenario", overflow="fold")
    for spec in specs:
        floor.add_column(escape(spec.removeprefix("scripted:")), justify="right")
    for s in report.scenarios:
        cells = [pct(s.floor[spec].share) if spec in s.floor else "—" for spec in specs]
        high = any(spec in s.floor and s.floor[spec].share > report.null_floor.max_bound for spec in specs)
        floor.add_row(escape(s.scenario_id), *cells, style="red" if high else None)
    floor.add_row("mean", *(pct(report.null_floor.candidates[s].mean) for s in specs), style="bold")
    floor.add_row("max", *(f"{pct(report.null_floor.candidates[s].max)}" for s in specs), style="bold")
    console.print(floor)
    if report.judges is not None:
        for role, acc in report.judges.judges.items():
            console.print(
                render_judge_accuracy(
                    acc,
                    f"{role.replace('_', ' ')} {acc.judge.spec}: accuracy on known answers "
                    f"({report.judges.episodes} audit traces; reference: every criterion met)",
                )
            )
            title = f"{role.replace('_', ' ')}: by diagnostic and trace kind"
            console.print(render_judge_breakdown(acc, title))
            for line in validation_lines(acc):
                console.print(escape(line), soft_wrap=True, style=None if acc.gate.passed else "red")
        derived = ", ".join(f"{k} {c.derived}" for k, c in report.judges.contrast.items())
        if derived:
            console.print(escape(f"contrastive traces derived: {derived}"), soft_wrap=True)
    for p in report.problems:
        console.print(escape(str(p)), style="red", soft_wrap=True)
    files = {p.file for p in report.problems if not p.file.startswith("--")}
    options = {p.file for p in report.problems} - files  # judge gates: located at --task-judge ...
    where = [f"in {len(files)} file(s)"] if files else []
    where += [f"on {len(options)} command-line option(s)"] if options else []
    if report.problems:
        console.print(f"{len(report.problems)} problem(s) {' and '.join(where)}", style="bold red")
    else:
        console.print(
            escape(f"OK: {len(report.scenarios)} scenario(s) audited, no problems"), style="bold green"
        )
