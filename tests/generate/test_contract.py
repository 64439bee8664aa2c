"""The plan is a contract: language, difficulty and asked channel event kinds
are checked against the plan item and sent back for repair; the manifest records what was written
beside what was planned."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from callbench.generate.contract import channel_kinds, plan_problems
from callbench.generate.generator import GenerateOptions, generate_batch
from callbench.generate.manifest import load_manifest
from callbench.generate.plan import PlanItem
from callbench.models.registry import create_client

from .conftest import AGENT, DATA, VALID

FILE = f"agents/{AGENT}/scenarios/{VALID}.yaml"


def _item(**kw: Any) -> PlanItem:
    base: dict[str, Any] = dict(index=1, language="es-US", difficulty="hard", sections=["x"], tools=[],
                                failure_mode="f", channel="an ASR double and a VAD split",
                                channel_kinds=["asr_double", "vad_split"])
    return PlanItem(**{**base, **kw})


def _scenario() -> dict[str, Any]:
    data = yaml.safe_load((DATA / f"{VALID}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_language_difficulty_and_channel_must_match_the_item() -> None:
    # the measured case: es-US asked, en-US written; hard with an ASR double and a VAD split
    # asked, medium with a clean channel written
    data = _scenario()
    probs = plan_problems(_item(), data, FILE)
    assert [(p.path, p.code) for p in probs] == [
        ("language", "generate.plan_language"),
        ("brief.language", "generate.plan_language"),
        ("difficulty", "generate.plan_difficulty"),
        ("channel", "generate.plan_channel"),
        ("channel", "generate.plan_channel"),
    ]
    assert probs[0].file == FILE and "plan item 2 asks for language 'es-US'" in probs[0].message
    assert "asks for a asr double event" in probs[3].message
    assert "asks for a vad split event" in probs[4].message


def test_a_matching_scenario_has_no_problem_and_clean_means_clean() -> None:
    data = _scenario()
    data["difficulty"] = "hard"
    data["channel"] = {"asr_events": [{"step": "s", "kind": "double", "span": "okay"}],
                       "vad_splits": [{"step": "s", "after": ["441"]}]}
    assert plan_problems(_item(language="en-IN"), data, FILE) == []
    clean = _item(language="en-IN", channel="a clean channel", channel_kinds=[])
    [p] = plan_problems(clean, data, FILE)
    assert p.code == "generate.plan_channel" and "asr_double, vad_split" in p.message
    data["channel"] = {"seeded_noise": False, "asr_events": [], "vad_splits": []}
    assert plan_problems(clean, data, FILE) == []


def test_channel_kinds() -> None:
    assert channel_kinds({"seeded_noise": True, "asr_events": [{"kind": "drop"}, {"kind": "drop"}]}) == [
        "asr_drop", "seeded_noise"]
    assert channel_kinds(None) == [] and channel_kinds({"asr_events": ["x"]}) == []


def test_a_scenario_off_plan_is_sent_back_and_not_written(agent_bundle: Path, script: Path) -> None:
    # the same answer without follow_plan: medium, clean channel; seed 0 plans hard + double + VAD
    answers = script.parent / "off_plan.yaml"
    answers.write_text(yaml.safe_dump({"items": [[f"{VALID}.yaml"]]}), encoding="utf-8")
    outcome = asyncio.run(generate_batch(
        agent_bundle, create_client(f"scripted:generator:{answers}"), GenerateOptions(agent=AGENT, n=1)))
    assert outcome.written == []
    [failed] = outcome.failed
    assert failed.attempts == 3 and failed.reason == "audit"
    codes = [p.split("[")[1].split("]")[0] for p in failed.last_problems]
    assert codes.count("generate.plan_difficulty") == 1 and codes.count("generate.plan_channel") == 2


def test_manifest_records_written_beside_planned(agent_bundle: Path, script: Path) -> None:
    client = create_client(f"scripted:generator:{script}")
    outcome = asyncio.run(generate_batch(agent_bundle, client, GenerateOptions(agent=AGENT, n=3, seed=7)))
    m = load_manifest(agent_bundle)
    batch = m.batches[outcome.batch_id]
    for sid in outcome.written:
        rec = m.scenarios[sid]
        assert rec.planned is not None and rec.written is not None
        # what was asked is what was written; the sections written are those tested, a superset
        assert rec.written.model_dump(exclude={"sections"}) == rec.planned.model_dump(exclude={"sections"})
        assert rec.planned.sections and set(rec.planned.sections) <= set(rec.written.sections)
        on_disk = yaml.safe_load((agent_bundle / rec.file).read_text(encoding="utf-8"))
        assert on_disk["difficulty"] == rec.written.difficulty
        assert channel_kinds(on_disk["channel"]) == rec.written.channel
    assert batch.written_languages == {"en-IN": len(outcome.written)}
    assert sum(batch.written_difficulty.values()) == len(outcome.written)
    assert [m.scenarios[s].planned.channel for s in outcome.written] == [  # type: ignore[union-attr]
        ["seeded_noise"], ["vad_split"]]


def test_repair_loop_refuses_known_facts_that_copy_hidden_values(agent_bundle: Path, script: Path) -> None:
    # caller isolation in the loop: the same scenario without its caller_known declarations
    script_data = yaml.safe_load(script.read_text(encoding="utf-8"))
    answers = script.parent / "undeclared.yaml"
    answers.write_text(yaml.safe_dump({"follow_plan": script_data["follow_plan"], "items": [[
        {"file": f"{VALID}.yaml", "delete": ["caller_known"]}]]}), encoding="utf-8")
    outcome = asyncio.run(generate_batch(
        agent_bundle, create_client(f"scripted:generator:{answers}"), GenerateOptions(agent=AGENT, n=1)))
    assert outcome.written == []
    [failed] = outcome.failed
    assert any("[isolation.known_fact]" in p and "caller_known.consumer_number" in p
               for p in failed.last_problems)
