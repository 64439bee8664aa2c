"""The first hour of a new user, following the README: the extra's install line as callbench is
installed, a dry run without a run folder, every missing key named at once, scripted-model
suggestions of the right role, a progress line whose timer survives 80 columns, and the bar of a
local model reading its prompt."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from callbench.cli import app
from callbench.cli.progress import RunProgress, compact_count
from callbench.models.activity import Activity
from callbench.models.local import extra
from callbench.models.registry import create_client

from .conftest import DAIRY

BASE = ["run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met"]


class _Dist:
    def __init__(self, direct: dict[str, Any] | None) -> None:
        self.direct = direct

    def read_text(self, name: str) -> str | None:
        return json.dumps(self.direct) if self.direct is not None and name == "direct_url.json" else None


@pytest.mark.parametrize(("direct", "expected"), [
    ({"url": "file:///home/me/callbench", "dir_info": {"editable": True}},
     "pip install -e '/home/me/callbench[local]' (callbench is installed from that checkout)"),
    ({"url": "file:///src/cb%20x", "dir_info": {}},
     "pip install '/src/cb x[local]' (callbench is installed from that checkout)"),
    (None, "pip install 'callbench[local]'"),
    ({"url": "https://files.pythonhosted.org/callbench.whl", "archive_info": {}},
     "pip install 'callbench[local]'"),
])
def test_install_hint_follows_how_callbench_was_installed(
    monkeypatch: pytest.MonkeyPatch, direct: dict[str, Any] | None, expected: str
) -> None:
    monkeypatch.setattr(extra.metadata, "distribution", lambda name: _Dist(direct))
    assert extra.install_hint("local") == expected


def test_install_hint_from_a_source_tree_that_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(extra.metadata, "distribution", missing)
    assert extra.install_hint("local") == "pip install '.[local]' (from the root of your callbench checkout)"


def test_generate_with_local_and_no_extra_says_what_works(monkeypatch: pytest.MonkeyPatch) -> None:
    from callbench.models.local import client as local_client

    monkeypatch.setattr(local_client, "llama_available", lambda: False)
    monkeypatch.setattr(extra.metadata, "distribution",
                        lambda name: _Dist({"url": "file:///work/cb", "dir_info": {"editable": True}}))
    result = CliRunner().invoke(app, ["generate", str(DAIRY), "--agent", "dairy_milk_collection",
                                      "--model", "local", "--n", "1"])
    assert result.exit_code == 2
    assert "pip install -e '/work/cb[local]'" in result.output and "'callbench[local]'" not in result.output


def test_dry_run_needs_no_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [*BASE, "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "episodes: 1 planned, 0 finished, 1 to run" in result.output
    assert list(tmp_path.iterdir()) == []  # nothing written
    result = CliRunner().invoke(app, BASE)
    assert result.exit_code == 2 and "--out: give the run folder" in result.output


def test_every_missing_key_of_every_role_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    args = ["run", str(DAIRY), "--candidate", "openai:gpt-a", "--candidate", "anthropic:claude-b",
            "--caller", "openai:gpt-c", "--task-judge", "anthropic:claude-d",
            "--conversation-judge", "scripted:met", "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    out = result.output
    assert "4 role(s) cannot start" in out
    for line in ("candidate: openai:gpt-a: set OPENAI_API_KEY",
                 "candidate: anthropic:claude-b: set ANTHROPIC_API_KEY",
                 "caller: openai:gpt-c: set OPENAI_API_KEY",
                 "task judge: anthropic:claude-d: set ANTHROPIC_API_KEY"):
        assert line in out, out
    assert "conversation judge" not in out


@pytest.mark.parametrize(("role", "typo", "suggested", "absent"), [
    ("candidate", "scripted:refrence", "scripted:reference", "scripted:met"),
    ("candidate", "scripted:mett", None, "scripted:met"),
    ("caller", "scripted:plna", "scripted:plan", "scripted:partial"),
    ("task_judge", "scripted:mett", "scripted:met", "scripted:reference"),
    ("conversation_judge", "scripted:partal", "scripted:partial", "scripted:plan"),
])
def test_a_mistyped_scripted_name_suggests_models_of_its_role(
    role: str, typo: str, suggested: str | None, absent: str
) -> None:
    with pytest.raises(ValueError) as info:
        create_client(typo, role=role)  # type: ignore[arg-type]
    message = str(info.value)
    hint = message.partition("did you mean ")[2].partition("?")[0]
    assert (suggested in hint) if suggested else hint == ""
    assert absent not in message.replace(typo, "")
    assert f"for the {role}" in message


def _render(width: int, bars: RunProgress) -> list[str]:
    console = bars.episodes.console
    with console.capture() as cap:
        console.print(bars.group())
    return [ln.rstrip() for ln in cap.get().splitlines()]


@pytest.mark.parametrize("width", [80, 100])
def test_the_timer_survives_a_narrow_terminal(width: int) -> None:
    console = Console(width=width, force_terminal=False, color_system=None)
    bars = RunProgress(console, "demo episodes")
    bars.plan(12, 3)
    bars.totals(skipped=2, tokens=12_345_678, cost="$1234.56")
    first = _render(width, bars)[0]
    assert len(first) <= width
    # the elapsed time is shown whole (H:MM:SS, whatever time a loaded machine took to get here)
    assert "3/12" in first and re.search(r"(?<![\d:])\d+:\d\d:\d\d(?![\d:])", first), first
    assert "12.35M" in first  # token totals compact
    assert compact_count(987) == "987" and compact_count(12_345) == "12.3k"


def test_the_prompt_reading_phase_has_its_own_bar() -> None:
    console = Console(width=100, force_terminal=False, color_system=None)
    bars = RunProgress(console, "demo episodes")
    bars.plan(6, 0)
    bars.on_activity(Activity("local:0.5b reading the candidate prompt", done=2_181, total=8_724))
    second = _render(100, bars)[1]
    assert "2,181/8,724 tokens" in second and "25%" in second
    task = bars.doing.tasks[0]
    assert task.total == 8_724 and task.completed == 2_181
    bars.on_activity(Activity("local:0.5b reading the candidate prompt", done=8_724, total=8_724))
    assert bars.doing.tasks[0].completed == 8_724 and "100%" in _render(100, bars)[1]
    bars.on_activity(None)  # back to the run's own phase: no counted bar
    assert bars.doing.tasks[0].total is None and "%" not in _render(100, bars)[1]
