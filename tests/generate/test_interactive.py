"""The questions ``new-agent`` and ``review`` ask when run in a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import callbench.cli.generate
from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.generate.manifest import load_manifest

from .conftest import AGENT, DATA, REPAIRED, VALID, invoke


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(callbench.cli.generate, "_terminal", lambda: True)


def test_new_agent_asks_for_call_ending_tools(tmp_path: Path, terminal: None) -> None:
    result = CliRunner().invoke(app, [
        "new-agent", str(tmp_path / "b"), "--prompt", str(DATA / "water_prompt.md"),
        "--tools", str(DATA / "water_tools.json"), "--id", AGENT], input="end_call\nstatus=ended\n")
    assert result.exit_code == 0, result.output
    assert "tools: verify_consumer, log_complaint, get_tanker_slots, book_tanker, end_call" in result.output
    [ending] = load_bundle(tmp_path / "b").agents[AGENT].config.call_ending_tools
    assert ending.tool == "end_call" and ending.success["status"].evaluate("ended").ok


def test_review_asks_for_each_scenario(agent_bundle: Path, script: Path, terminal: None) -> None:
    invoke("generate", str(agent_bundle), "--agent", AGENT, "--model", f"scripted:generator:{script}",
           "--n", "3", "--seed", "7")
    # sorted by id: the repaired scenario first (rejected), then the valid one (accepted)
    result = CliRunner().invoke(app, ["review", str(agent_bundle)], input="Meera Rao\nr\na\n")
    assert result.exit_code == 0, result.output
    assert f"{REPAIRED}: rejected" in result.output and f"{VALID}: accepted" in result.output
    reviews = {sid: r.review for sid, r in load_manifest(agent_bundle).scenarios.items()}
    assert reviews[REPAIRED].status == "rejected" and reviews[VALID].status == "accepted"
    assert reviews[VALID].by == "Meera Rao"
