"""A scored episode with every role on a real llama.cpp server through ``openai:``.

Starts ``callbench serve-local`` (llama-cpp-python's own server, the embedded 0.5B weights, the
local provider's CPU safeguards) on a free loopback port, then runs the starter scenario with the
cheapest prompt (the demo's choice) for two caller turns with the candidate, the caller and both
judges on it. The episode must be scored, and the candidate's tool use must show: a tool call that
reached the mock backend, or a visible ``tool_call_in_content`` output error.

Skipped unless llama-cpp-python with its ``[server]`` extra and the 0.5B weights are installed;
with ``CALLBENCH_REQUIRE_LOCAL=1`` (CI's ``[local]`` job) their absence fails instead. Minutes of
CPU: prompt reading runs at 55-90 tokens/s on 2 cores.
"""

from __future__ import annotations

import csv
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from waiting import limit

from .conftest import require_local_model

require_local_model(server=True)

from callbench.bundle.validate.audits import load_bundle  # noqa: E402
from callbench.cli import app  # noqa: E402
from callbench.runfolder import episode_files  # noqa: E402
from callbench.runs.demo import DEMO_MAX_TOKENS, choose_demo_scenarios, starter_path  # noqa: E402

SPEC = "openai:local-0.5b"
LOAD_TIMEOUT_S = limit(600.0)
TURNS = 2


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve-local exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)
    pytest.fail(
        f"serve-local did not answer within {LOAD_TIMEOUT_S:.0f} s:\n{log.read_text(errors='replace')}"
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, the settings file serve-local wrote); the server is stopped afterwards."""
    tmp = tmp_path_factory.mktemp("serve_local")
    port, log, settings = _free_port(), tmp / "server.log", tmp / "settings.yaml"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "callbench",
                "serve-local",
                "--port",
                str(port),
                "--model",
                "local:0.5b",
                "--write-settings",
                str(settings),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        _wait_ready(url, proc, log)
        text = log.read_text(errors="replace")
        assert f"serving local-0.5b at {url}" in text and f"model spec for every role: {SPEC}" in text
        yield url, settings
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_scored_episode_with_every_role_on_serve_local(server: tuple[str, Path], tmp_path: Path) -> None:
    url, settings_path = server
    written = yaml.safe_load(settings_path.read_text())
    assert {r: (e["spec"], e["base_url"]) for r, e in written.items()} == {
        r: (SPEC, url) for r in ("candidate", "caller", "task_judge", "conversation_judge")
    }
    assert written["candidate"]["parse_content_tool_calls"] is True  # the GGUF template: calls as text
    # the demo's output budgets keep the CPU time short; everything else is what serve-local printed
    budgets = {
        "candidate": DEMO_MAX_TOKENS["candidate"],
        "caller": DEMO_MAX_TOKENS["caller"],
        "task_judge": DEMO_MAX_TOKENS["judge"],
        "conversation_judge": DEMO_MAX_TOKENS["judge"],
    }
    roles = {r: {**e, "max_tokens": budgets[r], "seed": 1, "temperature": 0.2} for r, e in written.items()}
    run_settings = tmp_path / "roles.yaml"
    run_settings.write_text(yaml.safe_dump(roles))
    scenario = choose_demo_scenarios(load_bundle(starter_path()), 1)[0].id
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(starter_path()),
            "--candidate",
            SPEC,
            "--caller",
            SPEC,
            "--task-judge",
            SPEC,
            "--conversation-judge",
            SPEC,
            "--settings",
            str(run_settings),
            "--scenarios",
            scenario,
            "--max-turns",
            str(TURNS),
            "--concurrency",
            "1",
            "--seed",
            "1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    csv_path = tmp_path / "episodes.csv"
    report = CliRunner().invoke(app, ["report", str(out), "--no-html", "--csv", str(csv_path)])
    assert report.exit_code == 0, report.output
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    grades = [json.loads(episode_files.read_text(p)) for p in (out / "grades").glob("*/episodes/*.json.gz")]
    assert [(r["status"], r["skip_reason"]) for r in rows] == [("scored", "")], (
        [(r["status"], r["skip_reason"], r["not_graded_reason"], r["end_reason"]) for r in rows],
        [(g.get("judge_attempts"), g.get("judge_reasks")) for g in grades],
    )
    assert rows[0]["overall"] != ""
    (trace_path,) = (out / "traces").glob("*.json.gz")
    trace = json.loads(episode_files.read_text(trace_path))
    assert 1 <= len(trace["caller_turns"]) <= TURNS
    errors = [m["error"] for m in trace["messages"] if m["role"] == "assistant" and m.get("error")]
    assert trace["tool_events"] or any(e.startswith("tool_call_in_content") for e in errors), (
        "neither a tool call reached the backend nor was a tool_call_in_content error recorded: "
        + json.dumps([m for m in trace["messages"] if m["role"] == "assistant"])[:3000]
    )


def _chat(url: str, body: dict[str, object]) -> urllib.request.Request:
    return urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"})


def test_a_streamed_reply_is_not_cut_when_another_request_arrives(server: tuple[str, Path]) -> None:
    """llama-cpp-python's server, by default, ends a stream early (``data: [DONE]``, no finish
    reason) as soon as another request waits for the model; serve-local turns that off, so the
    stream ends with a finish reason of its own."""
    url, _ = server
    messages = [{"role": "user", "content": "Count from 1 to 200, one number per line."}]
    first = {"model": "local-0.5b", "messages": messages, "max_tokens": 120, "stream": True,
             "temperature": 0}
    second = {"model": "local-0.5b", "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4}
    answers: list[int] = []

    def ask_second() -> None:
        with urllib.request.urlopen(_chat(url, second), timeout=LOAD_TIMEOUT_S) as r:
            answers.append(r.status)

    other = threading.Thread(target=ask_second)
    finish: list[object] = []
    chunks = 0
    with urllib.request.urlopen(_chat(url, first), timeout=LOAD_TIMEOUT_S) as stream:
        for raw in stream:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunks += 1
            if chunks == 2:
                other.start()  # while the first reply streams: the second waits for the model
            choices = json.loads(line[5:])["choices"]
            finish += [c["finish_reason"] for c in choices if c.get("finish_reason")]
    other.join(timeout=LOAD_TIMEOUT_S)
    assert answers == [200]
    assert chunks > 2 and finish in (["length"], ["stop"]), (chunks, finish)
