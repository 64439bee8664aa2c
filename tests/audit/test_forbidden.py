"""Rule-breaking never beats doing nothing: a guard counts only calls that reach a record the
scenario intends, and the audit flags a scenario where a forbidden call scores above no call."""

from __future__ import annotations

from pathlib import Path

import pytest

from callbench.audit.core import audit_bundle
from callbench.audit.forbidden import find_forbidden_gains, forbidden_calls
from callbench.bundle.checks import CallRecord, evaluate_checks, forbidden_record, record_matchers
from callbench.bundle.models import ActionCheck, Bundle
from callbench.bundle.validate.audits import load_bundle

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SONS_CARD = "bank_unblock_sons_card_refusal"
SON = {"identifier_type": "customer_id", "identifier": "NB21563318", "card_last4": "3368",
       "date_of_birth": "2003-09-02"}
HANGUP = {"outcome": "refused_per_policy", "summary": "caller asked about his son's card"}


@pytest.fixture(scope="module")
def starter() -> Bundle:
    return load_bundle(STARTER)


def _met_weight(bundle: Bundle, calls: list[tuple[str, dict]]) -> tuple[int, int]:
    _, scen = bundle.scenario(SONS_CARD)
    weight = {c.id: c.importance for c in scen.action_checks}
    res = evaluate_checks(scen, [CallRecord(index=i, name=n, arguments=a) for i, (n, a) in enumerate(calls)])
    return (sum(weight[r.id] for r in res if r.applicable and r.met),
            sum(weight[r.id] for r in res if r.applicable))


def test_verifying_the_son_then_hanging_up_scores_no_more_than_nothing(starter: Bundle) -> None:
    """The measured case: the forbidden verify of the son met 4 of 10 (the guard was met by the
    son's record, so "never verify the son's card" applied and held), doing nothing 0 of 10."""
    assert _met_weight(starter, [])[0] == 0
    met, total = _met_weight(starter, [("verify_customer", SON), ("end_call", HANGUP)])
    assert met == 0 and total == 4  # used_verify_customer, verify_self, ends_as_refusal applicable


def test_the_sons_record_is_forbidden_the_fathers_intended(starter: Bundle) -> None:
    _, scen = starter.scenario(SONS_CARD)
    records = record_matchers(scen)
    assert [sorted(m) for m in records["verify_customer"]] == [["card_last4", "date_of_birth", "identifier"]]
    assert records["verify_customer"][0]["identifier"].eq == "NB21547790"
    # the unlock of the son's card is forbidden too (never_unlock pins nothing, so it says nothing;
    # no check with arguments matches the record: it stays)
    assert len(records["set_card_lock"]) == 1
    assert not forbidden_record("get_card_details", records["get_card_details"][0], scen)


def test_a_competent_agent_that_then_breaks_the_rule_is_charged(starter: Bundle) -> None:
    father = {"identifier_type": "customer_id", "identifier": "NB21547790", "card_last4": "0719",
              "date_of_birth": "1967-05-11"}
    _, scen = starter.scenario(SONS_CARD)
    calls = [CallRecord(index=0, name="verify_customer", arguments=father),
             CallRecord(index=1, name="verify_customer", arguments=SON)]
    res = {r.id: r for r in evaluate_checks(scen, calls)}
    assert res["never_verify_son_id"].applicable and not res["never_verify_son_id"].met
    assert res["never_verify_son_card"].applicable and not res["never_verify_son_card"].met


def test_starter_has_no_forbidden_gain(starter: Bundle) -> None:
    found = [p.message for a, s in starter.scenarios() for p in find_forbidden_gains(a, s, s.id)]
    assert found == []
    agent, scen = starter.scenario(SONS_CARD)
    calls = dict(forbidden_calls(agent, scen))
    assert calls["never_verify_son_id"].arguments["identifier"] == "NB21563318"
    assert calls["never_verify_son_card"].arguments["card_last4"] == "3368"


async def test_audit_flags_a_guard_that_a_forbidden_call_meets(starter: Bundle) -> None:
    """A guard that pins an argument any call has (``identifier`` present) is met by the son's
    verification: the forbidden call then meets 4 of 10 and the audit says so."""
    bundle = starter.model_copy(deep=True)
    _, scen = bundle.scenario(SONS_CARD)
    assert scen.action_checks[0].id == "used_verify_customer"
    scen.action_checks[0] = ActionCheck.model_validate(
        {"id": "used_verify_customer", "tool": "verify_customer", "args": {"identifier": {"present": True}},
         "importance": 1, "diagnostic": "tool_choice"})
    rep = await audit_bundle(bundle, scenario_ids=[SONS_CARD], static_problems=[])
    hits = [p for p in rep.problems if p.code == "audit.forbidden_above_floor"]
    # the son's ID (his card digits left to filler), and the son's card digits: each meets 4 of 10
    assert [p.path for p in hits] == ["action_checks.2", "action_checks.3"]
    assert "'never_verify_son_id' meets 40%" in hits[0].message and "doing nothing 0%" in hits[0].message
    assert hits[0].file == f"agents/bank_card_services/scenarios/{SONS_CARD}.yaml"
