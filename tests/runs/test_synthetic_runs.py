"""benchmarks/synthetic_runs.py: synthetic run folders that report and grade
accept, deterministic from the seed, with real shapes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import pytest

from callbench.grade.grader import grade_run
from callbench.report.model.load import load_run
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore, recorded_trace_hashes, text_sha256
from fakes.synthetic import synthetic_runs


@pytest.fixture(scope="module")
def synthetic() -> ModuleType:
    return synthetic_runs()


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and not p.name.startswith("index.sqlite")}


def test_report_loads_every_episode_with_no_warning(synthetic: ModuleType, tmp_path: Path) -> None:
    run = synthetic.make_synthetic_run(tmp_path / "syn", 14, seed=3, candidates=2)
    data = load_run(run)
    assert data.warnings == []
    assert len(data.records) == 14
    assert len({r.candidate for r in data.records}) == 2
    # 7 scenarios (14 episodes / 2 candidates), every candidate's episode of each
    assert len({r.scenario_id for r in data.records}) == 7
    seen = 0
    indexed = recorded_trace_hashes(run)
    for rec, t, g in data.iter_episodes():
        assert t is not None and g is not None
        text = episode_files.read_text(RunStore(run).trace_path(rec.episode_id))
        assert text == t.canonical_json() + "\n"  # canonical: the hash definition holds
        assert g.trace_sha256 == t.sha256()
        # the index records the file's text hash and, as a run's store does, the content hash
        assert indexed[rec.episode_id] == (text_sha256(text), t.sha256())
        assert len(t.messages) > 5 and t.tool_events  # real conversation shapes
        assert t.usage["candidate"].input_tokens > 0
        seen += 1
    assert seen == 14
    gs = data.grade_set
    assert gs.episodes == 14 and gs.finished


def test_same_seed_same_files_other_seed_other_files(synthetic: ModuleType, tmp_path: Path) -> None:
    a = _files(synthetic.make_synthetic_run(tmp_path / "a", 9, seed=1, candidates=3))
    b = _files(synthetic.make_synthetic_run(tmp_path / "b", 9, seed=1, candidates=3))
    c = _files(synthetic.make_synthetic_run(tmp_path / "c", 9, seed=2, candidates=3))
    # run ids (folder names) differ: compare everything but the manifest and grade set files
    strip = {k: v for k, v in a.items() if "manifest" not in k and "grade_set" not in k}
    assert strip == {k: v for k, v in b.items() if k in strip}
    assert any(c.get(k) != v for k, v in strip.items())


def test_repeats_fill_beyond_one_round(synthetic: ModuleType, tmp_path: Path) -> None:
    run = synthetic.make_synthetic_run(tmp_path / "r", 5, seed=0, candidates=2)
    # 5 templates (the first 5 scenarios) x 2 candidates = 10 per round: one repeat, 5 episodes
    data = load_run(run)
    assert [r.repeat for r in data.records] == [0] * 5
    assert data.manifest.repeats == 1 and data.manifest.completed == 5
    idx = RunStore(run).episode_rows()
    assert sorted(e for e, _, _ in idx) == sorted(r.episode_id for r in data.records)


def test_grade_accepts_the_run(synthetic: ModuleType, tmp_path: Path) -> None:
    run = synthetic.make_synthetic_run(tmp_path / "g", 6, seed=0, candidates=2)
    gid = asyncio.run(grade_run(run, continue_latest=False))
    data = load_run(run, gid)
    pairs = [(t, g) for _, t, g in data.iter_episodes()]
    assert len(pairs) == 6 and data.warnings == []
    assert all(t is not None and g is not None and g.trace_sha256 == t.sha256() for t, g in pairs)


def test_refuses_a_folder_in_use(synthetic: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("")
    with pytest.raises(ValueError, match="not empty"):
        synthetic.make_synthetic_run(tmp_path / "x", 3)
