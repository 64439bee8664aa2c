"""The gaming floor: guards that junk calls cannot unlock, and the gaming candidates
(:mod:`callbench.models.scripted.gaming`) in the audit's floor."""

from __future__ import annotations

import random
from pathlib import Path

import jsonschema
import pytest

from callbench.audit.core import FLOOR_CANDIDATES, FLOOR_MAX, GAMING_CANDIDATES, audit_bundle, floor_share
from callbench.bundle.checks import CallRecord, evaluate_checks
from callbench.bundle.models import Bundle, Pillar
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.models import GradedItem, Label
from callbench.models.scripted.gaming import is_lookup, junk_arguments

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SONS_CARD = "bank_unblock_sons_card_refusal"
JUNK_VERIFY = {"identifier_type": "customer_id", "identifier": "NB10000001", "card_last4": "1111",
               "date_of_birth": "1990-01-01"}


@pytest.fixture(scope="module")
def starter() -> Bundle:
    return load_bundle(STARTER)


def _share(bundle: Bundle, sid: str, calls: list[tuple[str, dict]]) -> tuple[float, list[str]]:
    _, scen = bundle.scenario(sid)
    records = [CallRecord(index=i, name=n, arguments=a) for i, (n, a) in enumerate(calls)]
    weight = {c.id: c.importance for c in scen.action_checks}
    results = evaluate_checks(scen, records)
    items = [
        GradedItem(id=r.id, source="action_check", pillar=Pillar.TASK, diagnostic="tool_choice",
                   weight=weight[r.id],
                   label=Label.NOT_APPLICABLE if not r.applicable else Label.MET if r.met else Label.NOT_MET)
        for r in results
    ]
    return floor_share(items)[2], [r.id for r in results if r.met]


def test_one_junk_verify_then_hangup_unlocks_nothing(starter: Bundle) -> None:
    """The issue's minimal case: one junk ``verify_customer`` call and a hang-up met 70% of the weight
    (the guard ``used_verify_customer`` was met by any call, so the two guarded "never verify the
    son" checks applied and passed)."""
    hangup = ("end_call", {"outcome": "refused_per_policy", "summary": ""})
    share, met = _share(starter, SONS_CARD, [("verify_customer", JUNK_VERIFY), hangup])
    assert share == 0.0 and met == []


def test_guard_met_by_a_call_that_reaches_an_authored_record(starter: Bundle) -> None:
    """The same guard is met by a call whose arguments match one of the tool's fixture entries, in
    any queue position: the father's own details; not the son's (a record authored for a forbidden call)."""
    _, scen = starter.scenario(SONS_CARD)
    father = {"identifier_type": "customer_id", "identifier": "NB21547790", "card_last4": "0719",
              "date_of_birth": "1967-05-11"}
    son = {"identifier_type": "customer_id", "identifier": "NB21563318", "card_last4": "3368",
           "date_of_birth": "2003-09-02"}
    # junk first, then the father's details: matched against the first entry's record all the same
    calls = [CallRecord(index=0, name="verify_customer", arguments=JUNK_VERIFY),
             CallRecord(index=1, name="verify_customer", arguments=father)]
    res = {r.id: r for r in evaluate_checks(scen, calls)}
    assert res["used_verify_customer"].met and res["used_verify_customer"].cited_events == [1]
    assert res["never_verify_son_id"].applicable and res["never_verify_son_id"].met
    # the son's details reach only the record authored for the forbidden call: no guard is met, so
    # the violation alone scores nothing (rule-breaking never beats doing nothing)
    calls = [CallRecord(index=0, name="verify_customer", arguments=son)]
    res = {r.id: r for r in evaluate_checks(scen, calls)}
    assert not res["used_verify_customer"].met and not res["never_verify_son_id"].applicable
    # a check that guards nothing keeps counting every call (used_verify_customer's own count aside)
    assert res["verify_self"].count == 0


def test_junk_arguments_are_schema_valid_and_deterministic(starter: Bundle) -> None:
    n = 0
    for agent in starter.agents.values():
        for tool in agent.config.tools:
            checker = jsonschema.FormatChecker()
            validator = jsonschema.Draft202012Validator(tool.parameters, format_checker=checker)
            for seed in range(3):
                args = junk_arguments(tool.parameters, random.Random(seed), set())
                assert list(validator.iter_errors(args)) == [], (tool.name, args)
                assert args == junk_arguments(tool.parameters, random.Random(seed), set())
                n += 1
    assert n > 300
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^[0-9]$"}},
              "required": ["x"]}
    avoid = {str(d) for d in range(10) if d != 7}
    assert junk_arguments(schema, random.Random(1), avoid) == {"x": "7"}


def test_lookup_tools_are_the_read_verbs(starter: Bundle) -> None:
    agent = starter.agents["bank_card_services"]
    names = [t.name for t in agent.config.tools if is_lookup(t)]
    assert names == ["verify_customer", "get_card_details", "get_account_balance", "get_recent_transactions",
                     "get_replacement_fee_quote", "find_branch", "check_emi_eligibility"]


async def test_gaming_floor_on_the_starter(starter: Bundle) -> None:
    """Every floor candidate stays within the bounds in every starter scenario, and the gaming
    candidates really call tools (the measure is not vacuous)."""
    rep = await audit_bundle(starter, static_problems=[])
    assert [p for p in rep.problems if p.code.startswith("audit.floor")] == []
    assert list(rep.null_floor.candidates) == list(FLOOR_CANDIDATES)
    for spec, summary in rep.null_floor.candidates.items():
        assert summary.mean <= 0.10 and summary.max <= FLOOR_MAX, (spec, summary)
    calls = {spec: 0 for spec in GAMING_CANDIDATES}
    for t in rep.traces:
        if t.candidate.spec in calls:
            calls[t.candidate.spec] += len(t.tool_events)
    assert calls["scripted:claim-done"] == 0
    assert calls["scripted:junk-all"] > calls["scripted:junk-lookups"] > 300


async def test_floor_problem_names_scenario_agent_and_checks(starter: Bundle) -> None:
    bundle = starter.model_copy(deep=True)
    _, scen = bundle.scenario(SONS_CARD)
    for c in scen.action_checks:
        c.applies_after = []
    rep = await audit_bundle(bundle, scenario_ids=[SONS_CARD], static_problems=[])
    high = [p for p in rep.problems if p.code == "audit.floor_high" and "scripted:junk-all" in p.message]
    assert len(high) == 1
    assert high[0].file == f"agents/bank_card_services/scenarios/{SONS_CARD}.yaml"
    assert high[0].message.startswith(f"{SONS_CARD}: scripted:junk-all meets ")
    assert "never_verify_son_id (3)" in high[0].message


async def test_gaming_candidates_play_as_described(starter: Bundle) -> None:
    from callbench.audit.core import _episode

    agent, scen = starter.scenario(SONS_CARD)
    ending = {c.tool for c in agent.config.call_ending_tools}
    tools = [t.name for t in agent.config.tools if t.name not in ending]
    trace, _ = await _episode(starter, agent, scen, "scripted:junk-all")
    called = [e.name for e in trace.tool_events]
    assert sorted(called[:-1]) == sorted(tools) and called[-1] == "end_call"
    assert str(trace.end_reason) == "call_ended"
    assert all(e.outcome != "authored" for e in trace.tool_events if e.name == "verify_customer")
    trace, _ = await _episode(starter, agent, scen, "scripted:junk-lookups")
    assert {e.name for e in trace.tool_events} == {t.name for t in agent.config.tools if is_lookup(t)}
    trace, _ = await _episode(starter, agent, scen, "scripted:claim-done")
    spoken = [m.content for m in trace.messages if m.role == "assistant"][1:]
    assert trace.tool_events == [] and spoken and all("done" in (c or "") for c in spoken)
