"""Terminal report (rich tables): smoke-test banner, fairness flags, runs, leaderboard with
intervals, pillars, pass rate, diagnostics, skipped episodes with reasons, cost and tokens; the
calls (``calls.py``), comparisons (``comparisons.py``), latency, personas and the other sections
come from their own modules. Every dynamic string is markup-escaped."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from callbench.bundle.models import DIAGNOSTIC_LABELS, Diagnostic
from callbench.report.model.build import Report, pass_rule_text
from callbench.report.model.latency_text import latency_cell
from callbench.report.model.official import missing_traces_text
from callbench.report.model.text import REFERENCE_TEXT, SMOKE_TEST_TEXT, STAND_IN_TEXT
from callbench.report.terminal.calls import MAX_CALL_ROWS, render_calls
from callbench.report.terminal.comparisons import render_language_difficulty, render_paired, render_repeats
from callbench.report.terminal.fit import print_table, print_wrapped
from callbench.report.terminal.formats import (
    FEW_NOTE,
    PAIRED_FEW_NOTE,
    fmt,
    fmt_ci,
    fmt_cost,
    id_column,
    judged_note,
)
from callbench.report.terminal.latency import render_latency_terminal
from callbench.report.terminal.personas import render_personas_terminal
from callbench.report.terminal.sections import (
    render_faults_terminal,
    render_judge_accuracy_terminal,
    render_ledger_terminal,
    render_validation_terminal,
    render_voice_terminal,
)

MAX_SKIPPED_ROWS = 20

OFFICIAL_TEXT = (
    "official = every planned call finished, none skipped, one callbench version, from a clean git "
    "checkout or an install built from one (a run whose git state is unknown cannot be), no "
    "generated scenario awaiting review, and every planned call's trace still on disk."
)


def smoke_test_summary(report: Report) -> str:
    """Which roles ran on the embedded smoke-test model, exactly: ``every role (...)`` when all of
    every run's roles did, else the list. Empty when none did."""
    roles = report.smoke_test_roles
    if not roles:
        return ""
    n_roles = sum(3 + len(r.candidates) for r in report.runs)
    if len(roles) >= n_roles:
        return f"Every role ran on it: {', '.join(roles)}."
    return f"Ran on it: {', '.join(roles)}; every other role did not."


def render_terminal(report: Report, console: Console) -> None:
    """Print the whole report to ``console``."""
    if report.smoke_test_roles:
        console.print(Panel(escape(f"{SMOKE_TEST_TEXT}\n{smoke_test_summary(report)}"), style="bold yellow"))
    if report.stand_in_judges:
        names = ", ".join(report.stand_in_judges)
        console.print(Panel(escape(f"{STAND_IN_TEXT}\n{names}."), style="bold magenta"))
    for line in report.deployed:
        print_wrapped(console, line, style="cyan")
    if report.reference_candidates:
        names = ", ".join(report.reference_candidates)
        console.print(Panel(escape(f"{REFERENCE_TEXT}\n{names}."), style="bold cyan"))
    if report.fairness_flags:
        body = "\n".join(f"- {escape(f.message)}" for f in report.fairness_flags)
        console.print(
            Panel(
                "These runs did not use the same caller/judges/settings; comparisons across them are "
                f"not fair:\n{body}",
                title="UNFAIR COMPARISON",
                style="bold red",
            )
        )
    _runs(report, console)
    render_calls(report, console)
    _leaderboard(report, console)
    render_repeats(report, console)
    render_paired(report, console)
    render_latency_terminal(report, console)
    render_language_difficulty(report, console)
    render_personas_terminal(report, console, judged_note(report))
    _diagnostics(report, console)
    _skipped(report, console)
    render_ledger_terminal([(r.run_id, r.simulator) for r in report.runs], console)
    render_voice_terminal(report.voice, console)
    render_faults_terminal([(r.run_id, r.faults) for r in report.runs], console)
    render_judge_accuracy_terminal([(r.run_id, r.judge_accuracy) for r in report.runs], console)
    render_validation_terminal(report, console)
    _cost(report, console)
    for w in report.warnings:
        print_wrapped(console, f"warning: {w}", style="yellow")


def _runs(report: Report, console: Console) -> None:
    console.print("[b]Runs[/b]")
    for r in report.runs:
        dirty = "dirty tree" if r.git_dirty else "clean tree" if r.git_dirty is False else "git state unknown"
        pending = f"; {r.awaiting_review} generated scenario(s) awaiting review" if r.awaiting_review else ""
        if r.missing_traces:
            pending += f"; {missing_traces_text(r.missing_traces)}"
        # wrapped at spaces only: ids and paths are never broken
        print_wrapped(
            console,
            f"  {r.run_id}: bundle {r.bundle_name} {r.bundle_version} ({r.bundle_hash[:12]}), "
            f"official {'yes' if r.official else 'no'} ({dirty}{pending}), grade set {r.grade_set_id} "
            f"(cutoff {r.cutoff:g}; {_grade_set_status(report, r.run_id)})\n"
            f"    caller {r.caller};\n    task judge {r.task_judge};\n"
            f"    conversation judge {r.conversation_judge}",
        )
    print_wrapped(console, OFFICIAL_TEXT)


def _grade_set_status(report: Report, run_id: str) -> str:
    info = next((g for g in report.grade_sets if g.run_id == run_id), None)
    if info is None:
        return "judges not validated"
    official = "official" if info.official else "not official"
    return f"{info.judge_validation.text}; grade set {official}"


def _leaderboard(report: Report, console: Console) -> None:
    conf = f"{100 * report.settings.confidence:g}%"
    n = report.settings.n_samples
    t = Table(
        title=f"Leaderboard (mean [{conf} hierarchical bootstrap interval, {n} samples])"
        + judged_note(report),
        title_justify="left",
    )
    id_column(t, "candidate", [c.candidate for c in report.candidates])
    t.add_column("outcome %", justify="right", no_wrap=True)
    t.add_column("overall", justify="right", no_wrap=True)
    t.add_column("pass rate %", justify="right", no_wrap=True)
    if report.latency:  # the second axis: median time to first word (report/terminal/latency.py)
        t.add_column("1st word p50 ms", justify="right", no_wrap=True)
    for c in report.candidates:  # best first
        lat = [latency_cell(report.latency.get(c.candidate))] if report.latency else []
        t.add_row(escape(c.candidate), fmt_ci(c.outcome_success), fmt_ci(c.overall), fmt_ci(c.pass_rate),
                  *lat)
    print_table(console, t)
    if any(r.too_few for c in report.candidates
           for r in (c.overall, c.task, c.conversation, c.pass_rate, c.outcome_success)):
        print_wrapped(console, FEW_NOTE, style="yellow", hang="  ")
    rule = pass_rule_text(report.candidates)
    if rule:
        print_wrapped(console, rule + " The cutoff is provisional.")
    e = Table(
        title="Episodes (skipped and ungraded ones are excluded from every score)", title_justify="left",
        box=None, pad_edge=False, padding=(0, 1, 0, 0),
    )
    id_column(e, "candidate", [c.candidate for c in report.candidates])
    for col in ("scored", "skipped", "ungraded", "not run", "no score", "judge err"):
        e.add_column(col, justify="right", overflow="fold")
    for c in report.candidates:
        e.add_row(
            escape(c.candidate),
            str(c.n_scored),
            str(c.n_skipped),
            str(c.n_ungraded),
            str(c.n_not_run),
            str(c.n_overall_undefined),
            str(c.judge_errors),
        )
    print_table(console, e)
    if any(c.n_ungraded for c in report.candidates):
        console.print(
            "ungraded: a trace with no grade in this grade set, or one left not graded by a judge "
            "outage (the fault ledger's 'not graded' counts only those); callbench grade RUN "
            "grades what is missing."
        )
    p = Table(title=f"Pillars (mean \\[interval]; raw point totals in the HTML/JSON){judged_note(report)}",
              title_justify="left")
    id_column(p, "candidate", [c.candidate for c in report.candidates])
    for col in ("task", "conversation"):
        p.add_column(col, justify="right", no_wrap=True)
    for c in report.candidates:
        p.add_row(escape(c.candidate), fmt_ci(c.task), fmt_ci(c.conversation))
    print_table(console, p)


def _diagnostics(report: Report, console: Console) -> None:
    if not report.candidates:
        return
    t = Table(
        title="Diagnostics (score from summed points; mean of episodes in brackets)" + judged_note(report),
        title_justify="left",
    )
    t.add_column("diagnostic", overflow="fold")
    for c in report.candidates:
        t.add_column(escape(c.candidate), justify="right", no_wrap=True)
    for d in Diagnostic:
        cells = []
        for c in report.candidates:
            s = c.diagnostics.get(d)
            cells.append(
                "—" if s is None or s.score is None else f"{s.score:.1f} ({fmt(s.mean_episode_score)})"
            )
        t.add_row(DIAGNOSTIC_LABELS[d], *cells)
    print_table(console, t)


def _skipped(report: Report, console: Console) -> None:
    if not report.skipped:
        return
    t = Table(title=f"Skipped episodes ({len(report.skipped)}; excluded from scores)", title_justify="left")
    shown = report.skipped[:MAX_SKIPPED_ROWS]
    id_column(t, "candidate", [s.candidate for s in shown])
    id_column(t, "episode", [f"{s.agent_id}/{s.scenario_id} #{s.repeat}" for s in shown])
    t.add_column("reason", overflow="fold")
    for s in report.skipped[:MAX_SKIPPED_ROWS]:
        t.add_row(escape(s.candidate), escape(f"{s.agent_id}/{s.scenario_id} #{s.repeat}"), escape(s.reason))
    print_table(console, t)
    if len(report.skipped) > MAX_SKIPPED_ROWS:
        console.print(
            f"... and {len(report.skipped) - MAX_SKIPPED_ROWS} more (all in the HTML and JSON reports)"
        )


def total_tokens(report: Report) -> int:
    """Input + output tokens of every role, judges included, over all candidates: the one token
    total the progress bar (:class:`callbench.runs.session.RunTotals`) and the cost table show."""
    return sum(u.input_tokens + u.output_tokens for c in report.candidates for u in c.usage.values())


def _cost(report: Report, console: Console) -> None:
    # a small table per candidate under its id: a long id in a column squeezed the numbers
    console.print(
        "[b]Cost and tokens[/b] (input, output, cached input; from traces and grades; judges included)"
    )
    for c in report.candidates:
        print_wrapped(console, f"  {c.candidate}", style="bold")
        t = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0))
        t.add_column("  role", no_wrap=True, min_width=len("  conversation_judge"))
        for col in ("calls", "input", "output", "cached in", "cost"):
            t.add_column(col, justify="right", no_wrap=True)
        roles = sorted(c.usage.items())
        for role, u in roles:
            t.add_row(
                f"  {escape(role)}",
                f"{u.calls:,}",
                f"{u.input_tokens:,}",
                f"{u.output_tokens:,}",
                f"{u.cached_input_tokens:,}",
                fmt_cost(u.cost_usd),
            )
        usages = [u for _, u in roles]
        t.add_row(
            "  [b]total[/b]",
            f"{sum(u.calls for u in usages):,}",
            f"{sum(u.input_tokens for u in usages):,}",
            f"{sum(u.output_tokens for u in usages):,}",
            f"{sum(u.cached_input_tokens for u in usages):,}",
            fmt_cost(c.cost_usd),
        )
        print_table(console, t)
    console.print(f"Tokens in total (input + output, every role, judges included): {total_tokens(report):,}")


__all__ = ["MAX_CALL_ROWS", "PAIRED_FEW_NOTE", "render_terminal", "smoke_test_summary", "total_tokens"]
