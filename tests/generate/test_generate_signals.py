"""``callbench generate`` stopped by SIGTERM (as ``timeout`` sends at a time limit) or Ctrl-C: the
line of a stop and 143 / 130, never the native-crash message or a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from waiting import finish, wait_until

from .conftest import AGENT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SRC = Path(__file__).parents[2] / "src"
SLOW = textwrap.dedent(
    """
    import os
    if os.environ.get("CALLBENCH_SUPERVISED"):
        import asyncio
        from callbench.models.scripted import generator as g
        orig = g.ScriptedGenerator.complete
        async def slow(self, request):
            open(os.environ["SLOW_MARK"], "a").close()  # the test waits for this file
            await asyncio.sleep(3600)
            return await orig(self, request)
        g.ScriptedGenerator.complete = slow
    """
)


def _child_of(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_generate_stopped_by_a_signal_is_a_stop_not_a_crash(
    tmp_path: Path, agent_bundle: Path, script: Path, signum: int
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CALLBENCH_NO_SUPERVISOR"}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{SRC}"
    mark = tmp_path / "requested"
    env["SLOW_MARK"] = str(mark)
    before = sorted(p.name for p in (agent_bundle / "agents" / AGENT / "scenarios").iterdir())
    proc = subprocess.Popen(
        [sys.executable, "-m", "callbench", "generate", str(agent_bundle), "--agent", AGENT,
         "--model", f"scripted:generator:{script}", "--n", "3", "--seed", "7"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_until(lambda: mark.exists() and bool(_child_of(proc.pid)), "the child's generator request",
                   proc=proc)
        proc.send_signal(signum)
        _, err = finish(proc, "generate to exit after the signal")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and "crash" not in err and "llama" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("stopped by SIGTERM" if signum == signal.SIGTERM else "interrupted (Ctrl-C)"), err
    # nothing half-written into the bundle
    assert sorted(p.name for p in (agent_bundle / "agents" / AGENT / "scenarios").iterdir()) == before
