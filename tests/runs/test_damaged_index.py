"""A run index that is not a SQLite database any more (overwritten, truncated by a full disk):
the trace files are the source of truth, so a resume sets the damaged file aside (kept, never
deleted) and indexes the files again. Before, the resume stopped with a ``sqlite3.DatabaseError``
traceback ("file is not a database") and the run could not go on without deleting the file by
hand."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from callbench.bundle.models import Bundle
from callbench.report.model.load import load_run
from callbench.runfolder.store import INDEX, RunStore
from callbench.runs.session import run_and_grade

from .conftest import scripted_clients, scripted_config


def _run(out: Path, dairy: Bundle) -> None:
    config = scripted_config(out, repeats=1)
    asyncio.run(run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy))


def _rows(out: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(out / INDEX) as db:
        return sorted(db.execute("SELECT episode_id, trace_sha256 FROM episodes").fetchall())


@pytest.mark.parametrize("damage", [b"garbage\n", b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_damaged_index_is_set_aside_and_rebuilt_on_resume(
    tmp_path: Path, dairy: Bundle, damage: bytes
) -> None:
    out = tmp_path / "run"
    _run(out, dairy)
    before = _rows(out)
    assert before
    for extra in ("-wal", "-shm"):
        (out / f"{INDEX}{extra}").unlink(missing_ok=True)
    (out / INDEX).write_bytes(damage)
    _run(out, dairy)  # the same command again: a resume
    assert _rows(out) == before
    (aside,) = out.glob(f"{INDEX}.damaged-*")
    assert aside.read_bytes() == damage  # nothing is thrown away
    assert load_run(out, workers=1).warnings == []


def test_a_damaged_index_is_rebuilt_by_reconcile(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    _run(out, dairy)
    before = _rows(out)
    (out / INDEX).write_bytes(b"not a database")
    store = RunStore(out)
    found = store.reconcile_index()
    store.close()
    assert found.reindexed == len(before) and found.trusted == 0 and _rows(out) == before
