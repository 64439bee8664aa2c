"""`callbench run` when the Ray cluster cannot run an episode any more: one line and exit status 6
(the CLI's mapping only; the cluster side is tests/runs/test_ray_executor.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runs.ray_executor import EXIT_CLUSTER_LOST, ClusterLost

from .conftest import DAIRY


def test_a_lost_cluster_is_one_line_and_exit_6(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import callbench.runs.session as session

    line = ("the Ray cluster could not run an episode any more (ActorDiedError: The actor died); "
            "3 episode(s) finished are kept: run the same command to resume")

    async def lost(*_a: object, **_k: object) -> None:
        raise ClusterLost(line)

    monkeypatch.setattr(session, "run_and_grade", lost)
    result = CliRunner().invoke(app, [
        "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--out",
        str(tmp_path / "run"),
    ])
    assert EXIT_CLUSTER_LOST == 6 and result.exit_code == 6, result.output
    assert result.output.strip().splitlines()[-1] == f"error: {line}"
    assert "Traceback" not in result.output
