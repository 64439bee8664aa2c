"""Run folders written before gzip (plain ``.json`` traces and episode grades) stay
readable by report, grade and resume; new files are gzip JSON with the same hashes."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

from callbench.bundle.models import Bundle
from callbench.grade.grader import grade_run
from callbench.grade.store import load_episode_grades
from callbench.report.model.build import build_report
from callbench.report.model.load import load_run
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore, text_sha256
from callbench.runs.session import run_and_grade

from .conftest import scripted_clients, scripted_config


def _to_old_format(out: Path) -> dict[str, bytes]:
    """Turn every compressed trace and grade file into the plain form older runs wrote, and drop
    the index (an older index is rebuilt on resume). Returns the plain traces by file name."""
    plain = {}
    for folder in [out / "traces", *(out / "grades").glob("*/episodes")]:
        for eid, p in episode_files.paths(folder).items():
            text = gzip.decompress(p.read_bytes())
            (folder / f"{eid}.json").write_bytes(text)
            p.unlink()
            if folder.name == "traces":
                plain[f"{eid}.json"] = text
    for p in out.glob("index.sqlite*"):
        p.unlink()
    return plain


def _run(out: Path, dairy: Bundle, repeats: int):  # type: ignore[no-untyped-def]
    config = scripted_config(out, repeats=repeats)
    return asyncio.run(run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy))


def test_new_files_are_gzip_json_with_the_text_hash(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    manifest, gid = _run(out, dairy, 1)
    names = sorted(p.name for p in (out / "traces").iterdir())
    assert names and all(n.endswith(".json.gz") for n in names)
    store = RunStore(out)
    rows = list(store._db().execute("SELECT episode_id, trace_sha256 FROM episodes"))
    assert len(rows) == len(manifest.planned)
    for eid, sha in rows:
        text = gzip.decompress(store.trace_path(eid).read_bytes()).decode()
        # the index keeps the file's text hash (any edit shows); the trace's own hash is over its
        # content without timings, which grades record
        assert sha == text_sha256(text)
        trace = store.load_trace(eid)
        assert trace.latency is not None
        assert trace.sha256() == text_sha256(trace.canonical_json(content_only=True))
    store.close()
    grades = load_episode_grades(out, gid or "")
    assert len(grades) == len(manifest.planned)
    folder = out / "grades" / (gid or "") / "episodes"
    assert all((folder / f"{g.episode_id}.json.gz").is_file() for g in grades)


def test_an_old_run_folder_reports_grades_and_resumes(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    manifest, gid = _run(out, dairy, 1)
    before = load_run(out)
    plain = _to_old_format(out)
    assert plain and not list((out / "traces").glob("*.gz"))

    old = load_run(out)  # report reads the plain files
    assert old.warnings == []
    assert [r.model_dump() for r in old.records] == [r.model_dump() for r in before.records]
    assert build_report([old], n_samples=50).calls == build_report([before], n_samples=50).calls

    # resume with more repeats: old traces kept byte for byte, new ones compressed, none doubled
    manifest2, gid2 = _run(out, dairy, 2)
    assert manifest2.completed == len(manifest2.planned) == 2 * len(manifest.planned)
    assert gid2 == gid  # the same grade set was continued
    for name, text in plain.items():
        assert (out / "traces" / name).read_bytes() == text
    files = episode_files.paths(out / "traces")
    assert len(files) == len(manifest2.planned)
    assert sum(p.name.endswith(".json.gz") for p in files.values()) == len(manifest.planned)
    assert len(list((out / "traces").iterdir())) == len(manifest2.planned)  # no episode in both forms
    mixed = load_run(out)
    assert mixed.warnings == [] and all(r.status == "scored" for r in mixed.records)

    # a regrade reads both forms; grades of old traces keep the old traces' hashes
    gid3 = asyncio.run(grade_run(out, continue_latest=False))
    regraded = {g.episode_id: g.trace_sha256 for g in load_episode_grades(out, gid3)}
    assert regraded == {g.episode_id: g.trace_sha256 for g in load_episode_grades(out, gid2 or "")}
    assert len(regraded) == len(manifest2.planned)


def test_writing_an_episode_replaces_its_plain_file(tmp_path: Path) -> None:
    (tmp_path / "e1.json").write_text('{"a": 1}\n', encoding="utf-8")
    assert episode_files.path_for(tmp_path, "e1") == tmp_path / "e1.json"
    assert episode_files.read_text(tmp_path / "e1.json") == '{"a": 1}\n'
    path = episode_files.write_text(tmp_path, "e1", '{"a": 2}\n')
    assert path == tmp_path / "e1.json.gz" and not (tmp_path / "e1.json").exists()
    assert episode_files.read_text(episode_files.path_for(tmp_path, "e1")) == '{"a": 2}\n'
    # equal text gives equal bytes (no name or time in the gzip header)
    again = episode_files.write_text(tmp_path, "e2", '{"a": 2}\n')
    assert again.read_bytes() == path.read_bytes()


def test_a_damaged_compressed_file_is_named(tmp_path: Path) -> None:
    path = episode_files.write_text(tmp_path, "e1", '{"a": 1}\n')
    path.write_bytes(path.read_bytes()[:12])  # truncated
    try:
        episode_files.read_text(path)
    except episode_files.DamagedFile as e:
        assert e.filename == str(path) and str(e).startswith("damaged gzip data")
    else:
        raise AssertionError("a truncated gzip file was read")


def test_scan_skips_temp_and_hidden_files_and_prefers_the_compressed_form(tmp_path: Path) -> None:
    (tmp_path / ".e1.json.gz.abc.tmp").write_bytes(b"half")
    (tmp_path / ".hidden.json").write_text("{}")
    (tmp_path / "e2.json").write_text("{}")
    episode_files.write_text(tmp_path, "e3", "{}")
    (tmp_path / "e3.json").write_text('{"old": true}')  # both forms: compressed wins
    (tmp_path / "notes.txt").write_text("x")
    found = episode_files.paths(tmp_path)
    assert list(found) == ["e2", "e3"]
    assert found["e3"].name == "e3.json.gz"


def test_a_damaged_trace_is_one_line_naming_the_file_in_report(tmp_path: Path, dairy: Bundle) -> None:
    from callbench.report.model.load import ReportInputError

    out = tmp_path / "run"
    _run(out, dairy, 1)
    path = next(iter(episode_files.paths(out / "traces").values()))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    try:
        load_run(out)
    except ReportInputError as e:
        msg = str(e)
    else:
        raise AssertionError("a damaged trace was loaded")
    assert msg.startswith(f"{path}: cannot read trace: damaged gzip data") and "\n" not in msg
    assert msg.count(str(path)) == 1
    assert msg.endswith("delete it and run the same `callbench run` command to simulate that episode again")
