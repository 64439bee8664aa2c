"""The run index keeps two hashes per trace: of the file's text (what tells an edited file) and of
the trace's content (``Trace.sha256()``, what a grade records). Traces carry timings, so the two
differ; the report matches a grade to an unchanged trace from the index without serialising the
trace again, and still warns about every grade that does not match its trace."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from callbench.report.model.load import load_run
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore, recorded_trace_hashes, text_sha256
from callbench.trace import AgentSpeech, SpokenPart, Trace


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Episode ids of the traces whose content hash (``Trace.sha256``) is computed while a test
    runs, in this process (the report is loaded with ``workers=1``)."""
    calls: list[str] = []
    real = Trace.sha256

    def counted(self: Trace) -> str:
        calls.append(self.episode_id)
        return real(self)

    monkeypatch.setattr(Trace, "sha256", counted)
    yield calls


def _rows(out: Path) -> dict[str, tuple[str, str | None]]:
    with sqlite3.connect(out / "index.sqlite") as db:
        return {r[0]: (r[1], r[2]) for r in db.execute(
            "SELECT episode_id, trace_sha256, content_sha256 FROM episodes")}


def _rewrite(out: Path, eid: str, change: Callable[[Trace], None]) -> None:
    """Save ``change(trace)`` over the episode's trace file, as someone editing it would."""
    store = RunStore(out)
    trace = store.load_trace(eid)
    change(trace)
    episode_files.write_text(store.traces, eid, trace.canonical_json() + "\n")
    store.close()


def _mismatches(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "trace_sha256 mismatch" in w]


def test_the_index_keeps_the_text_hash_and_the_content_hash(graded: Path) -> None:
    rows = _rows(graded)
    store = RunStore(graded)
    assert rows
    for eid, (text_sha, content_sha) in rows.items():
        trace = store.load_trace(eid)
        assert trace.latency is not None and trace.latency.turns
        assert text_sha == text_sha256(episode_files.read_text(store.trace_path(eid)))
        assert content_sha == trace.sha256() != text_sha
    store.close()
    assert recorded_trace_hashes(graded) == {e: (t, c) for e, (t, c) in rows.items() if c}


def test_canonical_texts_are_the_file_text_and_the_content_text(graded: Path) -> None:
    store = RunStore(graded)
    trace = store.load_trace(min(_rows(graded)))
    store.close()
    for variant in (trace, trace.model_copy(update={"latency": None}),
                    trace.model_copy(update={"persona": "impatient_senior"}),
                    trace.model_copy(update={"agent_speech": [AgentSpeech(
                        turn=0, mode="tts", tts={"engine": "fake"}, seconds=1.5,
                        parts=[SpokenPart(text="Hello", spoken="Hello", audio_sha256="0" * 64,
                                          audio_seconds=1.5)])]})):
        text, content = variant.canonical_texts()
        assert (text, content) == (variant.canonical_json(), variant.canonical_json(content_only=True))
        assert (text == content) is (variant.latency is None)
        assert ("agent_speech" in content) is bool(variant.agent_speech)
        assert text_sha256(content) == variant.sha256()


def test_the_report_matches_grades_from_the_index_without_hashing_traces(
    graded: Path, hashed: list[str]
) -> None:
    run = load_run(graded, workers=1)
    assert run.warnings == [] and hashed == []
    assert {r.status for r in run.records} == {"scored"} and len(run.records) == len(_rows(graded))


def test_a_trace_edited_after_grading_is_warned_about(graded: Path, hashed: list[str]) -> None:
    eid = min(_rows(graded))

    def edit(t: Trace) -> None:
        msg = next(m for m in t.messages if m.role == "assistant" and m.content)
        msg.content = f"{msg.content} (edited)"

    _rewrite(graded, eid, edit)
    run = load_run(graded, workers=1)
    assert len(_mismatches(run.warnings)) == 1 and eid in _mismatches(run.warnings)[0]
    assert hashed == [eid]  # the file's text is not the indexed one: its content is hashed again
    store = RunStore(graded)
    assert store.reconcile_index().reindexed == 1  # a resume sees the edit (size/time/text hash)
    store.close()
    fixed = RunStore(graded).load_trace(eid)
    assert _rows(graded)[eid] == (text_sha256(fixed.canonical_json()), fixed.sha256())


def test_a_grade_of_another_version_is_warned_about_from_the_index(graded: Path, hashed: list[str]) -> None:
    eid = min(_rows(graded))
    gid = load_run(graded, workers=1).grade_set.grade_set_id
    folder = graded / "grades" / gid / "episodes"
    path = episode_files.path_for(folder, eid)
    text = episode_files.read_text(path)
    sha = RunStore(graded).load_trace(eid).sha256()
    hashed.clear()
    episode_files.write_text(folder, eid, text.replace(sha, "0" * 64, 1))
    run = load_run(graded, workers=1)
    assert len(_mismatches(run.warnings)) == 1 and eid in _mismatches(run.warnings)[0]
    assert hashed == []  # the trace file is the indexed one: its content hash is the index's


def test_timings_edited_alone_still_match_the_grade(graded: Path, hashed: list[str]) -> None:
    eid = min(_rows(graded))

    def retime(t: Trace) -> None:
        assert t.latency is not None
        t.latency.started_at = "2030-01-01T00:00:00+00:00"

    _rewrite(graded, eid, retime)
    run = load_run(graded, workers=1)
    assert run.warnings == [] and hashed == [eid]  # other text: the content is hashed, and matches


def test_an_index_from_before_content_hashes_still_reports_and_is_upgraded(
    graded: Path, hashed: list[str]
) -> None:
    before = _rows(graded)
    with sqlite3.connect(graded / "index.sqlite") as db:
        db.execute("ALTER TABLE episodes DROP COLUMN content_sha256")
    assert recorded_trace_hashes(graded) == {}  # read-only: the report does not upgrade the index
    run = load_run(graded, workers=1)
    assert run.warnings == [] and sorted(hashed) == sorted(before)  # every trace hashed: the old way
    with sqlite3.connect(graded / "index.sqlite") as db:
        assert "content_sha256" not in {r[1] for r in db.execute("PRAGMA table_info(episodes)")}
    store = RunStore(graded)
    found = store.reconcile_index()  # a resume adds the column; unchanged rows stay trusted
    assert found.trusted == len(before) and found.reindexed == 0
    store.rebuild_index()  # a rebuild computes every content hash again
    store.close()
    assert _rows(graded) == before
    hashed.clear()
    assert load_run(graded, workers=1).warnings == [] and hashed == []


def test_a_stale_index_row_is_never_trusted_for_other_text(graded: Path, hashed: list[str]) -> None:
    eid = min(_rows(graded))
    with sqlite3.connect(graded / "index.sqlite") as db:  # an index whose content hash is wrong
        db.execute("UPDATE episodes SET trace_sha256 = ?, content_sha256 = ? WHERE episode_id = ?",
                   ("1" * 64, "2" * 64, eid))
    run = load_run(graded, workers=1)
    assert run.warnings == [] and hashed == [eid]  # the text is not the indexed one: hashed again
