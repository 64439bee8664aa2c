"""``callbench serve-backend``: one scenario's backend served on loopback in a real subprocess,
answering the generic and Vapi routes from the scenario's fixtures (a fresh backend per call id),
and stopped by SIGINT to its process group as a terminal's Ctrl-C does: it exits 0 with
"stopped", leaves no asyncio or aiohttp noise, and nothing listens on its port afterwards."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from waiting import limit, wait_exit

ROOT = Path(__file__).parents[2]
STARTER = ROOT / "src" / "callbench" / "examples" / "starter"
SECRET = "canary-serve-secret-77d1"
NOISE = ("Unclosed client session", "Unclosed connector", "Task exception was never retrieved", "Traceback")


def _post(url: str, body: Any) -> tuple[int, Any]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=limit(120.0)) as r:  # a safety net only
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _lines(stream: Any, out: queue.Queue[str]) -> None:
    for line in stream:
        out.put(line.rstrip("\n"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and SIGINT (POSIX)")
def test_serve_backend_answers_and_stops_on_ctrl_c() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLBENCH_WEBHOOK")}
    env.update(
        {"PYTHONPATH": str(ROOT / "src"), "CALLBENCH_WEBHOOK_SECRET": SECRET, "PYTHONWARNINGS": "default"}
    )
    cmd = [sys.executable, "-m", "callbench", "serve-backend", str(STARTER), "--agent", "clinic_appointments",
           "--scenario", "clinic_ortho_reschedule", "--port", "0"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    seen: list[str] = []

    def until(pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + limit(300.0)  # a safety net: starting the command is the slowest
        while time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                assert proc.poll() is None, (seen, proc.stderr.read() if proc.stderr else "")
                continue
            m = re.search(pattern, seen[-1])
            if m:
                return m
        raise AssertionError(f"no line matching {pattern!r} in {seen}")

    try:
        base = until(r"on (http://127\.0\.0\.1:\d+)$").group(1)
        generic = until(r"generic: POST (\S+)/<tool>").group(1)
        vapi = seen[-3].split("POST ", 1)[1]
        until(r"Ctrl-C stops")
        assert "$CALLBENCH_WEBHOOK_SECRET" in generic and SECRET not in "\n".join(seen)
        port = int(base.rsplit(":", 1)[1])
        # the scenario's reference path: verify_patient with the caller's details matches its fixture
        status, answer = _post(
            generic.replace("$CALLBENCH_WEBHOOK_SECRET", SECRET) + "/verify_patient",
            {"registered_mobile": "9829061473", "date_of_birth": "1973-11-05"},
        )
        assert status == 200 and answer["call_ended"] is False
        assert answer["result"]["verified"] is True and answer["result"]["patient_id"] == "P0027731"
        until(r"call 1 \[generic\] verify_patient -> authored$")
        # the same call's queue moves on: a second identical verify gets the next answer, not the first
        status, _ = _post(
            generic.replace("$CALLBENCH_WEBHOOK_SECRET", SECRET) + "/verify_patient",
            {"registered_mobile": "9829061473", "date_of_birth": "1973-11-05"},
        )
        assert status == 200
        until(r"call 1 \[generic\] verify_patient -> ")
        # a Vapi call id never seen opens call 2, with its own fresh backend
        msg = {"message": {"type": "tool-calls", "call": {"id": "vapi-call-1"},
                           "toolCallList": [{"id": "t1", "name": "end_call", "arguments": {}}]}}  # fmt: skip
        status, answer = _post(vapi.replace("$CALLBENCH_WEBHOOK_SECRET", SECRET), msg)
        assert status == 200 and answer["results"][0]["toolCallId"] == "t1"
        until(r"call 2 \[vapi\] end_call -> ")
        # a wrong secret touches nothing
        assert _post(f"{base}/wrong/vapi", msg)[0] == 404
        os.killpg(proc.pid, signal.SIGINT)
        wait_exit(proc, "serve-backend to exit after Ctrl-C")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = proc.stderr.read() if proc.stderr else ""
    reader.join(limit(60.0))  # it ends at the end of the output: every line is handed over
    assert not reader.is_alive(), "the command's output did not end after it exited"
    while not lines.empty():
        seen.append(lines.get())
    assert proc.returncode == 0, err
    assert [ln for ln in seen if ln.strip()][-1] == "stopped", (seen[-3:], err)
    assert [n for n in NOISE if n in err] == [], err
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "nope"], "--agent 'nope': not in the bundle"),
        (["--agent", "clinic_appointments", "--scenario", "nope"], "--scenario 'nope': not a scenario of"),
    ],
)
def test_serve_backend_refuses_an_unknown_agent_or_scenario(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["serve-backend", str(STARTER), *args])
    assert result.exit_code == 2 and message in result.output
