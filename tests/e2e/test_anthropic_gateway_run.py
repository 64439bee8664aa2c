"""An episode scored with every role on ``anthropic:`` through an Anthropic-format gateway in front
of an OpenAI-style backend (tests/fakes/anthropic_gateway.py): the gateway 500s on
``system`` as text blocks with an opaque message, and the adapter steps down to a plain string once
per client instead of retrying the 500 as an outage until the preflight gives up."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runfolder import episode_files
from fakes.anthropic_gateway import AnthropicGateway
from fakes.fault_server import FaultServer
from waiting import limit

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIO = "lpg_en_late_delivery_no_second_booking"


def test_an_episode_scores_through_the_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-0123456789")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with FaultServer() as backend, AnthropicGateway(backend.url) as gateway:
        # no request is meant to time out (a timeout would be one more logged request)
        common = {"base_url": gateway.root, "timeout_s": limit(120.0), "retry_base_delay_s": 0.01}
        settings = tmp_path / "roles.yaml"
        specs = {"candidate": "anthropic:agent", "caller": "anthropic:caller",
                 "task_judge": "anthropic:judge", "conversation_judge": "anthropic:judge"}
        settings.write_text(yaml.safe_dump({r: {"spec": s, **common} for r, s in specs.items()}))
        out = tmp_path / "run"
        result = CliRunner().invoke(app, [
            "run", str(STARTER), "--candidate", "anthropic:agent", "--caller", "anthropic:caller",
            "--task-judge", "anthropic:judge", "--conversation-judge", "anthropic:judge",
            "--settings", str(settings), "--scenarios", SCENARIO, "--max-turns", "3",
            "--concurrency", "1", "--seed", "1", "--out", str(out)])
        assert result.exit_code == 0, result.output
        log = list(gateway.log)
    csv_path = tmp_path / "episodes.csv"
    report = CliRunner().invoke(app, ["report", str(out), "--no-html", "--csv", str(csv_path)])
    assert report.exit_code == 0, report.output
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert [(r["status"], r["skip_reason"]) for r in rows] == [("scored", "")], rows
    assert rows[0]["overall"] != ""
    # the Messages API needs a user turn first: first_user_message auto, recorded in the trace
    (trace_path,) = (out / "traces").glob("*.json.gz")
    first = json.loads(episode_files.read_text(trace_path))["messages"][1]
    assert (first["role"], first["content"], first.get("caller_turn")) == ("user", "[call connected]", None)
    # each client sends blocks until the second 500 in a row, then plain strings only
    lists = [status for kind, status in log if kind == "list"]
    assert lists and set(lists) == {500}
    strings = [status for kind, status in log if kind == "string"]
    assert len(strings) >= 4 and set(strings) == {200}
    # one client per role learns it, at most two 500s each (SHAPE_5XX_LIMIT), never a run of retries
    assert len(lists) <= 2 * 4
