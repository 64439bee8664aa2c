"""The batch plan (mixes, determinism), near-duplicate similarity, and the coverage report of
``callbench inspect``."""

from __future__ import annotations

from pathlib import Path

import pytest

from callbench.bundle.coverage import agent_coverage, document_sections
from callbench.bundle.models import Scenario
from callbench.bundle.render import render_instructions
from callbench.bundle.validate.audits import load_bundle
from callbench.generate.duplicates import fact_values, intent_words, jaccard, near_duplicate
from callbench.generate.plan import PlanError, make_plan, parse_mix

from .conftest import AGENT, DATA, VALID, invoke

STARTER = Path(__file__).resolve().parents[2] / "src" / "callbench" / "examples" / "starter"


def test_mix_parsing() -> None:
    assert parse_mix("medium=4,hard=6", 10, ("medium", "hard"), "--difficulty") == {"medium": 4, "hard": 6}
    assert parse_mix("hi,en,ta", 10, None, "--languages") == {"hi": 4, "en": 3, "ta": 3}
    assert parse_mix("medium=3,hard=0", 3, ("medium", "hard"), "--difficulty") == {"medium": 3}
    with pytest.raises(PlanError, match="'easy' is not one of medium, hard"):
        parse_mix("easy=3", 3, ("medium", "hard"), "--difficulty")
    with pytest.raises(PlanError, match="is not NAME=COUNT"):
        parse_mix("medium=x,hard=1", 2, ("medium", "hard"), "--difficulty")


def test_plan_is_seeded_and_covers_the_mix() -> None:
    agent = load_bundle(STARTER).agents["lpg_gas_helpline"]
    text = render_instructions(agent)
    a = make_plan(
        agent,
        text,
        n=10,
        seed=3,
        languages=parse_mix("hi=4,en=3,ta=3", 10, None, "l"),
        difficulty={"medium": 5, "hard": 5},
    )
    b = make_plan(
        agent,
        text,
        n=10,
        seed=3,
        languages=parse_mix("hi=4,en=3,ta=3", 10, None, "l"),
        difficulty={"medium": 5, "hard": 5},
    )
    c = make_plan(agent, text, n=10, seed=4, languages={}, difficulty={})
    assert a == b and a != c
    langs = [i.language for i in a.items]
    assert sorted(langs) == sorted(["hi-IN"] * 4 + ["en-IN"] * 3 + ["ta-IN"] * 3)
    assert sorted(i.difficulty for i in a.items) == ["hard"] * 5 + ["medium"] * 5
    assert len({i.failure_mode for i in a.items}) == 10  # ten distinct failure modes
    covered = {s for i in a.items for s in i.sections}
    sections = [s.title for s in document_sections(text)]
    assert covered <= set(sections) and len(covered) >= 10
    tool_names = {t.name for t in agent.config.tools}
    assert all(i.tools and set(i.tools) <= tool_names for i in a.items)


def test_near_duplicate_needs_same_intent_and_same_facts() -> None:
    import yaml

    base = Scenario.model_validate(yaml.safe_load((DATA / f"{VALID}.yaml").read_text(encoding="utf-8")))
    copy = base.model_copy(update={"id": "copy", "title": base.title + " again"})
    match = near_duplicate(copy, [base])
    assert match is not None and match.scenario_id == VALID and match.facts == 1.0 and match.intent > 0.8
    other_facts = base.model_copy(
        update={
            "id": "other",
            "brief": base.brief.model_copy(
                update={"known_facts": {"name": "Someone Else", "consumer_number": "1112223334"}}
            ),
        }
    )
    assert near_duplicate(other_facts, [base]) is None
    assert jaccard(set(), set()) == 1.0 and jaccard({"a"}, {"b"}) == 0.0
    assert "tanker" in intent_words(base) and "4417093562" in fact_values(base)


def test_sections_skip_fenced_code() -> None:
    text = "intro\n# One\nbody\n```\n# not a heading\n```\n## Two\nmore\n"
    assert [(s.title, s.level) for s in document_sections(text)] == [
        ("(preamble)", 0),
        ("One", 1),
        ("Two", 2),
    ]


def test_coverage_reports_gaps(agent_bundle: Path) -> None:
    scen = agent_bundle / "agents" / AGENT / "scenarios" / f"{VALID}.yaml"
    text = (DATA / f"{VALID}.yaml").read_text(encoding="utf-8")
    scen.write_text(text, encoding="utf-8")
    cov = agent_coverage(load_bundle(agent_bundle).agents[AGENT])
    used = {u.name: u.scenarios for u in cov.sections}
    mentioned = {u.name: u.mentioned for u in cov.sections}
    assert used["Supply complaints"] == [VALID]  # an excerpt is quoted from it
    # the check 'verified' grades verify_consumer, which only this section names: tested
    assert used["Verifying the caller"] == [VALID]
    # the reference path calls end_call, which the section names, but nothing grades it: only
    # mentioned, so not exercised
    assert used["Ending the call"] == [] and mentioned["Ending the call"] == [VALID]
    assert cov.unexercised_sections == [
        "Jal Seva water helpline: operating instructions", "Ending the call"]  # Call context: call data
    assert cov.mentioned_only_sections == ["Ending the call"]
    import json

    code, out, _ = invoke("inspect", str(agent_bundle), "--json")
    shown = json.loads(out)["coverage"][0]
    assert code == 0 and shown["mentioned_only_sections"] == ["Ending the call"]
    assert {u["name"]: u["mentioned"] for u in shown["sections"]}["Ending the call"] == [VALID]
    assert cov.unexercised_tools == []
    # drop the booking: book_tanker is then only under the negative check
    import yaml

    data = yaml.safe_load(text)
    data["action_checks"] = [c for c in data["action_checks"] if c["id"] != "evening_booked"]
    data["reference_path"][4]["tool_calls"] = []
    data["reference_path"][4].pop("before_tools")
    scen.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    cov = agent_coverage(load_bundle(agent_bundle).agents[AGENT])
    assert cov.unexercised_tools == ["book_tanker"] and cov.only_negative == ["book_tanker"]
    code, out, _ = invoke("inspect", str(agent_bundle), "--agent", AGENT)
    assert code == 0 and "book_tanker" in out and "NONE" in out
    code, _, err = invoke("inspect", str(agent_bundle), "--agent", "nobody")
    assert code == 2 and "no agent 'nobody'" in err


def test_inspect_json_has_coverage_of_the_starter() -> None:
    import json

    code, out, _ = invoke("inspect", str(STARTER), "--json")
    assert code == 0
    data = json.loads(out)
    cov = {c["agent"]: c for c in data["coverage"]}
    assert len(cov) == 10 and all(c["scenarios"] == 10 for c in cov.values())
    # every starter tool is exercised by some scenario of its agent
    assert sum(len(c["tools"]) for c in cov.values()) == data["tools_total"]


def test_request_schema_spells_out_any_value_and_accepts_the_same_scenarios() -> None:
    import jsonschema
    import yaml

    from callbench.bundle.models import Scenario as S
    from callbench.bundle.schema import file_schema
    from callbench.generate.request import ANY_JSON, scenario_schema
    from callbench.models.remote.schemas import subschemas

    schema = scenario_schema()
    seen: list[dict[str, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            seen.append(node)
            for sub in subschemas(node):
                walk(sub)

    walk(schema)
    for d in schema["$defs"].values():
        walk(d)
    assert all(not set(n) <= {"title", "description", "default", "examples"} for n in seen)
    assert any(n.get("type") == ANY_JSON["type"] for n in seen)
    data = yaml.safe_load((DATA / f"{VALID}.yaml").read_text(encoding="utf-8"))
    for s in (schema, file_schema(S, "scenario.schema.json")):
        jsonschema.Draft202012Validator(s).validate(data)
        assert not jsonschema.Draft202012Validator(s).is_valid({**data, "difficulty": "easy"})
