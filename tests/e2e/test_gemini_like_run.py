"""An episode scored with every role on ``openai:`` against a server with Gemini's schema rules and
error wording (tests/fakes/gemini_like_server.py): a 400 that never names
``response_format`` steps structured output down to the portable schema instead of stopping the
run at preflight, and a tool-schema 400 naming ``additionalProperties`` makes the tools portable."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from callbench.cli import app
from fakes.gemini_like_server import GeminiLikeServer
from waiting import limit

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIO = "lpg_en_late_delivery_no_second_booking"
ROLES = ("candidate", "caller", "task_judge", "conversation_judge")


def test_gemini_worded_400s_step_down_and_the_episode_scores(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-gemini-key-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with GeminiLikeServer() as server:
        # no request is meant to time out (a timeout would be one more logged request)
        common = {"base_url": server.url, "timeout_s": limit(120.0), "retry_base_delay_s": 0.01}
        settings = tmp_path / "roles.yaml"
        settings.write_text(yaml.safe_dump({r: {"spec": f"openai:gemini-{r}", **common} for r in ROLES}))
        out = tmp_path / "run"
        result = CliRunner().invoke(app, [
            "run", str(STARTER), "--candidate", "openai:gemini-candidate", "--caller", "openai:gemini-caller",
            "--task-judge", "openai:gemini-task_judge",
            "--conversation-judge", "openai:gemini-conversation_judge",
            "--settings", str(settings), "--scenarios", SCENARIO, "--max-turns", "3",
            "--concurrency", "1", "--seed", "1", "--out", str(out)])
        assert result.exit_code == 0, result.output
        log = list(server.log)
    csv_path = tmp_path / "episodes.csv"
    report = CliRunner().invoke(app, ["report", str(out), "--no-html", "--csv", str(csv_path)])
    assert report.exit_code == 0, report.output
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert [(r["status"], r["skip_reason"]) for r in rows] == [("scored", "")], rows
    rejected = [(role, msg) for role, status, msg in log if status == 400]
    assert rejected and all("response_format" not in msg for _, msg in rejected)
    # each role's client learns once: its 400s are all before its first 200 (preflight and run
    # may use separate clients, so at most two learning rounds per role)
    for role in ("caller", "task_judge", "conversation_judge", "candidate"):
        statuses = [status for r, status, _ in log if r == role]
        assert 200 in statuses, (role, statuses)
        assert statuses.count(400) <= 2, (role, statuses)
        assert statuses[statuses.index(200):].count(400) <= 1, (role, statuses)
