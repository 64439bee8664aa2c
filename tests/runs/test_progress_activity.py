"""Every phase of a run shows on the progress display: the run reports its
preflight and the grading of saved episodes to ``models.activity``; the CLI shows a second line
with the phase or the activity under way."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.models import Bundle
from callbench.cli import app
from callbench.models import activity
from callbench.runs.session import run_and_grade

from .conftest import DAIRY, scripted_clients, scripted_config


async def test_preflight_and_late_grading_are_reported(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    simulate_only = scripted_config(out, repeats=1).model_copy(update={"grade": False})
    await run_and_grade(simulate_only, clients=scripted_clients(simulate_only, dairy), bundle=dairy)
    seen: list[str | None] = []
    config = scripted_config(out, repeats=1).model_copy(update={"preflight": True})
    with activity.listening(lambda a: seen.append(None if a is None else a.describe())):
        await run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy)
    assert seen[0] == "preflight: one minimal request to each network role model" and seen[1] is None
    n = sum(len(a.scenarios) for a in dairy.agents.values())
    assert [s for s in seen if s and s.startswith("grading")] == [
        f"grading saved episodes not graded yet ({i} of {n})" for i in range(1, n + 1)]
    assert seen[-1] is None


def test_the_cli_shows_the_phase_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(app, [
        "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--out", str(tmp_path / "r"),
    ])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("episodes "))
    assert lines[at + 1].startswith("  episodes: simulating and grading")
    assert lines[at + 2].startswith("run folder:")
