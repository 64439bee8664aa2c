"""The latency section of the terminal report: a table per candidate, the short slices (language,
tools before speech, turn index) and each candidate's slowest scenarios (the agent and scenario
slices in full are in the HTML and JSON reports), the paired comparisons and the lines about
where latency was measured (text from
:mod:`callbench.report.model.latency_text`, laid out here as rich tables, markup-escaped)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.report.model.build import Report
from callbench.report.model.latency_text import (
    LATENCY_COLUMNS,
    SLICES_ELSEWHERE,
    TURN_SLICE_NOTE,
    latency_notes,
    latency_rows,
    paired_rows,
    slice_rows,
    slowest_scenarios_line,
)
from callbench.report.terminal.fit import print_table, print_wrapped


def render_latency_terminal(report: Report, console: Console) -> None:
    """Print the latency section; nothing when no candidate has timed calls."""
    if not report.latency:
        return
    conf = f"{100 * report.settings.confidence:g}%"
    t = Table(title=f"Latency (estimate [{conf} interval])", title_justify="left")
    t.add_column("candidate", no_wrap=True)
    for col in LATENCY_COLUMNS:
        t.add_column(col, justify="right", overflow="fold")
    for row in latency_rows(report.latency):
        t.add_row(*(escape(x) for x in row))
    print_table(console, t)
    for line in latency_notes(report.latency, report.settings.latency_budget_s) + report.latency_warnings:
        print_wrapped(console, "  " + line, hang="    ")
    s = Table(title="Time to first word by slice (ms)", title_justify="left", box=None, pad_edge=False,
              padding=(0, 1, 0, 0))
    for col in ("candidate", "slice", "p50", "p90", "caution"):
        s.add_column(col, justify="left" if col in ("candidate", "slice", "caution") else "right",
                     overflow="fold")
    for row in slice_rows(report.latency):
        s.add_row(*(escape(x) for x in row))
    print_table(console, s)
    slowest = [worst for c, lat in report.latency.items() if (worst := slowest_scenarios_line(c, lat))]
    turns = [TURN_SLICE_NOTE] if any(lat.by_turn_index for lat in report.latency.values()) else []
    for text in turns + ([*slowest, SLICES_ELSEWHERE] if slowest else []):
        print_wrapped(console, "  " + text, hang="    ")
    rows = paired_rows(report.paired_latency)
    if rows:
        p = Table(title="Paired latency (each call's median time to first word, ms; a − b, positive: a "
                  "slower)", title_justify="left")
        for col in ("pair", "difference [interval]", "scenarios", "a slower/b slower/ties"):
            p.add_column(col, overflow="fold")
        for row in rows:
            p.add_row(*(escape(x) for x in row))
        print_table(console, p)
