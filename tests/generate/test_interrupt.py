"""Ctrl-C stops ``callbench generate`` at once, even while a model computation that cannot be
cancelled (a local model in a worker thread) is still running (issue 26 item 4)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from .conftest import AGENT

DRIVER = """
import asyncio, concurrent.futures, sys, time
import callbench.models.registry as registry
from callbench.cli import app
from callbench.models.base import ModelSettings

pool = concurrent.futures.ThreadPoolExecutor(1)

class Stuck:
    spec, settings = "openai:stuck", ModelSettings()

    async def complete(self, request):
        print("STALLED", flush=True)
        return await asyncio.get_running_loop().run_in_executor(pool, time.sleep, 900)

    async def aclose(self):
        return None

registry.create_client = lambda *a, **k: Stuck()
app(["generate", sys.argv[1], "--agent", sys.argv[2], "--model", "openai:stuck", "--n", "1"])
"""


def test_ctrl_c_stops_a_batch_waiting_on_a_thread_bound_model(tmp_path: Path, agent_bundle: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(driver), str(agent_bundle), AGENT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "STALLED" in line:
                break
        proc.send_signal(signal.SIGINT)
        # the worker thread sleeps 900 s: an exit that waited for it would not come within the wait
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Run the same command to resume" in err and "Traceback" not in err
