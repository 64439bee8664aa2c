"""Ctrl-C during an aiohttp request (the SDKs' default transport, ``models/remote/transport.py``)
in a real ``callbench run`` against the loopback fault server: the candidate's requests hang
(no answer before the client's timeout), SIGINT goes to the command's whole process group as a
terminal's Ctrl-C does, and the command must stop with 130 and its one stop line, with none of
asyncio's or aiohttp's leftovers on stderr ("Unclosed client session", "Unclosed connector",
"Task exception was never retrieved", a traceback) and no secret."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fakes.fault_server import FaultServer
from waiting import finish, limit, wait_until

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SRC = Path(__file__).parents[2] / "src"
KEY = "sk-canary-envkey-1111"
NOISE = ("Unclosed client session", "Unclosed connector", "Task exception was never retrieved",
         "Traceback", "was never awaited", "Event loop is closed")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and SIGINT (POSIX)")
@pytest.mark.parametrize("transport", ["aiohttp", "httpx2"])
def test_ctrl_c_during_a_request_leaves_no_noise(tmp_path: Path, transport: str) -> None:
    # the answer is withheld for longer than any wait here: the Ctrl-C always finds the request in flight
    with FaultServer(rate=1.0, kinds=("hang",), hang_s=limit(1800.0), roles=frozenset({"candidate"}),
                     lifetime_s=limit(3600.0)) as server:
        # no attempt is meant to time out: the candidate's is ended by the Ctrl-C, the others answer
        common = {"timeout_s": limit(600.0), "max_attempts": 2, "retry_base_delay_s": 0.01}
        settings = {role: {"spec": f"openai:fake-{role}", "base_url": server.url, **common}
                    for role in ("candidate", "caller", "task_judge", "conversation_judge")}
        path = tmp_path / "settings.yaml"
        path.write_text(yaml.safe_dump(settings), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
        env.update({"PYTHONPATH": str(SRC), "COLUMNS": "200", "OPENAI_API_KEY": KEY,
                    "CALLBENCH_HTTP_TRANSPORT": transport, "PYTHONWARNINGS": "default"})
        proc = subprocess.Popen(
            ["nice", "-n", "19", sys.executable, "-m", "callbench", "run", str(STARTER),
             "--candidate", "openai:fake-candidate", "--caller", "openai:fake-caller",
             "--task-judge", "openai:fake-task_judge",
             "--conversation-judge", "openai:fake-conversation_judge",
             "--settings", str(path), "--out", str(tmp_path / "run"), "--limit", "2", "--max-turns", "4"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            wait_until(lambda: any(e.kind == "hang" for e in server.log),
                       "a candidate request to reach the server", proc=proc)
            time.sleep(1.0)  # not a guess that matters: the answer is withheld however long this takes
            os.killpg(proc.pid, signal.SIGINT)
            out, err = finish(proc, "the run to exit after Ctrl-C")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 130, (proc.returncode, err)
    assert "run the same command to resume" in err, err
    noise = [n for n in NOISE if n in err or n in out]
    assert noise == [], err
    assert KEY not in err and KEY not in out
