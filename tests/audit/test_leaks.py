"""Leaks as a kind: a value the candidate must learn from a tool call is found in
what it reads in any normalised form. Each leak the issue planted and the audit missed is a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from callbench.audit.leaks import find_leaks, hidden_values, identifying, leaks
from callbench.audit.normal import amounts, fold
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.validate.audits import load_bundle

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
DISPUTE = "bank_duplicate_charge_dispute"
BALANCE = "bank_balance_salary_check"
FILES = {
    "agent": "agents/bank_card_services/agent.yaml",
    "prompt": "agents/bank_card_services/prompt.md",
    "scenario": f"agents/bank_card_services/scenarios/{DISPUTE}.yaml",
}


@pytest.fixture(scope="module")
def starter() -> Bundle:
    return load_bundle(STARTER)


def _planted(starter: Bundle, sid: str, line: str) -> tuple[LoadedAgent, Scenario]:
    agent, scen = starter.scenario(sid)
    planted = agent.model_copy(deep=True)
    planted.instructions_template += f"\n{line}\n"
    return planted, scen


def _found(agent: LoadedAgent, scen: Scenario) -> list[tuple[str, str, str]]:
    return [(lk.where, lk.value.path, lk.value.text) for lk in leaks(agent, scen)]


@pytest.mark.parametrize(
    "written",
    ["sb3309418826", "SB 3309 418826", "sb-3309-418826", "S.B. 3309/418826", "ＳＢ３３０９４１８８２６"],
)
def test_case_spacing_and_separators(starter: Bundle, written: str) -> None:
    agent, scen = _planted(starter, DISPUTE, f"For example {written} is read in groups.")
    assert _found(agent, scen) == [("prompt", "hidden_state.savings_account.account_id", "SB3309418826")]
    [lk] = leaks(agent, scen)
    assert lk.line == agent.instructions_template.rstrip("\n").count("\n") + 1


@pytest.mark.parametrize("digits", ["३३०९४१८८२६", "௩௩௦௯௪௧௮௮௨௬", "૩૩૦૯૪૧૮૮૨૬", "৩৩০৯৪১৮৮২৬"])
def test_digits_of_other_scripts(starter: Bundle, digits: str) -> None:
    agent, scen = _planted(starter, DISPUTE, f"உதாரணம்: SB{digits}")
    assert _found(agent, scen) == [("prompt", "hidden_state.savings_account.account_id", "SB3309418826")]


@pytest.mark.parametrize("written", ["₹48,213.50", "48213.50 rupees", "Rs. 48,213.5", "૪૮,૨૧૩.૫૦"])
def test_decimal_amounts(starter: Bundle, written: str) -> None:
    """The hidden balance 48213.5 (a float: amounts of five or more digits identify) in any numeric
    form; the salary credit 38650 as 38,650.00."""
    agent, scen = _planted(starter, BALANCE, f"Example: a balance of {written}.")
    assert _found(agent, scen) == [("prompt", "hidden_state.savings_account.available_balance", "48213.5")]
    agent, scen = _planted(starter, BALANCE, "Example: a credit of 38,650.00.")
    assert _found(agent, scen) == [("prompt", "hidden_state.salary_credit.amount", "38650")]
    # an amount that only shares digits is no leak
    agent, scen = _planted(starter, BALANCE, "Example: a credit of 38,651.00 or 4,821.35.")
    assert _found(agent, scen) == []


def test_enum_exempts_only_as_the_fields_own_vocabulary(starter: Bundle) -> None:
    """A hidden reference that is also planted in a tool's enum is no longer exempt anywhere: the
    prompt copy is a leak, and the enum copy is a scenario hiding a public option."""
    agent, scen = _planted(starter, DISPUTE, "For example DSP26031100418 is read in groups.")
    tool = next(t for t in agent.config.tools if t.name == "block_card")
    tool.parameters["properties"]["reason"]["enum"].append("DSP26031100418")
    problems = find_leaks(agent, scen, FILES)
    got = sorted((p.code, p.file, p.path) for p in problems)
    assert got == [
        ("audit.hidden_enum", FILES["scenario"], "hidden_state.dispute_reference"),
        ("audit.leak", FILES["prompt"], ""),
    ]
    enum = next(p for p in problems if p.code == "audit.hidden_enum")
    assert "tools.4.parameters.properties.reason.enum.3" in enum.message and "'block_card'" in enum.message
    # a transfer destination is the vocabulary of the field it is matched on: the emergency prompt
    # names medical_desk_108 and no scenario's use of it is a leak or a hidden option
    agent, scen = starter.scenario("emg_hi_child_caller_prank_history")
    assert "medical_desk_108" in agent.instructions_template
    assert "medical_desk_108" not in {h.text for h in hidden_values(scen, agent)}
    assert find_leaks(agent, scen, FILES) == []


def test_hidden_value_through_a_scenario_variable(starter: Bundle) -> None:
    agent, scen = starter.scenario(DISPUTE)
    planted = scen.model_copy(deep=True)
    planted.variables["case_note"] = "Open dispute dsp 2603 1100 418"
    [p] = find_leaks(agent, planted, FILES)
    assert (p.code, p.file, p.path) == ("audit.leak", FILES["scenario"], "variables.case_note")
    assert "hidden_state.dispute_reference" in p.message and "'DSP26031100418'" in p.message
    # call context given on purpose is not a leak: the parcel scenarios show the AWB the reference
    # path looks the shipment up with; the caller's own customer ID is not one either
    a, s = starter.scenario("parcel_failed_attempt_weekend_slot")
    assert s.variables["awb"] == "784512093361" and leaks(a, s) == []
    planted.variables = {"case_note": "Customer NB27730148"}
    assert find_leaks(agent, planted, FILES) == []


def test_starter_has_no_leak_in_any_normalised_form(starter: Bundle) -> None:
    found = {s.id: _found(a, s) for a, s in starter.scenarios() if leaks(a, s)}
    assert found == {}
    searched = [h for a, s in starter.scenarios() for h in hidden_values(s, a)]
    assert len(searched) > 900 and sum(h.learned for h in searched) > 700  # the measure is not vacuous


def test_normal_forms() -> None:
    assert fold("SB 3309-418826") == fold("sb3309418826") == "sb3309418826"
    assert fold("௩௩௦௯") == "3309"
    assert amounts("₹1,500.00, 1,50,000 and 1500") == amounts("1500 150000") and len(amounts("1500.0")) == 1
    assert identifying(18450.75) == "18450.75" and identifying(1500.0) is None and identifying(2340) is None


# Forms the candidate reads whole although the text does not write the value as one string: a
# line broken inside it, digits spelled out, look-alike letters of another script, amounts in words.


@pytest.mark.parametrize(
    "written",
    [
        "Example: a credit of 38,\n650.00 after the salary.",
        "- a credit of 38\n  650 after the salary",
        "> a credit of ₹38,650\n> .00 after the salary",
    ],
)
def test_amount_split_by_a_soft_line_break(starter: Bundle, written: str) -> None:
    agent, scen = _planted(starter, BALANCE, written)
    assert _found(agent, scen) == [("prompt", "hidden_state.salary_credit.amount", "38650")]
    [lk] = leaks(agent, scen)
    # located at the line the value starts on
    assert lk.line == agent.instructions_template.rstrip("\n").count("\n")


def test_a_paragraph_break_or_list_item_is_no_soft_break(starter: Bundle) -> None:
    agent, scen = _planted(starter, BALANCE, "Codes: 38\n\n650 are two lines.\n- 38\n- 650")
    assert _found(agent, scen) == []


def test_html_comment_is_read_as_the_model_receives_it(starter: Bundle) -> None:
    agent, scen = _planted(starter, DISPUTE, "<!-- test case: dispute DSP 2603 1100 418 -->")
    assert _found(agent, scen) == [("prompt", "hidden_state.dispute_reference", "DSP26031100418")]


@pytest.mark.parametrize(
    "written",
    [
        "DSP two six zero three one one zero zero four one eight",
        "D S P two-six-zero-three, double one, double zero, four one eight",
        "DSP ২৬০৩ এক এক শূন্য শূন্য চার এক আট",
    ],
)
def test_digits_written_as_words(starter: Bundle, written: str) -> None:
    agent, scen = _planted(starter, DISPUTE, f"For example {written} is read in groups.")
    assert _found(agent, scen) == [("prompt", "hidden_state.dispute_reference", "DSP26031100418")]


@pytest.mark.parametrize("written", ["SВ3309418826", "ЅВ33О9418826", "SB33Ο9418826"])
def test_look_alike_letters_of_another_script(starter: Bundle, written: str) -> None:
    """Cyrillic В, Ѕ, О and Greek Ο for Latin B, S, O (UTS #39 skeletons)."""
    agent, scen = _planted(starter, DISPUTE, f"For example {written} is read in groups.")
    assert _found(agent, scen) == [("prompt", "hidden_state.savings_account.account_id", "SB3309418826")]


@pytest.mark.parametrize(
    "written",
    [
        "thirty-eight thousand six hundred fifty rupees",
        "Thirty Eight Thousand, Six Hundred and Fifty",
        "three eight six five zero",
        "38.65k",
        "38.65 thousand",
        "Rs 0.3865 lakh",
        "আটত্রিশ হাজার ছয়শত পঞ্চাশ টাকা",
    ],
)
def test_amounts_in_words_and_written_forms(starter: Bundle, written: str) -> None:
    agent, scen = _planted(starter, BALANCE, f"Example: a credit of {written}.")
    assert _found(agent, scen) == [("prompt", "hidden_state.salary_credit.amount", "38650")]


def test_amounts_in_words_decimal_and_no_neighbours(starter: Bundle) -> None:
    agent, scen = _planted(
        starter, BALANCE, "A balance of forty-eight thousand two hundred thirteen point five."
    )
    assert _found(agent, scen) == [("prompt", "hidden_state.savings_account.available_balance", "48213.5")]
    # a longer number that ends or starts with the same words is another amount
    for other in (
        "thirty-eight thousand six hundred fifty-one",
        "one hundred thirty-eight thousand six hundred fifty",
        "38.651k",
    ):
        agent, scen = _planted(starter, BALANCE, f"Example: a credit of {other}.")
        assert _found(agent, scen) == [], other
