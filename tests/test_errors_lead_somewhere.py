"""Errors that lead somewhere: every "did you mean" names a command that lists
what it names, lists of valid values are complete, and OS errors give the path and what to do."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.models.registry import create_client
from callbench.models.scripted.judge import SCRIPTED_JUDGE_SPECS
from callbench.models.scripted.models import create_scripted
from callbench.oserror import os_error_line
from callbench.runs.demo import starter_path
from callbench.runs.plan import ScenarioFilters, select_scenarios

RUN = ["--candidate", "scripted:reference", "--caller", "scripted:plan", "--task-judge", "scripted:met",
       "--conversation-judge", "scripted:met"]


def test_the_scenario_hint_names_a_command_that_lists_every_scenario_id() -> None:
    starter = load_bundle(starter_path())
    with pytest.raises(ValueError) as e:
        select_scenarios(starter, ScenarioFilters(scenarios=["lpg_en_late_delivery"]))
    msg = str(e.value)
    assert "did you mean" in msg and "lpg_en_late_delivery_no_second_booking" in msg
    command = msg[msg.index("callbench inspect"):msg.index(" lists them")].split()
    assert command == ["callbench", "inspect", str(starter.root), "--scenarios"]
    listed = CliRunner().invoke(app, command[1:])
    assert listed.exit_code == 0, listed.output
    ids = [line.split()[0] for line in listed.output.splitlines()]
    assert sorted(ids) == sorted(s.id for _, s in starter.scenarios())
    first = listed.output.splitlines()[0]
    assert "(agent " in first and any(d in first for d in ("medium", "hard"))


@pytest.mark.parametrize("spec", ["scripted:mett", "scripted:nope"])
def test_the_scripted_model_list_is_complete(spec: str) -> None:
    with pytest.raises(ValueError) as e:
        create_client(spec, role="task_judge")
    msg = str(e.value)
    # a judge's mistyped name lists every scripted judge, and only those (models of its role)
    for name in SCRIPTED_JUDGE_SPECS:
        assert name in msg
    assert "scripted:reference" not in msg
    assert ("did you mean scripted:met" in msg) == (spec == "scripted:mett")
    with pytest.raises(ValueError) as cand:
        create_client(spec.replace("scripted:", "scripted:x"), role="candidate")
    listed = str(cand.value)  # a candidate's lists the scripted candidates, not the judges
    assert "scripted:reference" in listed and "scripted:hangup" in listed
    assert "scripted:met," not in listed and "scripted:plan" not in listed
    with pytest.raises(ValueError, match="is a scripted judge, for --task-judge"):
        create_scripted("scripted:met")


def test_os_errors_name_the_path_and_what_to_do() -> None:
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "runs/x")
    assert os_error_line(missing) == "runs/x: does not exist; check the path (a typo?)"
    assert os_error_line(missing, expected="a run folder") == (
        "runs/x: does not exist; give the path of a run folder")
    denied = PermissionError(errno.EACCES, "Permission denied", "/root/x")
    assert os_error_line(denied) == (
        "/root/x: permission denied; check the permissions of the path and its folders")


@pytest.mark.parametrize("extra", [[], ["--dry-run"]])
def test_a_misspelled_bundle_path_is_one_line_without_errno(tmp_path: Path, extra: list[str]) -> None:
    bundle = tmp_path / "examples" / "startr"
    result = CliRunner().invoke(app, ["run", str(bundle), *RUN, "--out", str(tmp_path / "o"), *extra])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: {bundle}: does not exist; give the path of a bundle folder (one holding bundle.yaml)")
    assert "Errno" not in result.output


def test_a_missing_settings_file_is_one_line_without_errno(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", str(starter_path()), *RUN, "--out", str(tmp_path / "o"),
                                      "--settings", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: --settings {tmp_path / 'nope.yaml'}: does not exist; give the path of a YAML file of "
        "per-role settings")
