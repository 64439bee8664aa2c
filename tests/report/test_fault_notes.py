"""Replies used with something read in place of what they lacked (``usage_missing``: no token counts,
read as 0) appear in the terminal's fault table like the fault kinds, marked as notes."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from callbench.models.faults import FaultLedger, RoleFaults
from callbench.report.model.build import build_report
from callbench.report.model.faults import RunFaults, fault_rows
from callbench.report.model.load import load_runs
from callbench.report.terminal.sections import render_faults_terminal
from callbench.report.terminal.tables import render_terminal
from callbench.trace import atomic_write_text

MakeRun = Callable[..., Path]


def test_fault_rows_list_notes_beside_faults() -> None:
    f = RunFaults(roles={
        "candidate": RoleFaults(requests=9, retries=1, faults={"rate_limit": 1}, notes={"usage_missing": 3}),
        "caller": RoleFaults(requests=4, notes={"usage_missing": 4}),
    })
    rows = fault_rows("r1", f)
    assert rows[0] == ["r1", "candidate", "9", "1", "1", "rate_limit 1, usage_missing 3 (note)"]
    assert rows[1] == ["r1", "caller", "4", "0", "0", "usage_missing 4 (note)"]


def test_usage_missing_reaches_the_terminal_fault_table(make_run: MakeRun) -> None:
    rd = make_run(candidates=("a",), agents=1, scenarios=2, repeats=1)
    for eid in ("a__ag0__sc0__r0", "a__ag0__sc1__r0"):
        ledger = FaultLedger(roles={"candidate": RoleFaults(requests=3, notes={"usage_missing": 2})})
        atomic_write_text(rd / "faults" / f"{eid}.json", ledger.model_dump_json())
    report = build_report(load_runs([rd]), n_samples=20)
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=300))
    text = buf.getvalue()
    table = text[text.index("Fault ledger"):]
    row = next(line for line in table.splitlines() if line.startswith("│ r1") and "candidate" in line)
    assert "usage_missing 4 (note)" in row and "│ 6 " in row
    buf = io.StringIO()
    render_faults_terminal([("r1", report.runs[0].faults)], Console(file=buf, width=300))
    assert "usage_missing 4 (note)" in buf.getvalue()
    assert "replies used with token counts read as 0" in " ".join(buf.getvalue().split())
