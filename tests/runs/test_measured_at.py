"""The manifest records where latency was measured, once per invocation."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from callbench.bundle.models import Bundle
from callbench.runs.executor import execute_run

from .conftest import scripted_clients, scripted_config


async def test_each_invocation_records_machine_concurrency_note_and_budget(
        tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    config = scripted_config(out, repeats=1).model_copy(
        update={"latency_note": "eu-west-1, office fibre", "latency_budget_s": 0.65})
    m1 = await execute_run(config, scripted_clients(config, dairy), bundle=dairy)
    assert [(s.concurrency, s.note, s.cpu_count, s.platform) for s in m1.measured_at] == [
        (2, "eu-west-1, office fibre", os.cpu_count(), platform.platform())]
    assert m1.latency_budget_s == 0.65 and m1.measured_at[0].started == m1.started
    assert m1.measured_at[0].event_loop == "asyncio"  # the test's own loop (the CLI's: test_event_loop.py)
    again = config.model_copy(update={"concurrency": 5, "latency_note": None})
    m2 = await execute_run(again, scripted_clients(again, dairy), bundle=dairy)
    assert [(s.concurrency, s.note) for s in m2.measured_at] == [(2, "eu-west-1, office fibre"), (5, None)]
