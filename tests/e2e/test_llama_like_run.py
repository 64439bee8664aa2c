"""End to end against the loopback fake of llama-cpp-python's server (tests/fakes/llama_like_server.py),
every role on ``openai:``: the caller and judges negotiate structured output down to json_object,
tool-call messages are resent with ``""`` content, and tool calls returned as text are either
executed (``parse_content_tool_calls``) or recorded and reported as the candidate's output errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runfolder import episode_files
from fakes.llama_like_server import LlamaLikeServer
from waiting import limit

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIO = "lpg_en_late_delivery_no_second_booking"
SPEC = "openai:local-0.5b"


def _run(tmp: Path, url: str, parse: bool) -> tuple[Path, object]:
    # no request is meant to time out, however loaded the machine
    common = {"spec": SPEC, "base_url": url, "timeout_s": limit(120.0), "retry_base_delay_s": 0.01}
    roles = {r: dict(common) for r in ("candidate", "caller", "task_judge", "conversation_judge")}
    roles["candidate"]["parse_content_tool_calls"] = parse
    settings = tmp / "roles.yaml"
    settings.write_text(yaml.safe_dump(roles))
    out = tmp / "run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(STARTER),
            "--candidate",
            SPEC,
            "--caller",
            SPEC,
            "--task-judge",
            SPEC,
            "--conversation-judge",
            SPEC,
            "--settings",
            str(settings),
            "--scenarios",
            SCENARIO,
            "--max-turns",
            "2",
            "--concurrency",
            "1",
            "--out",
            str(out),
        ],
    )
    return out, result


def _trace(out: Path) -> dict:
    (path,) = (out / "traces").glob("*.json.gz")
    return json.loads(episode_files.read_text(path))


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_tool_calls_as_text_are_executed_when_parsing_is_on(tmp_path: Path) -> None:
    with LlamaLikeServer(calls_as="content") as server:
        out, result = _run(tmp_path, server.url, parse=True)
        log = list(server.log)
    assert result.exit_code == 0, getattr(result, "output", "")
    trace = _trace(out)
    assert trace["end_reason"] != "skipped", trace.get("skip_reason")
    assert trace["tool_events"], "the parsed call never reached the backend"
    assert all(not (m.get("error") or "") for m in trace["messages"])
    # json_schema was refused once per JSON role client, then json_object was sent with the schema
    rejected = [e for e in log if e.status == 500]
    assert rejected and all(
        "response_format" in e.body or any(m.get("content") is None for m in e.body["messages"])
        for e in rejected
    )
    formats = {
        e.body["response_format"]["type"] for e in log if e.status == 200 and "response_format" in e.body
    }
    assert formats == {"json_object"}
    # the tool call went back to the server as a structured call with "" content
    resent = [m for e in log if e.status == 200 for m in e.body["messages"] if m.get("tool_calls")]
    assert resent and all(m["content"] == "" for m in resent)
    grades = list((out / "grades").glob("*/episodes/*.json.gz"))
    assert len(grades) == 1 and not json.loads(episode_files.read_text(grades[0]))["not_graded"]


def test_tool_calls_as_text_are_visible_output_errors_by_default(tmp_path: Path) -> None:
    with LlamaLikeServer(calls_as="content") as server:
        out, result = _run(tmp_path, server.url, parse=False)
    assert result.exit_code == 0, getattr(result, "output", "")
    trace = _trace(out)
    assert trace["tool_events"] == []
    errors = [m["error"] for m in trace["messages"] if m["role"] == "assistant" and m.get("error")]
    assert errors and all(e.startswith("tool_call_in_content:") for e in errors)
    assert '"name": "' in errors[0] and "parse_content_tool_calls" in errors[0]
    report_json = tmp_path / "report.json"
    report = CliRunner().invoke(app, ["report", str(out), "--no-html", "--json", str(report_json)])
    assert report.exit_code == 0, report.output
    faults = json.loads(report_json.read_text())["runs"][0]["faults"]
    # the report adds the preflight's ledger (faults/preflight/): the candidate's
    # probe got its call as text too
    pre = sum(c["faults"].get("tool_call_in_content", 0)
              for path in (out / "faults" / "preflight").glob("*.json")
              for r, c in json.loads(path.read_text())["roles"].items() if r == "candidate")
    assert pre == 1
    assert faults["tool_calls_in_content"] == len(errors)  # messages of episodes
    assert faults["roles"]["candidate"]["faults"]["tool_call_in_content"] == len(errors) + pre
