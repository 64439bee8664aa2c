"""Machine faults, a role that keeps failing, the index's grade rows, and header values
(the machine is never the candidate: docs/decisions.md, "Fault attribution")."""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.models.base import ModelSettings
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore
from callbench.runs.machine import EXIT_MACHINE_FAULT, EXIT_PROVIDER
from callbench.runs.preflight import preflight
from callbench.runs.session import build_clients
from fakes.fault_server import FaultServer

from .conftest import DAIRY, scripted_config

SCRIPTED = [
    "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
    "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--repeats", "3",
    "--concurrency", "1",
]  # fmt: skip


def _invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_disk_full_while_saving_a_trace_is_one_line_and_the_same_command_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import callbench.runfolder.store as store_module

    real = store_module.write_trace_text
    calls = {"n": 0}

    def full_after_one(*args):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args)

    monkeypatch.setattr(store_module, "write_trace_text", full_after_one)
    out = tmp_path / "run"
    code, output = _invoke([*SCRIPTED, "--out", str(out)])
    assert code == EXIT_MACHINE_FAULT, output
    lines = _error_lines(output)
    assert len(lines) == 1 and f"cannot write {out}: the disk is full" in lines[0]
    assert "run the same command again" in lines[0] and "Traceback" not in output
    saved = sorted((out / "traces").glob("*.json.gz"))
    assert len(saved) == 1
    first = saved[0].read_bytes()
    assert json.loads(episode_files.read_text(saved[0]))["end_reason"] != "skipped"
    monkeypatch.setattr(store_module, "write_trace_text", real)
    code, output = _invoke([*SCRIPTED, "--out", str(out)])
    assert code == 0, output
    assert len(list((out / "traces").glob("*.json.gz"))) == 3
    assert saved[0].read_bytes() == first  # the finished episode was kept, not rerun


@pytest.mark.parametrize(("err", "words"), [
    (PermissionError(errno.EACCES, "Permission denied"), "permission denied"),
    (OSError(errno.EROFS, "Read-only file system"), "the file system is read-only"),
])
def test_permission_and_read_only_faults_name_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: OSError, words: str
) -> None:
    import callbench.trace.files as trace_module

    real = trace_module.tempfile.mkstemp

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        if "traces" in str(kwargs.get("dir", "")):
            raise err
        return real(*args, **kwargs)

    monkeypatch.setattr(trace_module.tempfile, "mkstemp", refuse)
    out = tmp_path / "run"
    code, output = _invoke([*SCRIPTED, "--out", str(out)])
    assert code == EXIT_MACHINE_FAULT, output
    (line,) = _error_lines(output)
    assert words in line and str(out / "traces") in line and ".json" in line


def test_grade_on_a_full_disk_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    assert _invoke([*SCRIPTED, "--out", str(out), "--no-grade"])[0] == 0
    import callbench.grade.grader as grader

    def full(run_dir, grade):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir / "grades" / "episodes"))

    monkeypatch.setattr(grader, "save_episode_grade", full)
    code, output = _invoke(["grade", str(out)])
    assert code == EXIT_MACHINE_FAULT
    (line,) = _error_lines(output)
    assert "the disk is full" in line and "episodes" in line


def test_rebuild_index_restores_grade_rows(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _invoke([*SCRIPTED, "--out", str(out)])[0] == 0
    store = RunStore(out)
    with sqlite3.connect(out / "index.sqlite") as db:
        rows = sorted(db.execute("SELECT * FROM grades"))
        db.execute("DELETE FROM grades")  # a kill between a grade file and its index row
    assert len(rows) == 3
    store.rebuild_index()
    with sqlite3.connect(out / "index.sqlite") as db:
        assert sorted(db.execute("SELECT * FROM grades")) == rows


def test_a_role_failing_401_three_times_in_a_row_stops_the_run_then_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-good-key-1")
    settings = tmp_path / "settings.yaml"
    out = tmp_path / "run"
    args = [
        "run", str(DAIRY), "--candidate", "openai:fake-agent", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--repeats", "5",
        "--concurrency", "1", "--out", str(out), "--settings", str(settings),
    ]  # fmt: skip
    with FaultServer(keys={"sk-good-key-1"}) as server:
        base = {"spec": "openai:fake-agent", "base_url": server.url, "max_attempts": 2,
                "retry_base_delay_s": 0.0}
        bad_key = {"extra_headers": {"Authorization": "env:BAD"}}
        settings.write_text(json.dumps({"candidate": {**base, **bad_key}}))
        monkeypatch.setenv("BAD", "Bearer revoked-key")
        code, output = _invoke([*args, "--no-preflight"])
        assert code == EXIT_PROVIDER, output
        (line,) = _error_lines(output)
        assert "candidate:openai_fake-agent" in line and "failed 3 times in a row with HTTP 401" in line
        assert "run the same command to resume" in line
        assert len(server.log) == 3  # the fourth and fifth episodes never started
        monkeypatch.setenv("BAD", "Bearer sk-good-key-1")
        code, output = _invoke(args)
        assert code == 0, output
    traces = [json.loads(episode_files.read_text(p)) for p in (out / "traces").glob("*.json.gz")]
    assert len(traces) == 5 and not any(t["end_reason"] == "skipped" for t in traces)


async def test_preflight_skips_models_without_network(tmp_path: Path, dairy) -> None:  # type: ignore[no-untyped-def]
    config = scripted_config(tmp_path / "r")
    assert await preflight(build_clients(config, dairy)) == []


def test_literal_credential_headers_are_refused_and_no_header_value_is_saved(tmp_path: Path) -> None:
    for name in ("Ocp-Apim-Subscription-Key", "X-Access-Key", "X-Session-Id", "Authorization",
                 "X-Csrf-Token", "X-Bearer", "X-Client-Passphrase", "X-Private-Id"):
        with pytest.raises(ValueError, match="looks like a credential"):
            ModelSettings(extra_headers={name: "literal-value"})
        assert ModelSettings(extra_headers={name: "env:SOME_VAR"}).extra_headers == {name: "env:SOME_VAR"}
    for value in ("Bearer abc123", "basic dXNlcjpwYXNz", "sk-proj-abcdefghijkl"):
        with pytest.raises(ValueError, match="looks like a credential"):
            ModelSettings(extra_headers={"X-Custom": value})
    assert ModelSettings(extra_headers={"X-Tenant": "acme-eu"}).extra_headers == {"X-Tenant": "acme-eu"}
    # settings built over others keep the live header values (a dump holds only markers)
    from callbench.models.registry import settings_from_pairs

    base = ModelSettings(extra_headers={"X-Tenant": "acme-eu"})
    assert settings_from_pairs(["temperature=0.5"], base).extra_headers == {"X-Tenant": "acme-eu"}
    literal = "tenant-literal-7f31"
    settings = tmp_path / "settings.yaml"
    settings.write_text(json.dumps({"candidate": {"spec": "scripted:reference",
                                                  "extra_headers": {"X-Tenant": literal}}}))
    out = tmp_path / "run"
    code, output = _invoke([*SCRIPTED, "--out", str(out), "--settings", str(settings)])
    assert code == 0, output
    code, output = _invoke(["report", str(out), "--json", str(tmp_path / "r.json"), "--csv",
                            str(tmp_path / "r.csv"), "--html", str(tmp_path / "r.html")])
    assert code == 0, output
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != settings]
    assert len(files) > 8
    for path in files:
        assert literal.encode() not in episode_files.file_bytes(path), path
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["candidates"][0]["settings"]["extra_headers"] == {"X-Tenant": "[not saved]"}
    # the same command resumes: header values never count when comparing runs
    assert _invoke([*SCRIPTED, "--out", str(out), "--settings", str(settings)])[0] == 0


def test_grade_needs_the_judges_header_values_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    monkeypatch.setenv("JUDGE_AUTH", "Bearer sk-judge-key-2")
    settings = tmp_path / "settings.yaml"
    out = tmp_path / "run"
    with FaultServer(keys={"sk-judge-key-2"}) as server:
        judge = {"spec": "openai:fake-judge", "base_url": server.url, "retry_base_delay_s": 0.0,
                 "extra_headers": {"Authorization": "env:JUDGE_AUTH"}}
        settings.write_text(json.dumps({"task_judge": judge, "conversation_judge": judge}))
        args = [
            "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
            "--task-judge", "openai:fake-judge", "--conversation-judge", "openai:fake-judge",
            "--repeats", "1", "--out", str(out), "--settings", str(settings),
        ]  # fmt: skip
        assert _invoke(args)[0] == 0
        code, output = _invoke(["grade", str(out), "--new-set"])
        assert code == 2
        (line,) = _error_lines(output)
        assert "extra_headers['Authorization']: its value was not saved with the run" in line
        code, output = _invoke(["grade", str(out), "--new-set", "--settings", str(settings)])
        assert code == 0, output
        assert "0 not graded, 0 judge error(s)" in output
    assert not any(b"sk-judge-key-2" in episode_files.file_bytes(p) for p in out.rglob("*") if p.is_file())


def test_a_kill_between_a_grade_file_and_its_index_row_is_repaired_by_the_same_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    real = RunStore.index_grade
    calls = {"n": 0}

    def killed_on_the_second(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            # the process stops after the grade file, before its index row (a kill leaves the
            # same state on disk; an in-process KeyboardInterrupt would upset the test runner)
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RunStore, "index_grade", killed_on_the_second)
    code, output = _invoke([*SCRIPTED, "--out", str(out)])
    assert code == EXIT_MACHINE_FAULT, output
    gid = json.loads((out / "manifest.json").read_text())["grade_sets"][-1]
    files = {p.name.removesuffix(".json.gz") for p in (out / "grades" / gid / "episodes").glob("*.json.gz")}
    with sqlite3.connect(out / "index.sqlite") as db:
        indexed = {r[0] for r in db.execute("SELECT episode_id FROM grades")}
    assert len(files) == 2 and len(indexed) == 1 and indexed < files  # one grade file lacks its row
    orphan = (files - indexed).pop()
    graded_before = (out / "grades" / gid / "episodes" / f"{orphan}.json.gz").read_bytes()
    monkeypatch.setattr(RunStore, "index_grade", real)
    code, output = _invoke([*SCRIPTED, "--out", str(out)])
    assert code == 0, output
    with sqlite3.connect(out / "index.sqlite") as db:
        rows = {r[0]: r[1:] for r in db.execute("SELECT episode_id, overall, passed FROM grades")}
    grades = {eid: json.loads(episode_files.read_text(p))
              for eid, p in episode_files.paths(out / "grades" / gid / "episodes").items()}
    assert set(rows) == set(grades) and len(rows) == 3
    assert all(rows[e] == (g["overall"], int(g["passed"])) for e, g in grades.items())
    # the orphan's grade was indexed from its file, not graded again
    assert (out / "grades" / gid / "episodes" / f"{orphan}.json.gz").read_bytes() == graded_before


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_judge_failing_401_in_a_row_stops_the_run_then_resume_grades_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-good-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-judge-good-1")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    settings = tmp_path / "settings.yaml"
    out = tmp_path / "run"
    spec = f"{provider}:fake-judge"
    args = [
        "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", spec, "--conversation-judge", spec, "--repeats", "5",
        "--concurrency", "1", "--out", str(out), "--settings", str(settings),
    ]  # fmt: skip
    with FaultServer(keys={"sk-judge-good-1"}) as server:
        url = server.url if provider == "openai" else server.root
        judge = {"spec": spec, "base_url": url, "max_attempts": 2, "retry_base_delay_s": 0.0}
        settings.write_text(json.dumps({"task_judge": judge, "conversation_judge": judge}))
        server.outages["fake-judge"] = 401  # e.g. the judge's key was revoked after the preflight
        code, output = _invoke([*args, "--no-preflight"])
        assert code == EXIT_PROVIDER, output
        (line,) = _error_lines(output)
        assert "judge" in line and f"{spec} failed 3 times in a row with HTTP 401" in line, line
        assert "Traceback" not in output
        traces = list((out / "traces").glob("*.json.gz"))
        assert 3 <= len(traces) < 5  # the run stopped instead of failing every remaining episode
        server.outages.clear()
        code, output = _invoke(args)
        assert code == 0, output
    grades = [json.loads(episode_files.read_text(p)) for p in (out / "grades").glob("*/episodes/*.json.gz")]
    assert len(grades) == 5 and not any(g["not_graded"] for g in grades)
    assert len({g["grade_set_id"] for g in grades}) == 1


def test_machine_fault_lines_name_path_and_remedy() -> None:
    from callbench.runs.machine import machine_fault_message

    line = machine_fault_message(OSError(errno.EROFS, "Read-only file system", "/r/report.html"), "/r",
                                 option="--html")
    assert line == ("cannot write /r/report.html: the file system is read-only; use a writable --html "
                    "folder or remount it read-write, then run the same command again to resume "
                    "(finished work is kept)")
    db = machine_fault_message(sqlite3.OperationalError("unable to open database file"), "/r")
    assert db is not None and db.startswith("cannot write /r/index.sqlite: permission denied")
    assert machine_fault_message(sqlite3.OperationalError("no such table: x"), "/r") is None
    assert machine_fault_message(OSError(errno.ENOENT, "No such file"), "/r") is None
