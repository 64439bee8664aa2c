"""Shared fixtures for bundle tests: a fresh copy of the minimal valid bundle to break one thing at a time."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from callbench.bundle.loader import Problem
from callbench.bundle.validate.audits import validate_path

MINIMAL = Path(__file__).parent / "data" / "minimal"
AGENT = "pickup_desk"
BOOKING = "pickup_evening_booking"
CANCEL = "pickup_cancel_unverified"


class MiniBundle:
    """A writable copy of ``tests/bundle/data/minimal`` with helpers to edit and validate it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.agent_dir = root / "agents" / AGENT

    def scenario_file(self, sid: str = BOOKING) -> Path:
        return self.agent_dir / "scenarios" / f"{sid}.yaml"

    def read(self, path: Path) -> Any:
        return yaml.safe_load(path.read_text(encoding="utf-8"))

    def write(self, path: Path, data: Any) -> None:
        path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")

    def edit(self, path: Path, fn: Callable[[Any], Any]) -> None:
        data = self.read(path)
        out = fn(data)
        self.write(path, data if out is None else out)

    def edit_scenario(self, fn: Callable[[Any], Any], sid: str = BOOKING) -> None:
        self.edit(self.scenario_file(sid), fn)

    def edit_agent(self, fn: Callable[[Any], Any]) -> None:
        self.edit(self.agent_dir / "agent.yaml", fn)

    def problems(self) -> list[Problem]:
        return validate_path(self.root)[1]

    def codes(self) -> set[str]:
        return {p.code for p in self.problems()}

    def only(self, code: str) -> list[Problem]:
        """Problems with ``code``; fails when any problem with another code is present."""
        probs = self.problems()
        others = [str(p) for p in probs if p.code != code]
        assert not others, f"unexpected problems besides {code}: {others}"
        found = [p for p in probs if p.code == code]
        assert found, f"expected a {code} problem, got none"
        return found


@pytest.fixture
def mb(tmp_path: Path) -> MiniBundle:
    dst = tmp_path / "bundle"
    shutil.copytree(MINIMAL, dst)
    return MiniBundle(dst)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``callbench validate``'s result cache turned on, in a temporary folder; its entries' folder."""
    monkeypatch.setenv("CALLBENCH_VALIDATE_CACHE", "1")
    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "validate"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A writable copy of the minimal bundle (its root folder)."""
    root = tmp_path / "bundle"
    shutil.copytree(MINIMAL, root)
    return root


def validate_cli(*args: str) -> Any:
    """``callbench validate ARGS`` through the typer app in this process; never a traceback."""
    from typer.testing import CliRunner

    from callbench.cli import app

    result = CliRunner().invoke(app, ["validate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result
