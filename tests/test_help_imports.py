"""``callbench --help`` imports only what it needs to list the commands (it took 0.38 s
where it had taken 0.20 s, because the CLI imported the whole bundle stage, pydantic and
jsonschema at start-up). Checked with Python's own import log (``PYTHONPROFILEIMPORTTIME``: one
line per module imported, in the supervising parent and in the child that runs the command), so
the test measures no time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from waiting import limit

SRC = Path(__file__).resolve().parents[1] / "src"

HEAVY = ("pydantic", "jsonschema", "jinja2", "numpy", "yaml", "re2", "httpx2", "openai", "anthropic",
         "llama_cpp", "rich.console")
"""Libraries (and their submodules) that listing the commands does not need."""
OWN = {"callbench", "callbench.oserror", "callbench.runs", "callbench.runs.supervisor",
       "callbench.runs.stop_lines", "callbench.models", "callbench.models.local",
       "callbench.models.local.safeguards"}
"""callbench's modules outside ``callbench.cli`` that may be imported: the supervising entry point's
(``runs/supervisor.py``, its stop lines, and the local model's crash notes it reads) and a helper
of the CLI's."""


def _imported(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {k: v for k, v in os.environ.items() if k != "CALLBENCH_NO_SUPERVISOR"}
    env.update(PYTHONPATH=str(SRC), PYTHONPROFILEIMPORTTIME="1", COLUMNS="120")
    done = subprocess.run([sys.executable, "-m", "callbench", *args], capture_output=True, text=True,
                          env=env, timeout=limit(600))
    names = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    return done, names


def test_help_lists_every_command_without_heavy_imports() -> None:
    done, names = _imported("--help")
    assert done.returncode == 0, done.stderr
    for command in ("validate", "audit", "run", "demo", "grade", "report", "agreement", "labels",
                    "serve-local", "new-agent", "generate", "review", "import"):
        assert f"\n  {command} " in done.stdout or f"\n  {command}\n" in done.stdout, command
    assert "callbench.cli.app" in names  # the log was read: the app itself is there
    heavy = sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))
    assert heavy == []
    ours = sorted(n for n in names if n.startswith("callbench.") and not n.startswith("callbench.cli")
                  and n not in OWN)
    assert ours == []  # no stage of the pipeline (bundle, models, sim, grade, stats, report)
