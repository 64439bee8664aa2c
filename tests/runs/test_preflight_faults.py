"""Preflight faults, on the real command: a transient fault at preflight is
retried as an episode's would be (one or two empty replies, 5xx); only a fault that persists fails
the run, with its own cause; the preflight's faults are in the run's fault ledger and the report's
``runs[].faults``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakes.fault_server import FaultServer
from waiting import limit

from .conftest import DAIRY

SRC = Path(__file__).parents[2] / "src"


def _run(tmp: Path, kind: str, repeats: int) -> tuple[subprocess.CompletedProcess[str], list[str | None]]:
    """A run whose caller is served by a fake that answers the preflight probe with ``kind`` the
    first ``repeats`` times each request body is seen."""
    with FaultServer(rate=1.0, kinds=(kind,), repeats=repeats, roles=frozenset({"probe"})) as server:
        settings = tmp / "settings.yaml"
        settings.write_text(yaml.safe_dump({"caller": {
            "spec": "openai:fake-caller", "base_url": server.url, "retry_base_delay_s": 0.01}}))
        env = {**os.environ, "PYTHONPATH": str(SRC), "OPENAI_API_KEY": "sk-preflight", "COLUMNS": "200"}
        done = subprocess.run(
            [sys.executable, "-m", "callbench", "run", str(DAIRY), "--candidate", "scripted:reference",
             "--caller", "openai:fake-caller", "--task-judge", "scripted:met",
             "--conversation-judge", "scripted:met", "--settings", str(settings), "--out", str(tmp / "run")],
            env=env, capture_output=True, text=True, timeout=limit(600),
        )
        return done, [e.kind for e in server.log if e.role == "probe"]


@pytest.mark.parametrize(("kind", "repeats", "ledger_kind"),
                         [("null_content", 2, "empty_reply"), ("server_error", 3, "server_error")])
def test_transient_preflight_faults_are_retried_and_counted(
    tmp_path: Path, kind: str, repeats: int, ledger_kind: str
) -> None:
    done, probes = _run(tmp_path, kind, repeats)
    assert done.returncode == 0, done.stderr
    assert probes == [kind] * repeats + [None]
    saved = list((tmp_path / "run" / "faults" / "preflight").glob("*.json"))
    assert len(saved) == 1
    caller = json.loads(saved[0].read_text())["roles"]["caller"]
    assert caller["faults"] == {ledger_kind: repeats} and caller["requests"] == repeats + 1
    report = subprocess.run(
        [sys.executable, "-m", "callbench", "report", str(tmp_path / "run"),
         "--json", str(tmp_path / "r.json"), "--no-html"],
        env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True, timeout=limit(600),
    )
    assert report.returncode == 0, report.stderr
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert runs[0]["faults"]["roles"]["caller"]["faults"].get(ledger_kind) == repeats


def test_a_fault_that_persists_fails_with_its_real_cause(tmp_path: Path) -> None:
    done, probes = _run(tmp_path, "null_content", 100)
    assert done.returncode == 3
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert errors[0].startswith("error: preflight: caller openai:fake-caller: no answer: empty_reply")
    assert "structured JSON" not in errors[0] and "(3 tries)" in errors[0]
    assert len(probes) == 6  # 3 tries of the adapter's 2 (an empty reply is asked again once)
    assert not (tmp_path / "run").exists()  # a refused new run leaves nothing behind
