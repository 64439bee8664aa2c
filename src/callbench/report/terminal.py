"""Terminal report (rich tables): smoke-test banner, fairness flags, runs, leaderboard with
intervals, pillars, pass rate, paired comparisons, language x difficulty, diagnostics, skipped
episodes with reasons, cost and tokens. Every dynamic string is markup-escaped."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from callbench.bundle.models import DIAGNOSTIC_LABELS, Diagnostic
from callbench.report.build import Report
from callbench.report.faults import render_faults_terminal
from callbench.report.ledger import render_ledger_terminal
from callbench.stats.bootstrap import BootstrapResult

MAX_SKIPPED_ROWS = 20

SMOKE_TEST_TEXT = (
    "SMOKE TEST: some roles ran on the embedded smoke-test model, a small local model that shows the "
    "harness works end to end. Its scores say nothing about how good any phone agent is."
)


def fmt(x: float | None, digits: int = 1) -> str:
    """A number with ``digits`` decimals, or an em dash for undefined."""
    return "—" if x is None else f"{x:.{digits}f}"


def fmt_ci(r: BootstrapResult) -> str:
    """``estimate [low, high]``, or an em dash when undefined."""
    if r.estimate is None:
        return "—"
    return f"{r.estimate:.1f} [{fmt(r.low)}, {fmt(r.high)}]"


def fmt_cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def render_terminal(report: Report, console: Console) -> None:
    """Print the whole report to ``console``."""
    if report.smoke_test_roles:
        roles = ", ".join(report.smoke_test_roles)
        console.print(Panel(escape(f"{SMOKE_TEST_TEXT}\nRoles: {roles}"), style="bold yellow"))
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
    _leaderboard(report, console)
    _repeats(report, console)
    _paired(report, console)
    _language_difficulty(report, console)
    _diagnostics(report, console)
    _skipped(report, console)
    render_ledger_terminal([(r.run_id, r.simulator) for r in report.runs], console)
    render_faults_terminal([(r.run_id, r.faults) for r in report.runs], console)
    _cost(report, console)
    for w in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")


def _runs(report: Report, console: Console) -> None:
    console.print("[b]Runs[/b]")
    for r in report.runs:
        dirty = "dirty tree" if r.git_dirty else "clean tree" if r.git_dirty is False else "git state unknown"
        console.print(
            escape(
                f"  {r.run_id}: bundle {r.bundle_name} {r.bundle_version} ({r.bundle_hash[:12]}), "
                f"official {'yes' if r.official else 'no'} ({dirty}), grade set {r.grade_set_id}\n"
                f"    caller {r.caller}; task judge {r.task_judge}; conversation judge {r.conversation_judge}"
            )
        )


def _leaderboard(report: Report, console: Console) -> None:
    conf = f"{100 * report.settings.confidence:g}%"
    n = report.settings.n_samples
    t = Table(
        title=f"Leaderboard (mean [{conf} hierarchical bootstrap interval, {n} samples])",
        title_justify="left",
    )
    t.add_column("#", justify="right")
    t.add_column("candidate", overflow="fold", min_width=12)
    t.add_column("overall", justify="right", no_wrap=True)
    t.add_column("pass rate %", justify="right", no_wrap=True)
    for i, c in enumerate(report.candidates, 1):
        t.add_row(str(i), escape(c.candidate), fmt_ci(c.overall), fmt_ci(c.pass_rate))
    console.print(t)
    cut = sorted({x for c in report.candidates for x in c.cutoffs})
    if cut:
        console.print(f"Pass = overall >= {', '.join(f'{x:g}' for x in cut)} (provisional cutoff).")
    e = Table(
        title="Episodes (skipped and ungraded ones are excluded from every score)", title_justify="left"
    )
    e.add_column("candidate", overflow="fold", min_width=8)
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
    console.print(e)
    p = Table(title="Pillars (mean \\[interval]; raw point totals in the HTML/JSON)", title_justify="left")
    p.add_column("candidate", overflow="fold", min_width=12)
    for col in ("task", "conversation"):
        p.add_column(col, justify="right", no_wrap=True)
    for c in report.candidates:
        p.add_row(escape(c.candidate), fmt_ci(c.task), fmt_ci(c.conversation))
    console.print(p)


def _repeats(report: Report, console: Console) -> None:
    """pass^k, verdict flips and within-scenario SD; nothing when no candidate has two repeats."""
    cands = [c for c in report.candidates if c.pass_hat_k]
    if not cands:
        return
    ks = sorted({int(k) for c in cands for k in (c.pass_hat_k or {})})
    t = Table(
        title="Reliability over repeats (pass^k = mean over scenarios of C(c,k)/C(n,k); no interval)",
        title_justify="left",
    )
    t.add_column("candidate", overflow="fold", min_width=12)
    for k in ks:
        t.add_column(f"pass^{k}", justify="right", no_wrap=True)
    for col in ("verdict flips", "within-scenario SD"):
        t.add_column(col, justify="right", overflow="fold")
    for c in cands:
        rs = c.repeats
        cells = []
        for k in ks:
            v = (c.pass_hat_k or {}).get(str(k))
            n = rs.pass_hat_k_scenarios.get(str(k), 0)
            cells.append("—" if v is None else f"{v:.3f} (n={n})")
        flips = (
            "—"
            if c.verdict_flip_rate is None
            else f"{100 * c.verdict_flip_rate:.1f}% ({rs.n_flipped}/{rs.n_scenarios_repeated})"
        )
        t.add_row(escape(c.candidate), *cells, flips, fmt(c.within_scenario_sd))
    console.print(t)
    console.print(
        "n = scenarios behind each pass^k (a scenario with fewer completed repeats than k is left out); "
        "verdict flips = scenarios whose repeats disagree on pass/fail; SD in score points."
    )


def _paired(report: Report, console: Console) -> None:
    if not report.paired:
        return
    t = Table(title="Paired comparisons (a - b on scenarios both completed)", title_justify="left")
    for col in ("a", "b", "scenarios", "difference [interval]", "wins", "losses", "ties"):
        t.add_column(col, overflow="fold")
    for p in report.paired:
        diff = "—" if p.mean_difference is None else f"{p.mean_difference:+.1f} [{fmt(p.low)}, {fmt(p.high)}]"
        if p.excludes_zero:
            diff += " *"
        t.add_row(
            escape(p.candidate_a),
            escape(p.candidate_b),
            str(p.n_scenarios),
            diff,
            str(p.wins),
            str(p.losses),
            str(p.ties),
        )
    console.print(t)
    console.print("* interval excludes zero")


def _language_difficulty(report: Report, console: Console) -> None:
    for c in report.candidates:
        if not c.by_language:
            continue
        diffs = sorted(c.by_difficulty)
        t = Table(
            title=f"Overall by language x difficulty: {escape(c.candidate)} (mean \\[interval] (n))",
            title_justify="left",
        )
        t.add_column("language")
        for d in [*diffs, "all"]:
            t.add_column(escape(d or "?"), justify="right")
        warned: list[str] = []

        def cell(r: BootstrapResult | None, name: str, warned: list[str] = warned) -> str:
            if r is None:
                return ""
            text = f"{fmt(r.estimate)} [{fmt(r.low)}, {fmt(r.high)}] ({r.n_episodes})"
            if r.warning:
                warned.append(f"{name}: {r.warning}")
                text += " !"
            return text

        for lang, row in c.by_language.items():
            cells = []
            for d in diffs:
                r = c.by_language_difficulty.get(lang, {}).get(d)
                cells.append(cell(r, f"{lang or '?'} x {d or '?'}"))
            cells.append(cell(row, f"{lang or '?'}"))
            t.add_row(escape(lang or "?"), *cells)
        t.add_row(
            "all",
            *[cell(c.by_difficulty[d], f"{d or '?'}") for d in diffs],
            cell(c.overall, "all"),
        )
        console.print(t)
        for w in warned:
            console.print(f"  [yellow]! {escape(w)}[/yellow]")


def _diagnostics(report: Report, console: Console) -> None:
    if not report.candidates:
        return
    t = Table(
        title="Diagnostics (score from summed points; mean of episodes in brackets)", title_justify="left"
    )
    t.add_column("diagnostic", overflow="fold")
    for c in report.candidates:
        t.add_column(escape(c.candidate), justify="right", overflow="fold")
    for d in Diagnostic:
        cells = []
        for c in report.candidates:
            s = c.diagnostics.get(d)
            cells.append(
                "—" if s is None or s.score is None else f"{s.score:.1f} ({fmt(s.mean_episode_score)})"
            )
        t.add_row(DIAGNOSTIC_LABELS[d], *cells)
    console.print(t)


def _skipped(report: Report, console: Console) -> None:
    if not report.skipped:
        return
    t = Table(title=f"Skipped episodes ({len(report.skipped)}; excluded from scores)", title_justify="left")
    for col in ("candidate", "episode", "reason"):
        t.add_column(col, overflow="fold")
    for s in report.skipped[:MAX_SKIPPED_ROWS]:
        t.add_row(escape(s.candidate), escape(f"{s.agent_id}/{s.scenario_id} #{s.repeat}"), escape(s.reason))
    console.print(t)
    if len(report.skipped) > MAX_SKIPPED_ROWS:
        console.print(
            f"... and {len(report.skipped) - MAX_SKIPPED_ROWS} more (all in the HTML and JSON reports)"
        )


def _cost(report: Report, console: Console) -> None:
    t = Table(title="Cost and tokens (from traces)", title_justify="left")
    for col in ("candidate", "role", "calls", "input tokens", "output tokens", "cached input", "cost"):
        t.add_column(col, justify="left" if col in ("candidate", "role") else "right", overflow="fold")
    for c in report.candidates:
        roles = sorted(c.usage.items())
        for i, (role, u) in enumerate(roles):
            t.add_row(
                escape(c.candidate) if i == 0 else "",
                escape(role),
                f"{u.calls:,}",
                f"{u.input_tokens:,}",
                f"{u.output_tokens:,}",
                f"{u.cached_input_tokens:,}",
                fmt_cost(u.cost_usd),
            )
        usages = [u for _, u in roles]
        t.add_row(
            "" if roles else escape(c.candidate),
            "[b]total[/b]",
            f"{sum(u.calls for u in usages):,}",
            f"{sum(u.input_tokens for u in usages):,}",
            f"{sum(u.output_tokens for u in usages):,}",
            f"{sum(u.cached_input_tokens for u in usages):,}",
            fmt_cost(c.cost_usd),
            end_section=True,
        )
    console.print(t)
