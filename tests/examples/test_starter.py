"""The starter bundle: validity, composition, and the paper's dairy example.

(a) The bundle loads and ``callbench validate`` passes, and it has the composition DESIGN.md asks
for (agents, domains, languages in their own scripts, outbound agents, document sizes, tools,
scenario balance, and every authoring feature used at least once).
(b) The dairy scenario ``dairy_zero_supply_mastitis`` behaves as the paper's example: its
``log_zero_supply_reason`` confirms only for the member's own collection centre, the evening
shift and the category ``cattle_health``, and answers ``not_recorded`` otherwise. This is checked
directly through :class:`ResolvedFixtures` and through a whole episode.

Running every reference path through ``run_episode`` is done in ``tests/sim/test_starter.py``;
this file only checks statically that each path ends on a call-ending tool.
"""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from typer.testing import CliRunner

from callbench.bundle.checks import CallRecord, evaluate_checks
from callbench.bundle.excerpts import excerpt_cut, locate_excerpt
from callbench.bundle.fixtures import ResolvedFixtures
from callbench.bundle.inspect import composition
from callbench.bundle.matchers import MATCHER_KEYS, iter_matchers, match_fields
from callbench.bundle.models import AsrEvent, Bundle, LoadedAgent, Scenario
from callbench.bundle.references import find_references
from callbench.bundle.render import render_instructions
from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import EndReason

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
DAIRY = "dairy_milk_collection"
MASTITIS = "dairy_zero_supply_mastitis"

# The paper's example, with the values of the scenario file.
MEMBER = "VD-2417-0386"
OWN_CENTRE = "BMC-2417-02"  # the member's sub-centre (hidden_state.member_profile.center_code)
MAIN_CENTRE = "BMC-2417-01"  # the society's main centre: the plausible wrong answer
RIGHT = {"member_id": MEMBER, "center_code": OWN_CENTRE, "shift": "evening",
         "category": "cattle_health", "date": "2026-03-14"}

# Unicode blocks of the scripts the briefs name (Unicode 15 block ranges).
SCRIPT_BLOCKS = {
    "Latin": [(0x0041, 0x024F)],
    "Devanagari": [(0x0900, 0x097F)],
    "Bengali": [(0x0980, 0x09FF)],
    "Gujarati": [(0x0A80, 0x0AFF)],
    "Tamil": [(0x0B80, 0x0BFF)],
}
# Primary language subtag -> the script that language is written in.
LANGUAGE_SCRIPT = {"en": "Latin", "hi": "Devanagari", "mr": "Devanagari", "gu": "Gujarati",
                   "ta": "Tamil", "bn": "Bengali"}

runner = CliRunner()


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return load_bundle(STARTER)  # raises BundleError on any load problem


@pytest.fixture(scope="module")
def pairs(bundle: Bundle) -> list[tuple[LoadedAgent, Scenario]]:
    return bundle.scenarios()


# ---------------------------------------------------------------- (a) validity


def test_validate_cli_exits_zero() -> None:
    result = runner.invoke(app, ["validate", str(STARTER)])
    assert result.exit_code == 0, result.output
    assert "no problems" in result.output
    assert "10 agent(s), 100 scenario(s)" in result.output


def test_inspect_shows_composition() -> None:
    result = runner.invoke(app, ["inspect", "--json", str(STARTER)])
    assert result.exit_code == 0, result.output
    comp = json.loads(result.output)
    assert comp["active_agents"] == 10
    assert comp["scenarios"] == 100
    assert comp["by_difficulty"] == {"medium": 50, "hard": 50}


def test_examples_symlink_is_the_packaged_bundle() -> None:
    link = Path(__file__).parents[2] / "examples" / "starter"
    assert link.resolve() == STARTER.resolve()


# ---------------------------------------------------------------- (a) composition


def test_agents_domains_and_direction(bundle: Bundle) -> None:
    agents = [a.config for a in bundle.agents.values() if a.config.active]
    assert len(agents) >= 6
    assert len({a.domain for a in agents}) >= 6
    assert sum(a.direction == "outbound" for a in agents) >= 2


def test_languages_in_their_own_scripts(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    langs: set[str] = set()
    for agent, scen in pairs:
        primary = scen.language.split("-")[0]
        script = LANGUAGE_SCRIPT[primary]
        assert scen.brief.language == scen.language, scen.id
        assert scen.brief.script == script, scen.id
        assert scen.language in agent.config.languages, scen.id
        # What the caller says and what the agent is expected to say are in that script.
        texts = [scen.brief.context, scen.brief.reason, scen.brief.persona]
        texts += [p.meaning for p in scen.brief.plan]
        texts += [t.speech or "" for t in scen.reference_path or []]
        letters = [c for c in " ".join(texts) if unicodedata.category(c)[0] in "LM"]
        inside = sum(any(lo <= ord(c) <= hi for lo, hi in SCRIPT_BLOCKS[script]) for c in letters)
        assert letters and inside / len(letters) >= 0.97, (scen.id, script, inside, len(letters))
        langs.add(primary)
    assert len(langs) >= 5
    assert {"en", "hi", "gu", "ta", "mr"} <= langs


def test_operating_document_sizes(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    for agent, scen in pairs:
        n = len(render_instructions(agent, scen))
        assert 15_000 <= n <= 45_000, (agent.config.id, scen.id, n)


def test_multilingual_agent_renders_one_static_prefix(bundle: Bundle) -> None:
    """The LPG helpline serves three languages from one English document whose only variables sit
    in its final section: every call shares the rest as a prompt prefix (read once by llama.cpp)."""
    agent = bundle.agents["lpg_gas_helpline"]
    assert set(agent.config.languages) == {"hi-IN", "en-IN", "ta-IN"}
    assert {s.language for s in agent.scenarios} == {"hi-IN", "en-IN", "ta-IN"}
    rendered = [render_instructions(agent, s) for s in agent.scenarios]
    common = os.path.commonprefix(rendered)  # noqa: RUF071 (a character prefix is meant)
    assert len(common) >= 0.95 * min(len(r) for r in rendered)
    assert "{{" not in agent.instructions_template[: len(common)]


def test_every_agent_renders_one_static_prefix(bundle: Bundle) -> None:
    """Every agent's date, time and call-specific values sit in a final section, so all
    its scenarios share the rest of the document as a prompt prefix (``callbench inspect`` shows it)."""
    rows = {r.id: r for r in composition(bundle).agent_rows}
    for aid, agent in bundle.agents.items():
        rendered = [render_instructions(agent, s) for s in agent.scenarios]
        shared = rows[aid].shared_prefix_chars
        assert shared is not None and shared >= 0.98 * min(len(r) for r in rendered), (aid, shared)
        # Before the last section, no variable but the agent's own name (the same in every call).
        template = agent.instructions_template.replace("{{agent_name}}", "")
        last = template.rfind("\n## ")
        assert "{{" not in template[:last] and "{{date}}" in template[last:], aid


def test_education_agent_serves_bengali_and_english_from_one_static_document(bundle: Bundle) -> None:
    """The school board helpline (education) answers Bengali and English callers, five scenarios
    each, from one document of the paper's length whose variables sit only in its final section."""
    agent = bundle.agents["school_board_helpline"]
    assert agent.config.domain == "education"
    assert set(agent.config.languages) == {"bn-IN", "en-IN"}
    langs = sorted(s.language for s in agent.scenarios)
    assert langs == ["bn-IN"] * 5 + ["en-IN"] * 5
    rendered = [render_instructions(agent, s) for s in agent.scenarios]
    assert all(30_000 <= len(r) <= 34_000 for r in rendered), [len(r) for r in rendered]
    common = os.path.commonprefix(rendered)  # noqa: RUF071 (a character prefix is meant)
    assert len(common) >= 0.99 * min(len(r) for r in rendered)
    assert "{{" not in agent.instructions_template[: len(common)]
    assert "## 20. Call context" in agent.instructions_template[len(common) - 200 :]


def test_emergency_intake_agent_serves_marathi_and_hindi_from_one_static_document(bundle: Bundle) -> None:
    """The emergency intake desk (the paper's ninth domain) answers Marathi and Hindi callers, five
    scenarios each, from one document of the paper's length whose variables (date, IVR language,
    calling number) sit only in its final section; Marathi is then served by two agents."""
    agent = bundle.agents["emergency_response_intake"]
    assert agent.config.domain == "emergency intake"
    assert agent.config.direction == "inbound"
    assert set(agent.config.languages) == {"mr-IN", "hi-IN"}
    assert sorted(s.language for s in agent.scenarios) == ["hi-IN"] * 5 + ["mr-IN"] * 5
    assert {s.brief.script for s in agent.scenarios} == {"Devanagari"}
    assert {c.tool for c in agent.config.call_ending_tools} == {"end_call", "transfer_call"}
    rendered = [render_instructions(agent, s) for s in agent.scenarios]
    assert all(30_000 <= len(r) <= 36_000 for r in rendered), [len(r) for r in rendered]
    common = os.path.commonprefix(rendered)  # noqa: RUF071 (a character prefix is meant)
    assert len(common) >= 0.99 * min(len(r) for r in rendered)
    assert "## 22. Call context" in agent.instructions_template[len(common) - 200 :]
    for scen, text in zip(agent.scenarios, rendered, strict=True):  # a call value, in that section only
        assert scen.variables["calling_number"] in text[len(common) :]
    mr_agents = {a.config.id for a in bundle.agents.values()
                 if any(lang.startswith("mr") for lang in a.config.languages)}
    assert mr_agents == {"pension_citizen_services", "emergency_response_intake"}


def test_every_language_is_served_by_two_agents(bundle: Bundle) -> None:
    """A language slice is never one agent's slice."""
    by_lang: dict[str, set[str]] = {}
    for aid, agent in bundle.agents.items():
        for s in agent.scenarios:
            by_lang.setdefault(s.language.split("-")[0], set()).add(aid)
    assert set(by_lang) == {"bn", "en", "gu", "hi", "mr", "ta"}
    assert all(len(agents) >= 2 for agents in by_lang.values()), by_lang


def test_tools_per_agent_and_scenario_balance(bundle: Bundle) -> None:
    for aid, agent in bundle.agents.items():
        assert 1 <= len(agent.config.tools) <= 18, aid
        assert len(agent.scenarios) == 10, aid
        diffs = [s.difficulty for s in agent.scenarios]
        assert diffs.count("medium") == 5 and diffs.count("hard") == 5, aid
        for t in agent.config.tools:
            assert t.parameters.get("type") == "object", (aid, t.name)


def test_dairy_agent_is_the_papers_example(bundle: Bundle) -> None:
    dairy = bundle.agents[DAIRY]
    assert dairy.config.direction == "outbound"
    assert len(dairy.config.tools) == 18
    names = {t.name for t in dairy.config.tools}
    assert "log_zero_supply_reason" in names
    assert dairy.config.languages == ["gu-IN"]
    assert {s.language for s in dairy.scenarios} == {"gu-IN"}
    assert {s.brief.script for s in dairy.scenarios} == {"Gujarati"}
    # The call sheet: member id and name are template variables every scenario sets.
    assert {"member_id", "member_name"} <= set(dairy.config.variables)
    for s in dairy.scenarios:
        assert {"member_id", "member_name"} <= set(s.variables), s.id
        assert s.variables["member_id"] in render_instructions(dairy, s)


def _all_matchers(pairs: list[tuple[LoadedAgent, Scenario]]) -> list[Any]:
    out: list[Any] = []
    for agent, scen in pairs:
        for c in agent.config.call_ending_tools:
            out.extend(c.success.values())
        for fx in scen.fixtures.values():
            for e in fx.queue:
                out.extend(e.args.values())
        for chk in scen.action_checks:
            out.extend(chk.args.values())
    return [m for top in out for m in iter_matchers(top)]


def test_every_matcher_kind_is_used(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    kinds = {m.kind for m in _all_matchers(pairs)}
    assert kinds == set(MATCHER_KEYS), set(MATCHER_KEYS) - kinds


def test_channel_features_are_used(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    asr_kinds = {e.kind for _, s in pairs for e in s.channel.asr_events}
    assert asr_kinds == set(get_args(AsrEvent.model_fields["kind"].annotation))
    assert any(s.channel.seeded_noise for _, s in pairs)
    splits = [(s, v) for _, s in pairs for v in s.channel.vad_splits]
    assert splits
    # A pause inside a long identifier: an anchor made of digits.
    assert any(any(a.strip().isdigit() for a in v.after) for _, v in splits)
    # A pause between two halves of a thought: an anchor that is a word.
    assert any(any(not any(ch.isdigit() for ch in a) for a in v.after) for _, v in splits)


def test_fixture_references_to_caller_and_state(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    refs = [r for _, s in pairs for _, r in find_references(s.model_dump(by_alias=True)["fixtures"])]
    assert any(r.startswith("${caller.") for r in refs)
    assert any(r.startswith("${state.") for r in refs)


def test_negative_checks_after_and_excerpts(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    checks = [c for _, s in pairs for c in s.action_checks]
    assert any(c.count.max == 0 for c in checks)
    assert any(c.after for c in checks)
    with_excerpts = 0
    for agent, scen in pairs:
        rendered = render_instructions(agent, scen)
        for crit in scen.criteria:
            for ex in crit.excerpts:
                # Verbatim (a line break of the hard-wrapped document reads as a space) and whole.
                assert locate_excerpt(rendered, ex) is not None, (scen.id, crit.id, ex[:60])
                assert excerpt_cut(rendered, ex) is None, (scen.id, crit.id, ex[:60])
                with_excerpts += 1
    assert with_excerpts > 0


def test_every_scenario_is_complete(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    for _, scen in pairs:
        assert scen.hidden_state and scen.fixtures and scen.action_checks, scen.id
        assert {c.pillar for c in scen.criteria} == {"task", "conversation"}, scen.id
        assert scen.reference_path, scen.id
        assert len(scen.reference_path) in (len(scen.brief.plan), len(scen.brief.plan) + 1), scen.id


def _replay_endings(agent: LoadedAgent, scen: Scenario) -> list[tuple[str, bool]]:
    """(tool, success condition met) for each call-ending call of the reference path."""
    fx = ResolvedFixtures(agent.config, scen)
    ending = {c.tool: c for c in agent.config.call_ending_tools}
    counts: dict[str, int] = {}
    out = []
    for turn in scen.reference_path or []:
        for tc in turn.tool_calls:
            j = counts.get(tc.name, 0)
            counts[tc.name] = j + 1
            if tc.name in ending:
                res = fx.answer(tc.name, tc.arguments, j).result
                out.append((tc.name, isinstance(res, dict) and match_fields(ending[tc.name].success, res).ok))
    return out


def test_reference_paths_end_on_a_call_ending_tool(pairs: list[tuple[LoadedAgent, Scenario]]) -> None:
    fail_then_succeed = transfers = 0
    for agent, scen in pairs:
        ends = _replay_endings(agent, scen)
        assert ends and ends[-1][1], (scen.id, ends)
        assert all(not ok for _, ok in ends[:-1]), (scen.id, ends)
        fail_then_succeed += len(ends) > 1
        transfers += ends[-1][0] != "end_call"
    # Call-ending tools that fail once and hand control back; calls whose right outcome is a transfer.
    assert fail_then_succeed >= 1
    assert transfers >= 1


# ---------------------------------------------------------------- (b) the dairy example, fixtures


@pytest.fixture(scope="module")
def mastitis(bundle: Bundle) -> tuple[LoadedAgent, Scenario]:
    return bundle.scenario(MASTITIS)


@pytest.fixture()
def fixtures(mastitis: tuple[LoadedAgent, Scenario]) -> ResolvedFixtures:
    agent, scen = mastitis
    return ResolvedFixtures(agent.config, scen)


def _categories(agent: LoadedAgent) -> list[str]:
    tool = next(t for t in agent.config.tools if t.name == "log_zero_supply_reason")
    return list(tool.parameters["properties"]["category"]["enum"])


def test_mastitis_scenario_values(mastitis: tuple[LoadedAgent, Scenario]) -> None:
    """The constants above are the scenario's: her own centre differs from the society's main one."""
    raw = yaml.safe_load((STARTER / "agents" / DAIRY / "scenarios" / f"{MASTITIS}.yaml").read_text("utf-8"))
    profile = raw["hidden_state"]["member_profile"]
    assert profile["member_id"] == MEMBER
    assert profile["center_code"] == OWN_CENTRE
    assert profile["society"]["main_center_code"] == MAIN_CENTRE
    assert raw["hidden_state"]["campaign"]["shift"] == "evening"
    assert raw["hidden_state"]["vet_record"]["zero_supply_category"] == "cattle_health"
    assert raw["variables"]["member_id"] == MEMBER
    assert mastitis[1].difficulty == "hard"


def test_right_call_confirms(fixtures: ResolvedFixtures) -> None:
    ans = fixtures.answer("log_zero_supply_reason", dict(RIGHT), 0)
    assert ans.outcome == "authored"
    assert ans.result["status"] == "recorded"
    assert ans.result["reason_id"] == "ZR-20260314-0386"


def _wrong_variants(agent: LoadedAgent) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [
        ("main_centre", {**RIGHT, "center_code": MAIN_CENTRE}),
        ("morning", {**RIGHT, "shift": "morning"}),
    ]
    out += [(f"category_{c}", {**RIGHT, "category": c}) for c in _categories(agent) if c != "cattle_health"]
    return out


def test_wrong_centre_shift_or_category_is_not_recorded(
    mastitis: tuple[LoadedAgent, Scenario], fixtures: ResolvedFixtures
) -> None:
    variants = _wrong_variants(mastitis[0])
    assert len(variants) == 2 + 9  # main centre, morning, nine other categories
    for name, args in variants:
        for j in (0, 1):
            ans = fixtures.answer("log_zero_supply_reason", args, j)
            assert ans.outcome == "mismatch", name
            assert ans.result["status"] == "not_recorded", name
            assert ans.result["reason"] == "validation_failed", name


def test_wrong_then_right(fixtures: ResolvedFixtures) -> None:
    first = fixtures.answer("log_zero_supply_reason", {**RIGHT, "category": "animal_dry"}, 0)
    second = fixtures.answer("log_zero_supply_reason", dict(RIGHT), 1)
    assert (first.result["status"], second.result["status"]) == ("not_recorded", "recorded")
    assert first.fields is not None and not first.fields.fields["category"].ok
    assert first.fields.fields["center_code"].ok and first.fields.fields["shift"].ok
    # A third call is beyond the queue: the default, not a confirmation, even with right arguments.
    third = fixtures.answer("log_zero_supply_reason", dict(RIGHT), 2)
    assert third.outcome == "default"
    assert third.result["status"] == "not_recorded"
    assert third.result["reason"] == "retry_limit"


def test_unparseable_arguments_get_the_mismatch_response(fixtures: ResolvedFixtures) -> None:
    ans = fixtures.answer("log_zero_supply_reason", None, 0)
    assert ans.outcome == "mismatch"
    assert ans.result["status"] == "not_recorded"


# ---------------------------------------------------------------- (b) the dairy example, one episode


def _script(wrong_category: str) -> dict[str, Any]:
    """The candidate's replies, one per request (``scripted:file:`` format)."""
    estimate = {"member_id": MEMBER, "center_code": OWN_CENTRE, "date": "2026-03-14", "shift": "evening",
                "cow_litres": 0, "buffalo_litres": 0, "source": "member"}
    details = "એક ગાયને આઉમાં સોજો, ડૉક્ટરે આજનું દૂધ ફેંકી દેવા કહ્યું છે."
    return {"candidate": [
        # turn 0: silent profile lookup, then the opening line
        {"tool_calls": [{"name": "get_member_profile", "arguments": {"member_id": MEMBER}}]},
        "નમસ્તે, હું વાત્રક ડેરી તરફથી ધારા બોલું છું. શું હું શારદાબેન પટેલ સાથે વાત કરી રહી છું?",
        # turn 1: she confirms
        "આભાર શારદાબેન. આજે સાંજે કેન્દ્ર પર ગાયનું આશરે કેટલું દૂધ ભરાવશો?",
        # turn 2: zero
        {"content": "બરાબર, કોઈ વાંધો નહીં. શૂન્ય નોંધી લઉં છું.",
         "tool_calls": [{"name": "record_milk_estimate", "arguments": estimate}]},
        "નોંધાઈ ગયું. કોઈ ખાસ કારણ હોય તો જણાવશો?",
        # turn 3: the reason; a wrong category first, then the right one
        {"content": "કારણ નોંધી લઉં છું.",
         "tool_calls": [{"name": "log_zero_supply_reason",
                         "arguments": {**RIGHT, "category": wrong_category, "details": details}}]},
        {"tool_calls": [{"name": "log_zero_supply_reason", "arguments": {**RIGHT, "details": details}}]},
        "કારણ પણ નોંધાઈ ગયું.",
        # turn 4: she wants to go
        {"content": "આભાર શારદાબેન, આવજો.",
         "tool_calls": [{"name": "end_call",
                         "arguments": {"member_id": MEMBER, "outcome": "zero_supply_recorded"}}]},
    ]}


async def test_episode_wrong_category_then_right(
    bundle: Bundle, mastitis: tuple[LoadedAgent, Scenario], tmp_path: Path
) -> None:
    agent, scen = mastitis
    script = tmp_path / "candidate.yaml"
    script.write_text(yaml.safe_dump(_script("animal_dry"), allow_unicode=True), encoding="utf-8")
    trace = await run_episode(
        agent,
        scen,
        candidate=create_scripted(f"scripted:file:{script}", None, bundle),
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        episode_id=f"{MASTITIS}-wrong-then-right",
        run_seed=7,
        repeat=0,
    )
    assert trace.end_reason == EndReason.CALL_ENDED, trace.skip_reason
    assert not any(m.error for m in trace.messages)
    assert [ct.expressed_steps for ct in trace.caller_turns] == [[s.id] for s in scen.brief.plan]

    zero = [e for e in trace.tool_events if e.name == "log_zero_supply_reason"]
    assert [(e.queue_position, e.outcome) for e in zero] == [(0, "mismatch"), (1, "authored")]
    assert [e.result["status"] for e in zero] == ["not_recorded", "recorded"]
    assert zero[0].arguments is not None and zero[0].arguments["category"] == "animal_dry"
    assert {m.field: m.ok for m in zero[0].matcher_results}["category"] is False
    # The candidate saw exactly those results.
    seen = [json.loads(trace.messages[e.result_message_index].content or "") for e in zero]
    assert [s["status"] for s in seen] == ["not_recorded", "recorded"]

    # The call ends on the candidate's end_call, whose result met the success condition; nothing after.
    last = trace.tool_events[-1]
    assert last.name == "end_call"
    assert (last.call_ending, last.success_condition_met, last.ended_call) == (True, True, True)
    assert trace.messages[-1].role == "tool" and trace.messages[-1].tool_event == last.index
    assert len(trace.caller_turns) == len(scen.brief.plan)

    # The retry still meets the paper's check, and the close comes after it.
    calls = [CallRecord(index=e.index, name=e.name, arguments=e.arguments) for e in trace.tool_events]
    results = {r.id: r for r in evaluate_checks(scen, calls)}
    assert results["reason_cattle_health"].met and results["reason_cattle_health"].count == 1
    assert results["closed_call"].met
    assert results["zero_estimate_recorded"].met
    assert results["no_nonzero_estimate"].met


async def test_episode_main_centre_never_confirms(
    bundle: Bundle, mastitis: tuple[LoadedAgent, Scenario], tmp_path: Path
) -> None:
    """The plausible mistake (the society's main centre) twice: never recorded, check unmet."""
    agent, scen = mastitis
    data = _script("cattle_health")
    for reply in data["candidate"]:
        for tc in reply.get("tool_calls", []) if isinstance(reply, dict) else []:
            if tc["name"] == "log_zero_supply_reason":
                tc["arguments"]["center_code"] = MAIN_CENTRE
    script = tmp_path / "candidate.yaml"
    script.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    trace = await run_episode(
        agent,
        scen,
        candidate=create_scripted(f"scripted:file:{script}", None, bundle),
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        episode_id=f"{MASTITIS}-main-centre",
        run_seed=7,
        repeat=0,
    )
    assert trace.end_reason == EndReason.CALL_ENDED
    zero = [e for e in trace.tool_events if e.name == "log_zero_supply_reason"]
    assert [e.result["status"] for e in zero] == ["not_recorded", "not_recorded"]
    calls = [CallRecord(index=e.index, name=e.name, arguments=e.arguments) for e in trace.tool_events]
    results = {r.id: r for r in evaluate_checks(scen, calls)}
    assert not results["reason_cattle_health"].met
    assert not results["closed_call"].met  # its "after" dependency was never met
