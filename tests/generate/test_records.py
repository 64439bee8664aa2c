"""Crash-safe records: every scenario file is committed with its manifest and
provenance entries, an interrupted batch resumes with the same command and ends byte for byte as
an uninterrupted one, and a machine-written scenario is never suggested as hand-authored."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import callbench.generate.records as records
from callbench.bundle.provenance import load_provenance
from callbench.generate.generator import GenerateError, GenerateOptions, generate_batch
from callbench.generate.manifest import load_manifest
from callbench.models.base import ModelRequest, ModelResponse
from callbench.models.scripted.generator import ScriptedGenerator

from .conftest import AGENT, REPAIRED, VALID, invoke, tree_bytes

OPTS = GenerateOptions(agent=AGENT, n=3, seed=7)


class _Stalling:
    """The scripted generator, except that the request of item ``stall_at`` never returns (a
    model still reading a long prompt)."""

    def __init__(self, script: Path, stall_at: int) -> None:
        self.inner = ScriptedGenerator(f"scripted:generator:{script}", None, script)
        self.spec, self.settings = self.inner.spec, self.inner.settings
        self.stall_at = stall_at
        self.stalled = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.context.turn == self.stall_at:
            self.stalled.set()
            await asyncio.Event().wait()
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        return None


def _every_file_recorded(root: Path) -> None:
    folder = root / "agents" / AGENT / "scenarios"
    on_disk = sorted(p.stem for p in folder.iterdir())
    m = load_manifest(root)
    prov = load_provenance(root, [])
    assert prov is not None
    assert sorted(s for s in m.scenarios if (root / m.scenarios[s].file).is_file()) == on_disk
    assert sorted(prov.scenarios) == on_disk
    code, out, _ = invoke("validate", str(root))
    assert code == 0 and "no problems" in out, out


def test_cancelled_batch_keeps_records_and_resumes_to_the_same_bytes(
    tmp_path: Path, agent_bundle: Path, script: Path
) -> None:
    whole = tmp_path / "whole"
    shutil.copytree(agent_bundle, whole)
    full = ScriptedGenerator(f"scripted:generator:{script}", None, script)
    asyncio.run(generate_batch(whole, full, OPTS))

    async def interrupted() -> None:
        client = _Stalling(script, stall_at=1)
        task = asyncio.create_task(generate_batch(agent_bundle, client, OPTS))
        await client.stalled.wait()
        task.cancel()  # what Ctrl-C does to asyncio.run's main task
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    _every_file_recorded(agent_bundle)
    m = load_manifest(agent_bundle)
    [batch] = m.batches.values()
    assert batch.written == [VALID] and batch.failed == []
    # the same command resumes: item 1 is skipped, items 2 and 3 are generated as they would be
    outcome = asyncio.run(generate_batch(agent_bundle, full, OPTS))
    assert outcome.resumed == 1 and outcome.written == [VALID, REPAIRED]
    assert tree_bytes(agent_bundle) == tree_bytes(whole)


def test_crash_before_the_file_rolls_back_and_regenerates(
    tmp_path: Path, agent_bundle: Path, script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = tmp_path / "whole"
    shutil.copytree(agent_bundle, whole)
    full = ScriptedGenerator(f"scripted:generator:{script}", None, script)
    asyncio.run(generate_batch(whole, full, OPTS))

    def killed(path: Path, text: str) -> None:
        raise KeyboardInterrupt  # the process dies after the records, before the file

    monkeypatch.setattr(records, "atomic_write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(generate_batch(agent_bundle, full, OPTS))
    monkeypatch.undo()
    assert not (agent_bundle / "agents" / AGENT / "scenarios" / f"{VALID}.yaml").exists()
    assert VALID in load_manifest(agent_bundle).scenarios  # records without the file: rolled back
    outcome = asyncio.run(generate_batch(agent_bundle, full, OPTS))
    assert outcome.rolled_back == [VALID] and outcome.written == [VALID, REPAIRED]
    _every_file_recorded(agent_bundle)
    assert tree_bytes(agent_bundle) == tree_bytes(whole)


def test_machine_written_scenario_is_never_suggested_as_hand_authored(
    agent_bundle: Path, script: Path
) -> None:
    asyncio.run(generate_batch(
        agent_bundle, ScriptedGenerator(f"scripted:generator:{script}", None, script), OPTS))
    (agent_bundle / "provenance.yaml").unlink()  # what an older version left after a kill
    with pytest.raises(GenerateError) as err:
        asyncio.run(generate_batch(
            agent_bundle, ScriptedGenerator(f"scripted:generator:{script}", None, script), OPTS))
    assert "not hand-authored" in str(err.value) and "--made hand_authored" not in str(err.value)
    code, out, _ = invoke("provenance", str(agent_bundle))
    assert code == 1 and "written by callbench generate" in out and "hand_authored" not in out
    code, out, err_text = invoke("provenance", str(agent_bundle), "--update", "--made", "hand_authored")
    assert code == 1 and "written by callbench generate" in err_text
    assert load_provenance(agent_bundle, []) is None  # nothing was recorded
