"""Causal reference paths: a reference call uses only values known before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from callbench.audit.causal import noncausal_values
from callbench.audit.core import REFERENCE_CANDIDATE, _episode, audit_bundle
from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
BALANCE = "bank_balance_salary_check"
FILE = f"agents/bank_card_services/scenarios/{BALANCE}.yaml"


@pytest.fixture
def starter() -> Bundle:
    return load_bundle(STARTER)


async def test_starter_reference_paths_are_causal(starter: Bundle) -> None:
    rep = await audit_bundle(starter, static_problems=[])
    assert [p for p in rep.problems if p.code == "audit.reference_noncausal"] == []
    assert all(s.reference_met for s in rep.scenarios)  # replay still meets every check
    marked = [c for _, s in starter.scenarios() for t in s.reference_path or [] for c in t.tool_calls]
    assert sum(c.after_results for c in marked) == 47  # the fix is in the data: dependent calls wait


async def test_a_value_from_a_result_of_the_same_message_is_located(starter: Bundle) -> None:
    """The starter before the fix: verify_customer and get_account_balance sent together, the
    balance call using the account ID and customer ID that verify_customer returns."""
    _, scen = starter.scenario(BALANCE)
    call = scen.reference_path[4].tool_calls[1]  # type: ignore[index]
    assert call.name == "get_account_balance" and call.after_results
    call.after_results = False
    rep = await audit_bundle(starter, scenario_ids=[BALANCE], static_problems=[])
    got = [(p.file, p.path) for p in rep.problems if p.code == "audit.reference_noncausal"]
    assert got == [
        (FILE, "reference_path.4.tool_calls.1.arguments.customer_id"),
        (FILE, "reference_path.4.tool_calls.1.arguments.account_id"),
    ]
    msg = next(p.message for p in rep.problems if p.path.endswith("account_id"))
    assert "'SB4410287356'" in msg and "the result of verify_customer in the same" in msg


async def test_separate_messages_on_replay(starter: Bundle) -> None:
    """``after_results`` sends the call in its own assistant message after the first results."""
    agent, scen = starter.scenario(BALANCE)
    trace, ep = await _episode(starter, agent, scen, REFERENCE_CANDIDATE)
    ev = {e.name: e for e in trace.tool_events}
    verify, balance = ev["verify_customer"], ev["get_account_balance"]
    assert verify.message_index < verify.result_message_index < balance.message_index
    assert trace.messages[balance.message_index].content is None
    assert trace.messages[verify.message_index].content == scen.reference_path[4].before_tools  # type: ignore[index]
    assert all(c.label == "met" for c in ep.checks)


async def test_hidden_value_no_result_returns_is_flagged(starter: Bundle) -> None:
    """The starter before the fix: the clinic reference asked for doctor DR201's slots, an ID only the
    hidden state and the fixtures hold (the fix asks for the paediatrics department)."""
    sid = "clinic_child_fever_no_advice"
    agent, scen = starter.scenario(sid)
    args = scen.reference_path[3].tool_calls[1].arguments  # type: ignore[index]
    assert args.pop("department") == "paediatrics"
    args["doctor_id"] = "DR201"
    trace, _ = await _episode(starter, agent, scen, REFERENCE_CANDIDATE)
    [nc] = noncausal_values(agent, scen, trace)
    assert (nc.turn, nc.call, nc.tool, nc.path, nc.value, nc.source) == (
        3, 1, "get_doctor_availability", "doctor_id", "DR201", ""
    )


async def test_values_known_in_another_form_are_causal(starter: Bundle) -> None:
    """The same IDs in the call context (a scenario variable), spaced, hyphenated and lower-case: known
    before the call,
    so sending the calls together is no longer a problem."""
    agent, scen = starter.scenario(BALANCE)
    scen.reference_path[4].tool_calls[1].after_results = False  # type: ignore[index]
    trace, _ = await _episode(starter, agent, scen, REFERENCE_CANDIDATE)
    assert len(noncausal_values(agent, scen, trace)) == 2
    scen.variables["on_screen"] = "sb 4410 287356 / nb-3190-4467"
    trace, _ = await _episode(starter, agent, scen, REFERENCE_CANDIDATE)
    assert noncausal_values(agent, scen, trace) == []
