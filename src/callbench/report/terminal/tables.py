"""Terminal report (rich tables): smoke-test banner, fairness flags, runs, leaderboard with
intervals, pillars, pass rate, paired comparisons, language x difficulty, diagnostics, skipped
episodes with reasons, cost and tokens. Every dynamic string is markup-escaped."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table

from callbench.bundle.models import DIAGNOSTIC_LABELS, Diagnostic
from callbench.report.model.build import CallRow, Report, pass_rule_text
from callbench.report.model.latency_text import latency_cell
from callbench.report.model.official import missing_traces_text
from callbench.report.model.text import REFERENCE_TEXT, SMOKE_TEST_TEXT, STAND_IN_TEXT
from callbench.report.terminal.fit import print_table, print_wrapped
from callbench.report.terminal.latency import render_latency_terminal
from callbench.report.terminal.personas import render_personas_terminal
from callbench.report.terminal.sections import (
    render_faults_terminal,
    render_judge_accuracy_terminal,
    render_ledger_terminal,
    render_validation_terminal,
    render_voice_terminal,
)
from callbench.stats.bootstrap import MIN_SCORED_FOR_INTERVAL, BootstrapResult
from callbench.stats.paired import MIN_PAIRED_SCENARIOS

MAX_SKIPPED_ROWS = 20
MAX_CALL_ROWS = 40
"""Runs with at most this many planned calls get a per-call table; larger runs a summary."""

OFFICIAL_TEXT = (
    "official = every planned call finished, none skipped, one callbench version, from a clean git "
    "checkout (a run whose git state is unknown, made outside a git checkout, cannot be), no "
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


def fmt(x: float | None, digits: int = 1) -> str:
    """A number with ``digits`` decimals, or an em dash for undefined."""
    return "—" if x is None else f"{x:.{digits}f}"


FEW_MARK = "†"
FEW_NOTE = (
    f"{FEW_MARK} from fewer than {MIN_SCORED_FOR_INTERVAL} scored calls: too few to mean much, "
    "however narrow the interval looks."
)


PAIRED_FEW_NOTE = (
    f"{FEW_MARK} from fewer than {MIN_PAIRED_SCENARIOS} shared scenarios: too few to mean much, "
    "whether or not the interval excludes zero."
)


def fmt_ci(r: BootstrapResult) -> str:
    """``estimate [low, high]``, or an em dash when undefined; :data:`FEW_MARK` is appended when
    fewer than :data:`MIN_SCORED_FOR_INTERVAL` calls stand behind the interval (:data:`FEW_NOTE`)."""
    if r.estimate is None:
        return "—"
    text = f"{r.estimate:.1f} [{fmt(r.low)}, {fmt(r.high)}]"
    if r.too_few:
        text += FEW_MARK
    return text


def judged_note(report: Report) -> str:
    """The judge-validation status every judged figure carries (``" — judges not validated"``),
    markup-escaped; empty when every grade set's judges passed validation."""
    return f" — {escape(report.judged_status)}" if report.judged_status else ""


def fmt_cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


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
    _calls(report, console)
    _leaderboard(report, console)
    _repeats(report, console)
    _paired(report, console)
    render_latency_terminal(report, console)
    _language_difficulty(report, console)
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


def _id_column(t: Table, name: str, values: list[str]) -> None:
    """A column for ids: never wrapped or cut, as wide as the longest id."""
    t.add_column(name, no_wrap=True, overflow="ignore", min_width=max([len(name), *map(len, values)]))


def _call_rows(cand: str, mine: list[CallRow], *, grouped: bool) -> Table:
    """One candidate's calls, a row each, in a compact table (no side borders). ``grouped``: the
    first column holds ``scenario#repeat`` under a bold heading row per agent, so that long
    ``agent/scenario#repeat`` ids need not be cut to fit 80 columns."""
    t = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0))
    if grouped:
        ids = [f"{c.scenario_id}#{c.repeat}" for c in mine] + [c.agent_id for c in mine]
        _id_column(t, "agent / scenario#repeat", ids)
    else:
        _id_column(t, "episode", [f"{c.agent_id}/{c.scenario_id}#{c.repeat}" for c in mine])
    t.add_column("lang", no_wrap=True)
    t.add_column("end reason", no_wrap=True)
    t.add_column("tools", justify="right", no_wrap=True)
    t.add_column("overall", justify="right", no_wrap=True)
    t.add_column("pass", no_wrap=True)
    agent = None
    for c in mine:
        if grouped and c.agent_id != agent:
            agent = c.agent_id
            t.add_row(f"[b]{escape(agent)}[/b]", "", "", "", "", "")
        t.add_row(
            escape(f"{c.scenario_id}#{c.repeat}" if grouped else f"{c.agent_id}/{c.scenario_id}#{c.repeat}"),
            escape(c.language or "?"),
            escape(c.end_reason),
            str(c.tool_calls),
            fmt(c.overall),
            _verdict(c),
        )
    return t


def _verdict(c: CallRow) -> str:
    """``pass`` / ``fail`` (with ``outcome`` when the outcome failed), ``cut``, or a dash."""
    if c.cut:
        return "cut"
    if c.passed is None:
        return "—"
    return "pass" if c.passed else "fail: outcome" if c.outcome_met is False else "fail"


def _calls(report: Report, console: Console) -> None:
    """A row per call (up to :data:`MAX_CALL_ROWS`), else counts by candidate and end reason."""
    calls = report.calls
    if not calls:
        return
    if len(calls) <= MAX_CALL_ROWS:
        for cand in sorted({c.candidate for c in calls}):
            mine = [c for c in calls if c.candidate == cand]
            t = _call_rows(cand, mine, grouped=False)
            natural = Measurement.get(console, console.options.update_width(10_000), t).maximum
            if natural > console.width:
                t = _call_rows(cand, mine, grouped=True)  # ids whole, the agent as a heading row
            # the title on a line of its own: as a table title it wrapped a long id at the table's width
            print_wrapped(console, f"Calls: {cand}", style="bold")
            print_table(console, t)
        print_wrapped(console, "tools = tool calls the candidate made; " + (pass_rule_text(report.candidates)
                      or "pass = overall >= the cutoff.") + judged_note(report))
        return
    t = Table(
        title=f"Calls ({len(calls)}; one row per call in the HTML report and --csv){judged_note(report)}",
        title_justify="left",
    )
    _id_column(t, "candidate", [c.candidate for c in calls])
    reasons = sorted({c.end_reason for c in calls})
    for r in reasons:
        t.add_column(escape(r), justify="right", no_wrap=True)
    for col in ("tool calls / call", "passed"):
        t.add_column(col, justify="right", no_wrap=True)
    for cand in sorted({c.candidate for c in calls}):
        mine = [c for c in calls if c.candidate == cand]
        judged = [c for c in mine if c.passed is not None]
        t.add_row(
            escape(cand),
            *[str(sum(c.end_reason == r for c in mine)) for r in reasons],
            f"{sum(c.tool_calls for c in mine) / len(mine):.1f}",
            f"{sum(bool(c.passed) for c in judged)}/{len(judged)}",
        )
    print_table(console, t)


def _leaderboard(report: Report, console: Console) -> None:
    conf = f"{100 * report.settings.confidence:g}%"
    n = report.settings.n_samples
    t = Table(
        title=f"Leaderboard (mean [{conf} hierarchical bootstrap interval, {n} samples])"
        + judged_note(report),
        title_justify="left",
    )
    _id_column(t, "candidate", [c.candidate for c in report.candidates])
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
    _id_column(e, "candidate", [c.candidate for c in report.candidates])
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
    _id_column(p, "candidate", [c.candidate for c in report.candidates])
    for col in ("task", "conversation"):
        p.add_column(col, justify="right", no_wrap=True)
    for c in report.candidates:
        p.add_row(escape(c.candidate), fmt_ci(c.task), fmt_ci(c.conversation))
    print_table(console, p)


def _repeats(report: Report, console: Console) -> None:
    """pass^k, verdict flips and within-scenario SD; nothing when no candidate has two repeats."""
    cands = [c for c in report.candidates if c.pass_hat_k]
    if not cands:
        return
    ks = sorted({int(k) for c in cands for k in (c.pass_hat_k or {})})
    t = Table(
        title="Reliability over repeats (pass^k = mean over scenarios of C(c,k)/C(n,k); no interval)"
        + judged_note(report),
        title_justify="left",
    )
    _id_column(t, "candidate", [c.candidate for c in report.candidates])
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
        if c.outcome_pass_hat_k:
            oc = [("—" if (v := c.outcome_pass_hat_k.get(str(k))) is None
                   else f"{v:.3f} (n={c.outcome_pass_hat_k_scenarios.get(str(k), 0)})") for k in ks]
            t.add_row(escape(f"  outcome: {c.candidate}"), *oc, "", "")
    print_table(console, t)
    console.print(
        "n = scenarios behind each pass^k (a scenario with fewer completed repeats than k is left out); "
        "verdict flips = scenarios whose repeats disagree on pass/fail; SD in score points."
    )


def _paired(report: Report, console: Console) -> None:
    if not report.paired:
        return
    # lines, not a table: two ids and an interval never fit whole in 80 columns side by side
    console.print("[b]Paired comparisons[/b] (a - b on the scenarios both completed)" + judged_note(report))
    for p in report.paired:
        diff = "—" if p.mean_difference is None else f"{p.mean_difference:+.1f} [{fmt(p.low)}, {fmt(p.high)}]"
        if p.too_few:
            diff += FEW_MARK
        if p.excludes_zero:
            diff += " *"
        w_l_t = f"{p.wins}/{p.losses}/{p.ties}"
        print_wrapped(console, f"  a {p.candidate_a}\n  b {p.candidate_b}\n    scenarios {p.n_scenarios}   "
                      f"difference [interval] {diff}   w/l/t {w_l_t}")
    print_wrapped(console, "* interval excludes zero; w/l/t = scenarios where a scored above, below, the "
                  "same as b", hang="  ")
    if report.paired_outcome:
        console.print("[b]Paired comparisons on the outcome[/b] (a - b, percentage points of calls whose "
                      "outcome is met)")
        for p in report.paired_outcome:
            diff = ("—" if p.mean_difference is None
                    else f"{p.mean_difference:+.1f} [{fmt(p.low)}, {fmt(p.high)}]")
            diff += (FEW_MARK if p.too_few else "") + (" *" if p.excludes_zero else "")
            pair = f"  a {p.candidate_a}\n  b {p.candidate_b}\n"
            print_wrapped(console, pair + f"    scenarios {p.n_scenarios}   difference [interval] {diff}   "
                          f"w/l/t {p.wins}/{p.losses}/{p.ties}")
    if any(p.too_few for p in report.paired):
        print_wrapped(console, PAIRED_FEW_NOTE, style="yellow", hang="  ")


def _language_difficulty(report: Report, console: Console) -> None:
    for c in report.candidates:
        if not c.by_language:
            continue
        diffs = sorted(c.by_difficulty)
        t = Table(
            title=f"Overall by language x difficulty: {escape(c.candidate)} (mean \\[interval] (n))"
            + judged_note(report),
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
        print_table(console, t)
        for w in warned:
            print_wrapped(console, f"  ! {w}", style="yellow")


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
    _id_column(t, "candidate", [s.candidate for s in shown])
    _id_column(t, "episode", [f"{s.agent_id}/{s.scenario_id} #{s.repeat}" for s in shown])
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
