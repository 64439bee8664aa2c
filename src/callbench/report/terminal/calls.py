"""The terminal report's calls: a row per call for a small run, else counts per candidate."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from callbench.report.model.build import CallRow, Report, pass_rule_text
from callbench.report.terminal.fit import print_table, print_wrapped
from callbench.report.terminal.formats import fmt, id_column, judged_note

MAX_CALL_ROWS = 40
"""Runs with at most this many planned calls get a per-call table; larger runs a summary."""


def _call_rows(cand: str, mine: list[CallRow], *, grouped: bool) -> Table:
    """One candidate's calls, a row each, in a compact table (no side borders). ``grouped``: the
    first column holds ``scenario#repeat`` under a bold heading row per agent, so that long
    ``agent/scenario#repeat`` ids need not be cut to fit 80 columns."""
    t = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0))
    if grouped:
        ids = [f"{c.scenario_id}#{c.repeat}" for c in mine] + [c.agent_id for c in mine]
        id_column(t, "agent / scenario#repeat", ids)
    else:
        id_column(t, "episode", [f"{c.agent_id}/{c.scenario_id}#{c.repeat}" for c in mine])
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


def render_calls(report: Report, console: Console) -> None:
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
    id_column(t, "candidate", [c.candidate for c in calls])
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
