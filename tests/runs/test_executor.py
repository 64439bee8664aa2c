from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from callbench.bundle.models import Bundle
from callbench.grade.grader import load_episode_grades
from callbench.runfolder.store import RunStore
from callbench.runs.executor import RoleSpec, RunConflict, execute_run
from callbench.runs.session import run_and_grade
from callbench.trace import EndReason, load_trace
from waiting import wait_until

from .conftest import scripted_clients, scripted_config


async def test_run_saves_every_episode_and_grades_it(tmp_path: Path, dairy: Bundle) -> None:
    config = scripted_config(tmp_path / "run")
    manifest, gid = await run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy)
    planned = {k.episode_id for k in manifest.planned}
    assert manifest.completed == len(planned) == 2 * sum(len(a.scenarios) for a in dairy.agents.values())
    assert manifest.skipped == 0 and manifest.ended is not None
    assert manifest.bundle_hash == dairy.content_hash
    assert RunStore(tmp_path / "run").finished_ids() == planned
    assert gid is not None and manifest.grade_sets == [gid]
    grades = load_episode_grades(tmp_path / "run", gid)
    assert {g.episode_id for g in grades} == planned
    # The reference path meets every action check.
    for g in grades:
        checks = [i for i in g.items if i.source == "action_check"]
        assert checks and all(i.r == 1.0 for i in checks)
    # Secrets never reach the manifest.
    assert "sk-" not in (tmp_path / "run" / "manifest.json").read_text()


async def test_rerun_resumes_without_duplicates_and_extends(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    config = scripted_config(out, repeats=1)
    await run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy)
    first = {p.name: p.stat().st_mtime_ns for p in (out / "traces").iterdir()}
    m2, _ = await run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "traces").iterdir()} == first
    # More repeats extend the same run.
    config3 = scripted_config(out, repeats=2)
    m3, _gid = await run_and_grade(config3, clients=scripted_clients(config3, dairy), bundle=dairy)
    assert len(m3.planned) == 2 * len(m2.planned)
    assert m3.completed == len(m3.planned)
    for name, mtime in first.items():
        assert (out / "traces" / name).stat().st_mtime_ns == mtime


async def test_different_run_in_same_folder_is_refused(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    config = scripted_config(out, repeats=1)
    await execute_run(config, scripted_clients(config, dairy), bundle=dairy)
    other = config.model_copy(update={"caller": RoleSpec(spec="scripted:file:x.yaml"), "seed": 8})
    with pytest.raises(RunConflict, match="seed 7 vs 8"):
        await execute_run(other, scripted_clients(config, dairy), bundle=dairy)


async def test_identical_runs_give_identical_traces(tmp_path: Path, dairy: Bundle) -> None:
    for name in ("a", "b"):
        config = scripted_config(tmp_path / name, repeats=1)
        await execute_run(config, scripted_clients(config, dairy), bundle=dairy)
    a = sorted((tmp_path / "a" / "traces").iterdir())
    b = sorted((tmp_path / "b" / "traces").iterdir())
    assert [p.name for p in a] == [p.name for p in b]
    # the same content (timings are measurements and differ from run to run)
    def content(p: Path) -> str:
        return load_trace(p).canonical_json(content_only=True)

    assert all(content(x) == content(y) for x, y in zip(a, b, strict=True))
    assert all(load_trace(x).latency is not None for x in a)


SLOW_RUN = """
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from runs.conftest import scripted_clients, scripted_config
from callbench.bundle.validate.audits import load_bundle
from callbench.runs.session import run_and_grade
from callbench.runfolder import episode_files

hold, traces = Path({hold!r}), Path({out!r}) / "traces"

class Slow:
    def __init__(self, inner):
        self.inner, self.spec, self.settings = inner, inner.spec, inner.settings
    async def complete(self, request):
        await asyncio.sleep(0.05)
        # from the second saved episode on, wait while the test holds the run (it kills it then)
        while hold.exists() and traces.is_dir() and len(list(traces.glob("*.json.gz"))) >= 2:
            await asyncio.sleep(0.02)
        return await self.inner.complete(request)
    async def aclose(self):
        pass

config = scripted_config(Path({out!r}), repeats=6)
config.concurrency = 1
bundle = load_bundle(config.bundle_path)
clients = {{k: Slow(v) for k, v in scripted_clients(config, bundle).items()}}
asyncio.run(run_and_grade(config, clients=clients, bundle=bundle))
"""


async def test_kill_9_mid_run_loses_nothing_finished(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    hold = tmp_path / "hold"
    hold.touch()
    script = SLOW_RUN.format(tests=str(Path(__file__).parents[1]), out=str(out), hold=str(hold))
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ})
    traces = out / "traces"
    wait_until(lambda: traces.is_dir() and len(list(traces.glob("*.json.gz"))) >= 2, "two saved episodes",
               proc=proc, interval=0.02)
    assert proc.poll() is None, "the slow run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    saved = {p.name: p.read_bytes() for p in traces.glob("*.json.gz")}
    assert len(saved) >= 2
    for data in saved.values():
        json.loads(gzip.decompress(data))  # every saved trace is complete JSON
    config = scripted_config(out, repeats=6)
    manifest, gid = await run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy)
    assert manifest.completed == len(manifest.planned)
    assert not list(traces.glob(".*.tmp"))
    for name, data in saved.items():
        assert (traces / name).read_bytes() == data  # finished traces were kept, not redone
    assert gid is not None
    assert {g.episode_id for g in load_episode_grades(out, gid)} == {k.episode_id for k in manifest.planned}
    rows = RunStore(out).episode_rows()
    assert len(rows) == len(manifest.planned)
    assert all(r[1] != EndReason.SKIPPED.value for r in rows)


class _Probe:
    """Counts calls in flight across every role it wraps."""

    active = 0
    peak = 0
    judged = 0

    def __init__(self, inner, role: str) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.role = inner, role
        self.spec, self.settings = inner.spec, inner.settings

    async def complete(self, request):  # type: ignore[no-untyped-def]
        import asyncio

        cls = type(self)
        cls.active += 1
        cls.peak = max(cls.peak, cls.active)
        cls.judged += self.role.endswith("judge")
        try:
            await asyncio.sleep(0.002)
            return await self.inner.complete(request)
        finally:
            cls.active -= 1

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


@pytest.mark.parametrize(("limit", "overlaps"), [(1, False), (4, True)])
async def test_provider_limit_covers_the_judges_too(
    tmp_path: Path, dairy: Bundle, limit: int, overlaps: bool
) -> None:
    """Regression: judges grading finished episodes ran outside the provider's semaphore."""
    config = scripted_config(tmp_path / "run").model_copy(
        update={"concurrency": 4, "provider_limits": {"scripted": limit}}
    )
    probe = type("Probe", (_Probe,), {})
    clients = {k: probe(c, k) for k, c in scripted_clients(config, dairy).items()}
    manifest, _ = await run_and_grade(config, clients=clients, bundle=dairy)  # type: ignore[arg-type]
    assert manifest.completed == len(manifest.planned) and probe.judged > 0
    assert (probe.peak > 1) is overlaps and probe.peak <= limit


async def test_a_run_extended_by_other_code_is_not_official(
    tmp_path: Path, dairy: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: resuming rewrote the manifest with the newest code version and called the run
    official, though earlier traces came from other (even dirty) code."""
    out = tmp_path / "run"
    monkeypatch.setattr("callbench.runs.executor.git_state", lambda: ("abc", False))
    monkeypatch.setattr("callbench.runs.executor.code_version", lambda: "0.1.0+gabc")
    config = scripted_config(out, repeats=1)
    m1, _ = await run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy)
    assert m1.official is True and m1.code_versions == ["0.1.0+gabc"]
    m1b, _ = await run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy)
    assert m1b.official is True and m1b.code_versions == ["0.1.0+gabc"]  # same code resumes cleanly
    monkeypatch.setattr("callbench.runs.executor.code_version", lambda: "0.1.0+gdef.dirty")
    monkeypatch.setattr("callbench.runs.executor.git_state", lambda: ("def", True))
    config2 = scripted_config(out, repeats=2)
    m2, _ = await run_and_grade(config2, clients=scripted_clients(config2, dairy), bundle=dairy)
    assert m2.completed == len(m2.planned) and m2.skipped == 0
    assert m2.code_versions == ["0.1.0+gabc", "0.1.0+gdef.dirty"]
    assert m2.git_dirty is True and m2.official is False
    # going back to the clean code does not make the mixed run official again
    monkeypatch.setattr("callbench.runs.executor.code_version", lambda: "0.1.0+gabc")
    monkeypatch.setattr("callbench.runs.executor.git_state", lambda: ("abc", False))
    m3, _ = await run_and_grade(config2, clients=scripted_clients(config2, dairy), bundle=dairy)
    assert m3.official is False and m3.git_dirty is True
