"""Runs at scale: the index reconciled cheaply on resume, counts kept incrementally,
the manifest not rewritten per episode, and a kill -9 of a 1,000-episode run resumed exactly."""

from __future__ import annotations

import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from callbench.bundle.models import Bundle
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore, text_sha256
from callbench.runs import saving as saving_module
from callbench.runs.executor import RunCounts, execute_run
from callbench.trace import EndReason
from waiting import wait_until

from .conftest import scripted_clients, scripted_config


def _no_grade(out: Path, repeats: int):  # type: ignore[no-untyped-def]
    config = scripted_config(out, repeats=repeats)
    config.grade = False
    return config


async def _run(out: Path, dairy: Bundle, repeats: int = 4):  # type: ignore[no-untyped-def]
    config = _no_grade(out, repeats)
    return await execute_run(config, scripted_clients(config, dairy), bundle=dairy)


def _rows(out: Path) -> dict[str, tuple]:  # type: ignore[type-arg]
    with sqlite3.connect(out / "index.sqlite") as db:
        return {r[0]: r[1:] for r in db.execute(
            "SELECT episode_id, trace_sha256, trace_size, trace_mtime_ns FROM episodes")}


async def test_index_records_size_time_and_the_hash_of_the_file_text(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    manifest = await _run(out, dairy)
    rows = _rows(out)
    assert set(rows) == {k.episode_id for k in manifest.planned}
    for eid, (sha, size, mtime) in rows.items():
        path = out / "traces" / f"{eid}.json.gz"
        text = episode_files.read_text(path)
        assert sha == text_sha256(text)  # the file's text (timings included)
        trace = RunStore(out).load_trace(eid)
        assert trace.sha256() == text_sha256(trace.canonical_json(content_only=True))
        assert (size, mtime) == (path.stat().st_size, path.stat().st_mtime_ns)
        assert "\n" not in text.removesuffix("\n")  # compact canonical JSON (C encoder)
    with sqlite3.connect(out / "index.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_resume_trusts_unchanged_traces_and_reruns_a_missing_one(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    manifest = await _run(out, dairy)
    ids = sorted(k.episode_id for k in manifest.planned)
    gone = out / "traces" / f"{ids[0]}.json.gz"
    kept = {p.name: p.read_bytes() for p in (out / "traces").glob("*.json.gz") if p != gone}
    gone.unlink()
    store = RunStore(out)
    found = store.reconcile_index()
    store.close()
    assert (found.trusted, found.dropped, found.reindexed, found.rehashed) == (len(ids) - 1, 1, 0, 0)
    manifest = await _run(out, dairy)
    assert manifest.completed == len(ids) and gone.is_file()
    assert all((out / "traces" / n).read_bytes() == b for n, b in kept.items())
    assert set(_rows(out)) == set(ids)


async def test_a_trace_saved_without_its_index_row_is_indexed(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    await _run(out, dairy)
    before = _rows(out)
    with sqlite3.connect(out / "index.sqlite") as db:
        db.execute("DELETE FROM episodes WHERE episode_id = ?", (min(before),))  # kill after the rename
    store = RunStore(out)
    found = store.reconcile_index()
    store.close()
    assert found.reindexed == 1 and _rows(out) == before


async def test_a_touched_but_equal_trace_is_rehashed_not_reparsed(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    await _run(out, dairy)
    eid = min(_rows(out))
    path = out / "traces" / f"{eid}.json.gz"
    os.utime(path, ns=(1, 1))  # e.g. a copy that did not keep times
    store = RunStore(out)
    found = store.reconcile_index()
    store.close()
    assert found.rehashed == 1 and found.reindexed == 0
    assert _rows(out)[eid][2] == path.stat().st_mtime_ns == 1


async def test_a_corrupt_trace_is_named_on_resume(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    await _run(out, dairy)
    eid = min(_rows(out))
    path = out / "traces" / f"{eid}.json.gz"
    size = path.stat().st_size
    path.write_text("{" + "x" * (size - 1), encoding="utf-8")  # same size, other content
    with pytest.raises(ValueError, match=rf"{eid}\.json\.gz: not a readable trace.*delete it"):
        await _run(out, dairy)


async def test_an_index_made_before_size_columns_is_upgraded_and_checked(
    tmp_path: Path, dairy: Bundle
) -> None:
    out = tmp_path / "run"
    await _run(out, dairy)
    before = _rows(out)
    with sqlite3.connect(out / "index.sqlite") as db:
        db.execute("ALTER TABLE episodes DROP COLUMN trace_size")
        db.execute("ALTER TABLE episodes DROP COLUMN trace_mtime_ns")
    store = RunStore(out)
    found = store.reconcile_index()
    store.close()
    assert found.reindexed == len(before) and _rows(out) == before


def test_run_counts_replace_an_episodes_earlier_status() -> None:
    skipped = EndReason.SKIPPED.value
    counts = RunCounts({"a", "b", "c"}, [("a", skipped, "infrastructure: timeout"), ("z", "hang_up", None)])
    counts.record("b", skipped, "candidate_error: bad")
    counts.record("a", "hang_up", None)  # the infrastructure skip was run again and finished
    from callbench.runfolder.manifest import RunManifest

    m = RunManifest.model_construct()
    counts.apply(m)
    assert (m.completed, m.skipped, m.skips_by_reason) == (1, 1, {"candidate_error": 1})


async def test_the_manifest_is_not_rewritten_per_episode(
    tmp_path: Path, dairy: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    real = RunStore.save_manifest

    def counted(self: RunStore, manifest):  # type: ignore[no-untyped-def]
        writes.append(manifest.completed)
        real(self, manifest)

    monkeypatch.setattr(RunStore, "save_manifest", counted)
    manifest = await _run(tmp_path / "run", dairy, repeats=30)
    assert writes == [0, 30]  # planned, then ended
    assert manifest.executors == ["local"]
    monkeypatch.setattr(saving_module, "CHECKPOINT_SECONDS", 0.0)
    writes.clear()
    await _run(tmp_path / "run", dairy, repeats=33)  # extended: a checkpoint after each new episode
    assert writes == [30, 31, 32, 33, 33]


KILLED_RUN = """
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from runs.conftest import scripted_clients, scripted_config
from callbench.bundle.validate.audits import load_bundle
from callbench.runs.executor import execute_run

config = scripted_config(Path({out!r}), repeats={repeats})
config.grade = False
config.concurrency = 8
bundle = load_bundle(config.bundle_path)
asyncio.run(execute_run(config, scripted_clients(config, bundle), bundle=bundle))
"""


@pytest.mark.slow  # a 1,000-episode run killed and resumed: about 6 s idle
async def test_resume_after_kill_9_of_a_1000_episode_run_gives_exactly_1000_traces(
    tmp_path: Path, dairy: Bundle
) -> None:
    out = tmp_path / "run"
    repeats = 1000 // len(dairy.scenarios())
    assert repeats * len(dairy.scenarios()) == 1000
    script = KILLED_RUN.format(tests=str(Path(__file__).parents[1]), out=str(out), repeats=repeats)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ})
    traces = out / "traces"
    wait_until(lambda: traces.is_dir() and sum(not n.startswith(".") for n in os.listdir(traces)) >= 100,
               "100 saved episodes", proc=proc, interval=0.01)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    saved = {p.name: p.read_bytes() for p in traces.glob("*.json.gz")}
    assert 100 <= len(saved) < 1000
    for data in saved.values():
        json.loads(gzip.decompress(data))
    manifest = await _run(out, dairy, repeats=repeats)
    files = sorted(p.name for p in traces.iterdir())
    assert len(files) == 1000 and not [n for n in files if n.startswith(".")]
    assert manifest.completed == 1000 and manifest.skipped == 0 and manifest.ended is not None
    assert all((traces / n).read_bytes() == b for n, b in saved.items())
    assert len(_rows(out)) == 1000
