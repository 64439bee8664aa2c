"""Which sections a scenario tests and which it only mentions (bundle/section_tests.py):
a criterion quoting the section, or an action check on a tool or code value only that
section names, tests it; calling or naming a tool does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from callbench.bundle.excerpts import excerpt_cut
from callbench.bundle.models import Scenario
from callbench.bundle.section_tests import code_values, sections_of_text
from callbench.bundle.sections import document_sections

WATER = Path(__file__).resolve().parents[1] / "generate" / "data" / "water_no_supply_tanker.yaml"

DOC = """\
[Verification]
Verify the caller with verify_consumer before anything else.

[Complaints]
Log every complaint with log_complaint. Read the complaint number back in groups of three digits.

[Categories]
Use the category no_water when the taps are dry and dirty_water when the water is brown.

[Tankers]
Check slots with get_tanker_slots and book with book_tanker after the caller confirms.

[Closing]
Ask whether there is anything else. End the call with end_call.

[Escalation]
If verify_consumer fails twice, transfer the call.
"""


def _water(**changes: Any) -> Scenario:
    data = yaml.safe_load(WATER.read_text(encoding="utf-8"))
    data.update(changes)
    return Scenario.model_validate(data)


def _found(scenario: Scenario) -> tuple[dict[str, list[str]], list[str]]:
    got = sections_of_text(scenario, DOC, document_sections(DOC))
    return got.tested, got.mentioned


def test_checks_and_quotes_test_sections_tools_only_mention_them() -> None:
    tested, mentioned = _found(_water())
    assert tested == {
        # a criterion quotes it, and the check complaint_logged grades log_complaint, named only here
        "Complaints": ["criterion number_in_groups quotes it",
                       "action check complaint_logged on log_complaint, named only here"],
        # complaint_logged expects category no_water, a code value only this section names
        "Categories": ["action check complaint_logged expects no_water, named only here"],
        # book_tanker is named only here; the negative check is guarded, so it grades too
        "Tankers": ["action check evening_booked on book_tanker, named only here",
                    "action check no_morning_booking on book_tanker, named only here"],
    }
    # verify_consumer is named by two sections: the check 'verified' cannot tell which it tests;
    # end_call is called in the reference path and answered by a fixture, but nothing grades it
    assert mentioned == ["Verification", "Closing", "Escalation"]


def test_an_unguarded_negative_check_tests_nothing() -> None:
    base = yaml.safe_load(WATER.read_text(encoding="utf-8"))
    checks = [c for c in base["action_checks"] if c["id"] != "evening_booked"]
    for c in checks:
        if c["id"] == "no_morning_booking":
            c["applies_after"] = []  # a do-nothing call meets it
    tested, mentioned = _found(_water(action_checks=checks, criteria=[]))
    assert "Tankers" not in tested and "Tankers" in mentioned
    assert set(tested) == {"Complaints", "Categories"}


def test_naming_a_tool_or_a_section_anywhere_else_tests_nothing() -> None:
    # every graded item removed; the brief, goal and reference path still name every tool and the
    # criteria statement names the section: all sections with a tool are mentioned, none tested
    crit = {"id": "closing", "pillar": "task", "statement": "Follows the Closing section and calls end_call.",
            "anchors": {"met": "m", "partial": "p", "not_met": "n"}, "diagnostic": "channel_and_closing"}
    tested, mentioned = _found(_water(action_checks=[], criteria=[crit]))
    assert tested == {}
    assert mentioned == ["Verification", "Complaints", "Tankers", "Closing", "Escalation"]


def test_code_values_are_snake_case_words_of_the_matchers() -> None:
    s = _water()
    by_id = {c.id: c for c in s.action_checks}
    assert code_values(by_id["complaint_logged"]) == ["no_water"]
    assert code_values(by_id["evening_booked"]) == []  # T13-EVE is an id, not a code word
    assert code_values(by_id["verified"]) == []  # ${caller.*} references resolve to the caller's values


def test_the_first_sentence_after_a_bracketed_heading_is_whole() -> None:
    # "[Closing]" starts a section as "## Closing" does, so its first sentence can be quoted
    assert excerpt_cut(DOC, "Ask whether there is anything else.") is None
    assert excerpt_cut(DOC.replace("[Closing]", "## Closing"), "Ask whether there is anything else.") is None
    # a line that runs on from the previous one still starts mid-sentence
    text = "[Closing]\nWhen the caller is done\nask whether there is anything else.\n"
    assert excerpt_cut(text, "ask whether there is anything else.") == "starts mid-sentence"


def test_quoting_only_a_heading_names_the_section_and_tests_nothing() -> None:
    doc = "## Closing\n\nAsk whether there is anything else.\n"
    crit = {"id": "closing", "pillar": "task", "statement": "Closes well.", "excerpts": ["Closing"],
            "anchors": {"met": "m", "partial": "p", "not_met": "n"}, "diagnostic": "channel_and_closing"}
    # the excerpt is whole (a heading is a block), so validate accepts it, but it is only a name
    assert excerpt_cut(doc, "Closing") is None
    scen = _water(action_checks=[], criteria=[crit])
    assert sections_of_text(scen, doc, document_sections(doc)).tested == {}
    crit["excerpts"] = ["Ask whether there is anything else."]
    scen = _water(action_checks=[], criteria=[crit])
    assert sections_of_text(scen, doc, document_sections(doc)).tested == {
        "Closing": ["criterion closing quotes it"]}
