"""A grade file edited after grading is reported with a warning, as an edited trace is."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hostile.helpers import SCENARIO, STARTER
from typer.testing import CliRunner

from callbench.cli import app
from callbench.report.model.load import load_run
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore, recorded_grade_hashes


def _run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "run", str(STARTER), "--candidate", "scripted:talk", "--caller", "scripted:plan",
        "--task-judge", "scripted:not_met", "--conversation-judge", "scripted:not_met",
        "--scenarios", SCENARIO, "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output[-2000:]
    return out


def test_edited_grade_file_is_warned_about(tmp_path: Path) -> None:
    out = _run(tmp_path)
    run = load_run(out)
    assert run.warnings == []
    gs = run.grade_set.grade_set_id
    (eid,) = recorded_grade_hashes(out, gs)
    path = next((out / "grades" / gs / "episodes").iterdir())
    data = json.loads(episode_files.read_text(path))
    assert data["overall"] != 100
    data["overall"] = data["task_score"] = data["conversation_score"] = 100.0
    episode_files.write_text(path.parent, eid, json.dumps(data) + "\n")
    store = RunStore(out)
    store.reconcile_index()  # a resume's reconcile keeps the record as graded
    store.close()
    again = load_run(out)
    assert len(again.warnings) == 1
    assert "changed after grading" in again.warnings[0] and str(path) in again.warnings[0]



def test_invalid_tool_calls_are_counted_per_candidate(tmp_path: Path) -> None:
    """The report's fault summary (JSON ``runs[].faults`` and terminal) counts tool calls outside
    their schema per candidate."""
    from callbench.report.model.faults import fault_summary

    bad = {"identifier_type": "passport", "identifier": "NB21547790", "card_last4": "0719",
           "date_of_birth": "1967-05-11", "note": "x"}
    script = tmp_path / "hostile.json"
    script.write_text(json.dumps({"candidate": [
        {"content": "Hello."},
        {"tool_calls": [{"name": "verify_customer", "arguments": bad}]},
        {"tool_calls": [{"name": "verify_customer", "arguments": {**bad, "identifier_type": "customer_id"}}]},
        {"content": "Goodbye."},
    ]}))
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "run", str(STARTER), "--candidate", f"scripted:file:{script}", "--candidate", "scripted:talk",
        "--caller", "scripted:plan", "--task-judge", "scripted:met", "--conversation-judge", "scripted:met",
        "--scenarios", SCENARIO, "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output[-2000:]
    run = load_run(out)
    assert run.faults is not None
    assert run.faults.invalid_tool_calls == {f"scripted:file:{script}": 2}
    assert f"tool calls outside their schema scripted:file:{script} 2" in fault_summary("r", run.faults)
