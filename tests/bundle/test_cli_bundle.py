"""The bundle commands: ``callbench validate``, ``inspect`` and ``schema`` (exit codes and messages)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callbench.cli import app

from .conftest import AGENT, BOOKING, MINIMAL, MiniBundle

runner = CliRunner()


def _run(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    # Never a traceback: the only exception typer may carry is the SystemExit of the exit code.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_validate_clean_bundle() -> None:
    r = _run("validate", str(MINIMAL))
    assert r.exit_code == 0
    assert r.stdout.startswith("OK: minimal-test-bundle 0.0.1 (hash ")
    assert "1 agent(s), 2 scenario(s), no problems" in r.stdout


def test_validate_clean_json_is_an_empty_list() -> None:
    r = _run("validate", str(MINIMAL), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == []


def _break(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["agent"] = "nobody"
        d["action_checks"][2]["tool"] = "cancel_pikcup"

    mb.edit_scenario(brk)


def test_validate_lists_every_problem_with_file_and_path(mb: MiniBundle) -> None:
    _break(mb)
    r = _run("validate", str(mb.root))
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    f = f"agents/{AGENT}/scenarios/{BOOKING}.yaml"
    expected = (f"{f}:agent: [ref.agent] agent 'nobody' is not 'pickup_desk', "
                "the agent whose folder holds this scenario")
    assert expected in lines
    assert any(line.startswith(f"{f}:action_checks.2.tool: [ref.check_tool] ") for line in lines)
    assert lines[-1] == "2 problem(s) in 1 file(s)"


def test_validate_json(mb: MiniBundle) -> None:
    _break(mb)
    r = _run("validate", str(mb.root), "--json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert [set(d) for d in data] == [{"file", "path", "code", "message"}] * 2
    assert [d["code"] for d in data] == ["ref.agent", "ref.check_tool"]


def test_validate_unreadable_path(tmp_path: Path) -> None:
    r = _run("validate", str(tmp_path / "missing"))
    assert r.exit_code == 2 and r.stdout == ""
    assert "cannot read: does not exist; give the path of a bundle folder (one holding bundle.yaml)" \
        in r.stderr
    r = _run("validate", str(tmp_path / "missing"), "--json")
    assert r.exit_code == 2
    assert [d["code"] for d in json.loads(r.stdout)] == ["read"]
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert _run("validate", str(f)).exit_code == 2


def test_validate_accepts_the_bundle_yaml_path() -> None:
    assert _run("validate", str(MINIMAL / "bundle.yaml")).exit_code == 0


def test_validate_folder_without_bundle(tmp_path: Path) -> None:
    r = _run("validate", str(tmp_path))
    assert r.exit_code == 1
    assert r.stdout.splitlines()[0] == "bundle.yaml: [missing] no bundle.yaml (or bundle.json) at the root"


def test_validate_garbage_never_tracebacks(tmp_path: Path) -> None:
    (tmp_path / "bundle.yaml").write_bytes(b"\x00\xff garbage")
    (tmp_path / "agents" / "a" / "scenarios").mkdir(parents=True)
    (tmp_path / "agents" / "a" / "agent.yaml").write_text("- just\n- a list\n")
    (tmp_path / "agents" / "a" / "scenarios" / "s.json").write_text('{"id": ')
    r = _run("validate", str(tmp_path))
    assert r.exit_code == 1
    codes = [line.split("[")[1].split("]")[0] for line in r.stdout.splitlines()[:-1]]
    # Sorted by file: agents/a/agent.yaml, agents/a/scenarios/s.json, bundle.yaml.
    assert codes == ["schema", "parse", "read"]


def test_validate_internal_error_is_a_problem(mb: MiniBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    from callbench.bundle.validate import audits as validate

    def boom(path: Any) -> Any:
        raise RecursionError("deep")

    monkeypatch.setattr(validate, "validate_path", boom)
    r = _run("validate", str(mb.root), "--json")
    assert r.exit_code == 1
    [p] = json.loads(r.stdout)
    assert p["code"] == "internal" and "RecursionError: deep" in p["message"]


def test_inspect_tables_and_json() -> None:
    r = _run("inspect", str(MINIMAL))
    assert r.exit_code == 0
    assert "agent definitions (active)" in r.stdout and "hi-IN" in r.stdout
    r = _run("inspect", str(MINIMAL), "--json")
    data = json.loads(r.stdout)
    assert data["scenarios"] == 2 and data["by_difficulty"] == {"medium": 1, "hard": 1}
    assert data["tools_per_agent"] == {"median": 4.0, "min": 4, "max": 4}


def test_inspect_errors(tmp_path: Path, mb: MiniBundle) -> None:
    assert _run("inspect", str(tmp_path / "missing")).exit_code == 2
    r = _run("inspect", str(tmp_path))  # no bundle.yaml
    assert r.exit_code == 1 and "[missing]" in r.stderr
    _break(mb)
    mb.edit_scenario(lambda d: d.update(difficulty="easy"))  # a schema problem: the scenario is dropped
    r = _run("inspect", str(mb.root), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["scenarios"] == 1
    assert "1 problem(s) while loading" in r.stderr


def test_schema_command(tmp_path: Path) -> None:
    r = _run("schema", "--out", str(tmp_path / "out"))
    assert r.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "agent.schema.json", "bundle.schema.json", "provenance.schema.json", "scenario.schema.json"]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = _run("schema", "--out", str(blocker / "sub"))
    assert r.exit_code == 2 and "cannot write schemas" in r.stderr
