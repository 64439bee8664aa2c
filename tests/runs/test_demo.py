from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.loader import load_bundle
from callbench.cli import app
from callbench.runs.demo import (
    DEMO_MAX_TURNS,
    choose_demo_scenarios,
    demo_config,
    estimate_tokens,
    starter_path,
)


def test_estimate_tokens_counts_scripts_differently() -> None:
    assert estimate_tokens("a" * 45) == pytest.approx(10.0)
    assert estimate_tokens("નમસ્તે") == 6  # one token a character for Indic scripts


def test_demo_slice_is_three_medium_scenarios_in_three_languages() -> None:
    bundle = load_bundle(starter_path())
    chosen = choose_demo_scenarios(bundle, 3)
    assert len(chosen) == 3
    assert len({s.language.split("-")[0] for s in chosen}) == 3
    assert all(s.difficulty == "medium" for s in chosen)
    assert chosen == choose_demo_scenarios(bundle, 3)  # stable


def test_demo_config_puts_every_role_on_the_model(tmp_path: Path) -> None:
    bundle = load_bundle(starter_path())
    config = demo_config(tmp_path / "d", "local:0.5b", bundle)
    specs = {config.caller.spec, config.task_judge.spec, config.conversation_judge.spec}
    assert specs == {"local:0.5b"} and [c.spec for c in config.candidates] == ["local:0.5b"]
    assert config.limits.max_caller_turns == DEMO_MAX_TURNS
    assert len(config.filters.scenarios) == 3 and config.repeats == 1


def test_demo_without_llama_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a)
    )
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert "pip install" in result.output and "[local]" in result.output
