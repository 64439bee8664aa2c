"""Sections tested, not just named: a plan item names the
sections its scenario must test; an answer that does not test one (by a criterion quoting it or
an action check on a tool or code value only it names) is sent back with a located problem; a
Vapi-style prompt (Liquid variables, [Bracketed] sections, numbered steps of two flows) imports,
every section with something to test is planned, and the scripted generator's scenarios test each."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import yaml

from callbench.bundle.coverage import agent_coverage
from callbench.bundle.render import render_instructions
from callbench.bundle.section_tests import scenario_sections
from callbench.bundle.sections import document_sections
from callbench.bundle.validate.audits import load_bundle
from callbench.generate.contract import section_problems
from callbench.generate.generator import GenerateOptions, generate_batch
from callbench.generate.manifest import load_manifest
from callbench.generate.plan import PlanItem
from callbench.generate.review import pending, render_pending
from callbench.models.registry import create_client

from .conftest import AGENT, DATA, SCRIPT, VALID, invoke

PROMPTS = DATA / "prompts"
FILE = f"agents/{AGENT}/scenarios/{VALID}.yaml"


def _water() -> dict[str, Any]:
    data = yaml.safe_load((DATA / f"{VALID}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _item(sections: list[str]) -> PlanItem:
    return PlanItem(index=0, language="en-IN", difficulty="medium", sections=sections, tools=[],
                    failure_mode="f", channel="a clean channel")


def test_an_untested_section_is_a_located_problem(agent_bundle: Path) -> None:
    agent = load_bundle(agent_bundle).agents[AGENT]
    item = _item(["Supply complaints", "Verifying the caller", "Ending the call",
                  "Jal Seva water helpline: operating instructions"])
    probs = section_problems(item, agent, _water(), FILE)
    # Supply complaints is quoted by a criterion, Verifying the caller graded by the check
    # 'verified' on verify_consumer (named only there); the other two are not tested
    assert [(p.file, p.path, p.code) for p in probs] == [(FILE, "criteria", "generate.plan_section")] * 2
    ending, intro = probs
    assert "plan item 1 asks to test section 'Ending the call'" in ending.message
    # the reference path calls end_call, which the section names: that only mentions it
    assert "only mentions it" in ending.message and "only mentions it" not in intro.message
    assert "Before you end the call, ask whether there is anything else." in ending.message
    # a check on end_call, named only by that section, tests it; so does a criterion quoting it
    data = _water()
    data["action_checks"].append({"id": "ended", "tool": "end_call", "after": ["evening_booked"]})
    data["criteria"].append({"id": "spoken", "pillar": "conversation", "statement": "Says numbers as words.",
                             "anchors": {"met": "m", "partial": "p", "not_met": "n"},
                             "diagnostic": "speakability",
                             "excerpts": ["never use lists or markdown in speech."]})
    assert section_problems(item, agent, data, FILE) == []


def test_the_repair_loop_sends_untested_sections_back(agent_bundle: Path, tmp_path: Path) -> None:
    script = yaml.safe_load(SCRIPT.read_text(encoding="utf-8"))
    by_section = script["follow_plan"].pop("sections")
    fixed = _water()
    fixed["criteria"] += list(by_section.values())
    folder = tmp_path / "script"
    folder.mkdir()
    shutil.copy(DATA / f"{VALID}.yaml", folder / f"{VALID}.yaml")
    answers = folder / "answers.yaml"
    answers.write_text(yaml.safe_dump({"follow_plan": script["follow_plan"], "items": [[
        f"{VALID}.yaml", fixed]]}, sort_keys=False), encoding="utf-8")
    client = create_client(f"scripted:generator:{answers}")
    # one item asked for five sections: every section of the water document with something to test
    outcome = asyncio.run(generate_batch(agent_bundle, client,
                                         GenerateOptions(agent=AGENT, n=1, seed=2, sections_per_item=5)))
    assert outcome.written == [VALID] and outcome.failed == []
    record = load_manifest(agent_bundle).scenarios[VALID]
    first = record.audit[0].problems
    assert record.attempts == 2 and len(first) == 2
    assert all("[generate.plan_section]" in p and p.startswith(f"{FILE}:criteria:") for p in first)
    assert record.audit[1].problems == []
    assert record.planned is not None and record.written is not None
    assert sorted(record.planned.sections) == sorted(record.written.sections) == sorted([
        "Jal Seva water helpline: operating instructions", "Verifying the caller", "Supply complaints",
        "Water tankers", "Ending the call"])  # Call context holds only the call's date: not planned


def test_vapi_prompt_imports_plans_every_section_and_the_scenarios_test_each(tmp_path: Path) -> None:
    root = tmp_path / "b"
    code, out, err = invoke("new-agent", str(root), "--prompt", str(PROMPTS / "vapi_vet.md"), "--tools",
                            str(PROMPTS / "vapi_vet_tools.json"), "--id", "vapi_vet", "--languages", "en-US",
                            "--call-ending", "end_call", "--success", "end_call:status=ended")
    assert code == 0, out + err
    agent = load_bundle(root).agents["vapi_vet"]
    rendered = render_instructions(agent)
    # the Liquid expressions became declared variables with their defaults, the date filter jinja2
    assert agent.config.variables["clinic_name"] == "Cedar Hollow Animal Hospital"
    assert "| date: " not in agent.instructions_template and "now | date(" in agent.instructions_template
    body = [s.title for s in document_sections(rendered) if rendered[s.start:s.end].count("\n") > 1]
    assert body == ["Identity", "Style", "Response Guidelines", "Booking Flow > 1. Identify",
                    "2. Choose a slot", "3. Confirm", "Cancellation Flow > 1. Identify", "2. Confirm",
                    "Call Closing"]
    client = create_client(f"scripted:generator:{PROMPTS / 'vapi_vet_script.yaml'}")
    outcome = asyncio.run(generate_batch(root, client,
                                         GenerateOptions(agent="vapi_vet", n=3, seed=1, sections_per_item=3)))
    assert outcome.failed == [] and len(outcome.written) == 3, outcome
    manifest = load_manifest(root)
    [batch] = manifest.batches.values()
    planned = [set(i["sections"]) for i in batch.plan]
    # every section with body text is planned, three to an item, none twice
    assert sorted(t for p in planned for t in p) == sorted(body) and all(len(p) == 3 for p in planned)
    loaded = load_bundle(root).agents["vapi_vet"]
    by_id = {s.id: s for s in loaded.scenarios}
    for sid in outcome.written:
        rec = manifest.scenarios[sid]
        want = planned[rec.item]
        tested = scenario_sections(loaded, by_id[sid]).tested
        assert want <= set(tested), (sid, want, tested)  # the written scenario tests its sections
        assert rec.written is not None and want <= set(rec.written.sections)
        # each planned section is tested by a criterion quoting it or a check only it grades
        assert all(tested[t] for t in want)
    # the reviewer reads what each scenario was to test and what it tests
    shown = render_pending(pending(root, "vapi_vet")[0])
    rec = manifest.scenarios[pending(root, "vapi_vet")[0].scenario_id]
    assert rec.planned is not None and rec.written is not None
    assert f"sections to test: {'; '.join(rec.planned.sections)}" in shown
    assert f"sections tested: {'; '.join(rec.written.sections)}" in shown
    cov = agent_coverage(loaded)
    assert [u.name for u in cov.sections] == body
    assert cov.unexercised_sections == [] and cov.mentioned_only_sections == []
    # 2. Confirm (cancellation) is tested by the check on cancel_appointment, named only there,
    # as well as by its criterion
    tested = scenario_sections(loaded, by_id["vet_move_vaccine_visit"]).tested
    assert "action check cancelled on cancel_appointment, named only here" in tested["2. Confirm"]
    assert "Today is Tuesday, May 12, 2026." in render_instructions(loaded, by_id["vet_move_vaccine_visit"])
