"""The floor agent that uses what the caller says (``scripted:caller-values``): it fills arguments
with the values the caller has stated, never with hidden state or fixtures, and sprays every tool
that does not end the call for several turns."""

from __future__ import annotations

import random
from pathlib import Path

import jsonschema
import pytest

from callbench.audit.core import GAMING_CANDIDATES, _episode
from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.models.scripted.gaming import ROUNDS, CallerValues, stated_values

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
LPG = "lpg_en_late_delivery_no_second_booking"


@pytest.fixture(scope="module")
def starter() -> Bundle:
    return load_bundle(STARTER)


def test_stated_values_are_only_what_was_said() -> None:
    facts = {"consumer_number": "27560914", "pin_code": "201301", "name": "Ravi", "secret": "XY99"}
    said = stated_values(facts, ["My consumer number is 2756 0914 and the PIN code is 201301."])
    assert said[:2] == [("consumer_number", "27560914"), ("pin_code", "201301")]
    assert ("secret", "XY99") not in said and ("name", "Ravi") not in said
    assert ("", "201301") in said  # a value-like token of the speech itself


def test_arguments_take_the_best_named_value_and_fit_the_schema() -> None:
    schema = {"type": "object", "additionalProperties": False, "required": ["consumer_number", "pin_code"],
              "properties": {"consumer_number": {"type": "string", "pattern": "^[0-9]{8}$"},
                             "pin_code": {"type": "string", "pattern": "^[0-9]{6}$"},
                             "note": {"type": "string", "maxLength": 3}}}
    stated = [("pin_code", "201301"), ("consumer_number", "27560914")]
    args = CallerValues(random.Random(0), stated, 0).obj(schema)
    assert args == {"consumer_number": "27560914", "pin_code": "201301"}
    jsonschema.validate(args, schema)


async def test_it_sprays_every_non_ending_tool_for_several_turns(starter: Bundle) -> None:
    assert "scripted:caller-values" in GAMING_CANDIDATES
    agent, scen = starter.scenario(LPG)
    ending = {c.tool for c in agent.config.call_ending_tools}
    tools = sorted(t.name for t in agent.config.tools if t.name not in ending)
    trace, _ = await _episode(starter, agent, scen, "scripted:caller-values")
    called = [e.name for e in trace.tool_events]
    assert sorted(called[:-1]) == sorted(tools * ROUNDS) and called[-1] in ending
    verify = [e for e in trace.tool_events if e.name == "verify_consumer"]
    assert any("27560914" in str(e.arguments) for e in verify)  # once the caller has said it
    # the hidden booking number is never used (the caller never says it)
    booking = str(scen.hidden_state["open_booking"]["booking_number"])
    assert all(booking not in str(e.arguments) for e in trace.tool_events)
