"""End to end: a run against an OpenAI-compatible server on loopback, then an exact replay from the
response cache with the server gone ("works with an OpenAI-compatible server ... and
replays exactly from the cache")."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runfolder import episode_files
from callbench.trace import load_trace

DAIRY = Path(__file__).parents[1] / "sim" / "data" / "dairy_bundle"
SECRET = "sk-test-never-saved-7f3a9c"


class _Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        reply = {
            "id": f"cmpl-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": f"Test agent, turn {turn}. Noted, thank you.",
                    },
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100 + turn, "completion_tokens": 9, "total_tokens": 109 + turn},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _run(out: Path, cache: Path, mode: str) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(DAIRY),
            "--candidate",
            "openai:test-model",
            "--caller",
            "scripted:plan",
            "--task-judge",
            "scripted:met",
            "--conversation-judge",
            "scripted:met",
            "--out",
            str(out),
            "--cache",
            str(cache),
            "--cache-mode",
            mode,
            "--seed",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output


def test_run_against_openai_compatible_server_then_replay(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    cache = tmp_path / "cache.sqlite"
    _run(tmp_path / "live", cache, "read_write")
    assert _Handler.requests, "the server was never called"
    probe = _Handler.requests[0]  # the preflight: one request offering a tool, before any episode
    assert [t["function"]["name"] for t in probe["body"]["tools"]] == ["preflight_ping"]
    first = _Handler.requests[1]
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == f"Bearer {SECRET}"
    assert first["body"]["model"] == "test-model"
    assert first["body"]["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in first["body"]["tools"]} >= {"log_zero_supply_reason"}
    live = sorted((tmp_path / "live" / "traces").glob("*.json.gz"))
    assert live
    trace = json.loads(episode_files.read_text(live[0]))
    assert trace["end_reason"] in ("caller_done", "max_turns")
    assert any("Test agent, turn 0" in (m.get("content") or "") for m in trace["messages"])

    # Replay-only with the server unreachable: every trace's content the same (its timings are
    # marked replayed, not measured), no request made.
    n_requests = len(_Handler.requests)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    _run(tmp_path / "replay", cache, "replay_only")
    assert len(_Handler.requests) == n_requests
    replay = sorted((tmp_path / "replay" / "traces").glob("*.json.gz"))
    assert [p.name for p in replay] == [p.name for p in live]
    for a, b in zip(live, replay, strict=True):
        ta, tb = load_trace(a), load_trace(b)
        assert ta.canonical_json(content_only=True) == tb.canonical_json(content_only=True)
        assert tb.latency is not None
        assert {r.source for r in tb.latency.requests if r.role == "candidate"} == {"replayed"}

    # The key never reaches any saved file.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in episode_files.file_bytes(path), path
