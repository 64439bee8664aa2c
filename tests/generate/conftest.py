"""Fixtures of the generation tests: a small agent made with ``callbench new-agent`` from a prompt
file and an OpenAI tools JSON (``data/``), and the scripted generator's answer file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app

DATA = Path(__file__).parent / "data"
AGENT = "water_helpline"
SCRIPT = DATA / "water_script.yaml"
VALID = "water_no_supply_tanker"
REPAIRED = "water_dirty_supply_neighbour_tanker"
NEAR_DUPLICATE = "water_no_supply_tanker_again"


def invoke(*args: str) -> tuple[int, str, str]:
    """Run the CLI; returns (exit code, stdout, stderr). A traceback fails the test."""
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def make_agent_bundle(root: Path) -> Path:
    """A bundle at ``root`` with the water helpline agent, made by ``callbench new-agent``."""
    code, out, err = invoke(
        "new-agent",
        str(root),
        "--prompt",
        str(DATA / "water_prompt.md"),
        "--tools",
        str(DATA / "water_tools.json"),
        "--id",
        AGENT,
        "--name",
        "Asha (Jal Seva water helpline)",
        "--domain",
        "utilities",
        "--languages",
        "en-IN",
        "--call-ending",
        "end_call",
        "--success",
        "end_call:status=ended",
    )
    assert code == 0, out + err
    return root


@pytest.fixture
def agent_bundle(tmp_path: Path) -> Path:
    return make_agent_bundle(tmp_path / "bundle")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """The answer file and the scenario it patches, copied so the spec is a stable path."""
    folder = tmp_path / "script"
    folder.mkdir()
    for name in ("water_script.yaml", "water_no_supply_tanker.yaml"):
        shutil.copy(DATA / name, folder / name)
    return folder / "water_script.yaml"


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
