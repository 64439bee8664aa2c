"""The per-run sections of the terminal report below the leaderboard: the simulator and channel
ledger, the fault ledger, judge accuracy on known answers, and the judge validation with where
each candidate's overall score comes from. The rows and lines themselves are plain text made in
the model layer (:mod:`callbench.report.model.ledger`, :mod:`~callbench.report.model.faults`,
:mod:`~callbench.report.model.judge_accuracy`, :mod:`~callbench.report.model.text`), which the
HTML report shows too; this module only lays them out as rich tables, markup-escaped."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.audit.store import JudgeAccuracy, JudgeRole
from callbench.report.model.build import Report
from callbench.report.model.faults import FAULT_COLUMNS, RunFaults, fault_rows, fault_summary, note_footnote
from callbench.report.model.judge_accuracy import JUDGE_ACCURACY_COLUMNS, NOT_MEASURED, accuracy_rows
from callbench.report.model.ledger import LEDGER_COLUMNS, RunLedger, ledger_rows
from callbench.report.model.text import SOURCE_LABELS, SOURCES_NOTE, source_cells, validation_lines
from callbench.report.model.voice import (
    FIGURE_COLUMNS,
    RETENTION_COLUMNS,
    VoiceSection,
    figure_rows,
    retention_rows,
)
from callbench.report.terminal.fit import print_table, print_wrapped
from callbench.stats.sources import SOURCE_NAMES


def render_faults_terminal(faults: list[tuple[str, RunFaults | None]], console: Console) -> None:
    """Print the fault ledger: a table of requests, retries and faults per run and role, then one
    line per run with skipped and not-graded episodes by reason category."""
    rows = [row for run_id, f in faults if f is not None for row in fault_rows(run_id, f)]
    lines = [fault_summary(run_id, f) for run_id, f in faults if f is not None]
    if not rows and not lines:
        return
    t = Table(title="Fault ledger (provider and machine faults; never charged to a candidate)",
              title_justify="left")
    t.add_column("run", overflow="fold")
    for col in FAULT_COLUMNS:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*(escape(x) for x in row))
    if rows:
        print_table(console, t)
    else:
        console.print(f"[b]{t.title}[/b]")
    footnote = note_footnote([f for _, f in faults if f is not None])
    if footnote:
        print_wrapped(console, "  " + footnote)
    for line in lines:
        print_wrapped(console, "  " + line)


def render_ledger_terminal(ledgers: list[tuple[str, RunLedger | None]], console: Console) -> None:
    """Print the simulator and channel ledger table (one row per run, plus per-candidate rows
    where the candidates' ledgers differ)."""
    rows = [row for run_id, led in ledgers if led is not None for row in ledger_rows(run_id, led)]
    if not rows:
        return
    t = Table(
        title="Simulator and channel ledger (caller, channel and judge faults; see docs/validity.md)",
        title_justify="left",
    )
    t.add_column("run / candidate", overflow="fold")
    for col in LEDGER_COLUMNS:
        t.add_column(col, overflow="fold")
    for label, cells in rows:
        t.add_row(escape(label), *(escape(x) for x in cells))
    print_table(console, t)


def render_judge_accuracy_terminal(
    runs: list[tuple[str, dict[JudgeRole, JudgeAccuracy]]], console: Console
) -> None:
    """The judge-accuracy table, or the :data:`NOT_MEASURED` line when no judge of any run was audited."""
    rows = [row for run_id, acc in runs for row in accuracy_rows(run_id, acc)]
    if not rows:
        print_wrapped(console, NOT_MEASURED)
        return
    t = Table(
        title="Judge accuracy on known answers (callbench audit --judges; a judge not listed was not "
        "audited on this bundle with these settings)",
        title_justify="left",
    )
    for col in ["run / role", *JUDGE_ACCURACY_COLUMNS[1:]]:
        t.add_column(col, overflow="fold")
    for label, cells in rows:
        t.add_row(escape(label), *(escape(c) for c in cells))
    print_table(console, t)


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


def render_voice_terminal(section: VoiceSection | None, console: Console) -> None:
    """The voice channel's figures per candidate and each candidate's voice retention
    (:mod:`callbench.report.model.voice`); nothing when no turn went through the voice channel."""
    if section is None:
        return
    t = Table(title="Voice channel: what the recogniser did to the caller's turns (docs/voice.md)",
              title_justify="left")
    t.add_column("candidate", overflow="fold")
    for col in FIGURE_COLUMNS:
        t.add_column(col, justify="right")
    for cand, cells in figure_rows(section):
        t.add_row(escape(cand), *(escape(c) for c in cells))
    print_table(console, t)
    if section.retention:
        r = Table(title="Voice retention: voice score over text score on the same episodes "
                  "(paired bootstrap)", title_justify="left")
        r.add_column("candidate", overflow="fold")
        for col in RETENTION_COLUMNS:
            r.add_column(col, overflow="fold")
        for cand, cells in retention_rows(section):
            r.add_row(escape(cand), *(escape(c) for c in cells))
        print_table(console, r)
    for note in section.notes:
        print_wrapped(console, "  " + note)
