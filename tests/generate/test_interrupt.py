"""Ctrl-C stops ``callbench generate`` at once, even while a model computation that cannot be
cancelled (a local model in a worker thread) is still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from waiting import finish, read_until

from .conftest import AGENT

DRIVER = """
import asyncio, concurrent.futures, faulthandler, signal, sys, threading
import callbench.models.registry as registry
from callbench.cli import app
from callbench.models.base import ModelSettings

pool = concurrent.futures.ThreadPoolExecutor(1)
faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it hangs, if it ever does

class Stuck:
    spec, settings = "openai:stuck", ModelSettings()

    async def complete(self, request):
        print("STALLED", flush=True)
        return await asyncio.get_running_loop().run_in_executor(pool, threading.Event().wait)

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
        read_until(proc.stdout, "STALLED", "the model request to start")
        proc.send_signal(signal.SIGINT)
        # the worker thread never returns: an exit that waited for it would fail this wait
        _, err = finish(proc, "the command to exit after Ctrl-C", timeout=300,
                        dump_signal=signal.SIGUSR1)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Run the same command to resume" in err and "Traceback" not in err
