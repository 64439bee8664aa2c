"""Terminal tables of a persona sweep: each candidate's overall score by persona (with the
thin-slice warnings of :func:`callbench.stats.summary.slice_warning`), then every pair of personas
compared on the same scenarios (which kind of caller the agent fails). Nothing is printed for a run
without personas."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.report.model.build import Report
from callbench.report.terminal.fit import print_table, print_wrapped


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def render_personas_terminal(report: Report, console: Console, note: str = "") -> None:
    """Print the persona tables of ``report`` (module docstring); ``note`` follows each title (the
    report's judged-status note)."""
    for c in report.candidates:
        if not c.by_persona:
            continue
        t = Table(title=f"Overall by persona: {escape(c.candidate)} (mean \\[interval] (n))" + note,
                  title_justify="left")
        t.add_column("persona")
        t.add_column("overall", justify="right")
        t.add_column("scenarios", justify="right")
        warned: list[str] = []
        for persona, r in c.by_persona.items():
            text = f"{_fmt(r.estimate)} [{_fmt(r.low)}, {_fmt(r.high)}] ({r.n_episodes})"
            if r.warning:
                warned.append(f"{persona}: {r.warning}")
                text += " !"
            t.add_row(escape(persona), text, str(r.n_scenarios))
        print_table(console, t)
        for w in warned:
            print_wrapped(console, f"  ! {w}", style="yellow")
    if not report.persona_paired:
        return
    console.print("[b]Personas compared[/b] (a - b, overall, on the scenarios both were played on)" + note)
    for pc in report.persona_paired:
        p = pc.comparison
        diff = ("—" if p.mean_difference is None
                else f"{p.mean_difference:+.1f} [{_fmt(p.low)}, {_fmt(p.high)}]")
        diff += (" (too few)" if p.too_few else "") + (" *" if p.excludes_zero else "")
        print_wrapped(console, f"  {pc.candidate}: a {p.candidate_a}, b {p.candidate_b}\n    scenarios "
                      f"{p.n_scenarios}   difference [interval] {diff}   w/l/t {p.wins}/{p.losses}/{p.ties}")
    print_wrapped(console, "* interval excludes zero: this candidate does differently with these two kinds "
                  "of caller on the same scenarios", hang="  ")
