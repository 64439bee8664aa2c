"""The terminal report's comparisons: reliability over repeats, paired comparisons between
candidates, and overall scores by language x difficulty."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.report.model.build import Report
from callbench.report.terminal.fit import print_table, print_wrapped
from callbench.report.terminal.formats import FEW_MARK, PAIRED_FEW_NOTE, fmt, id_column, judged_note
from callbench.stats.bootstrap import BootstrapResult


def render_repeats(report: Report, console: Console) -> None:
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
    id_column(t, "candidate", [c.candidate for c in report.candidates])
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


def render_paired(report: Report, console: Console) -> None:
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


def render_language_difficulty(report: Report, console: Console) -> None:
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
