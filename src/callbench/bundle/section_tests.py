"""Which sections of the operating document a scenario *tests*, and which it merely *mentions*
("coverage counts a section as exercised only when a scenario's checks or
criteria test it, not when it names a tool").

A scenario **tests** a section when one of its graded items traces back to that section alone:

* a criterion quotes an excerpt located in the section and reaching into its body
  (:func:`callbench.bundle.excerpts.locate_excerpt` on the document rendered for this scenario):
  the judge is handed the section's own words (paper, section 3: criteria carry exact excerpts of
  the instructions). Quoting only the heading ("Ending the call") names the section and does not
  count;
* an action check (positive, or negative and guarded by ``applies_after``) whose tool is named in
  this section and in no other one: the check grades what the section alone tells the agent to do;
* an action check whose argument matchers expect a code value (a snake_case word with an
  underscore, the way tool names and enum values are written: ``suspected_fraud``) that this
  section names and no other one does.

Nothing else counts: calling a tool in the reference path, giving it fixtures, naming it or the
section in the goal, the brief or a criterion's statement. An unguarded negative check does not
count either (a do-nothing call meets it), nor does a check on a tool several sections name (it
cannot tell which of them it tests; quote the one you mean in a criterion).

A scenario **mentions** a section it does not test when its reference path calls, its fixtures
answer or its action checks name a tool the section names: the section is in play but nothing
grades it. ``callbench inspect --agent`` lists both; the generator sends a plan item's untested
sections back for repair (:mod:`callbench.generate.contract`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from callbench.bundle.excerpts import locate_excerpt
from callbench.bundle.models import ActionCheck, LoadedAgent, Scenario
from callbench.bundle.render import render_instructions
from callbench.bundle.sections import PREAMBLE, Section, document_sections, names_word, section_at

CODE_VALUE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+")
"""A code value in an action check's argument matchers: snake_case with at least one underscore."""


class SectionsOfScenario(BaseModel):
    """What one scenario does to each section (by title): ``tested`` maps a section to the
    evidence (one line per graded item that traces back to it, e.g. ``criterion read_back quotes
    it``); ``mentioned`` lists the sections it names a tool of without testing them."""

    tested: dict[str, list[str]] = Field(default_factory=dict)
    mentioned: list[str] = Field(default_factory=list)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def code_values(check: ActionCheck) -> list[str]:
    """The code values (:data:`CODE_VALUE`) an action check's argument matchers expect, in order,
    unique. Regex patterns and free text hold none unless a whole string is such a word."""
    dumped = check.model_dump(mode="json")["args"]
    return list(dict.fromkeys(s for s in _strings(dumped) if CODE_VALUE.fullmatch(s)))


def _graded(check: ActionCheck) -> bool:
    negative = check.count.max == 0
    return not negative or bool(check.applies_after)


def _body_start(text: str, section: Section) -> int:
    """Where the body of ``section`` starts: after its heading line (the preamble has none)."""
    if section.title == PREAMBLE:
        return section.start
    nl = text.find("\n", section.start, section.end)
    return section.end if nl < 0 else nl + 1


def _only_section(text: str, sections: list[Section], word: str) -> int | None:
    hits = [i for i, s in enumerate(sections) if names_word(text[s.start : s.end], word)]
    return hits[0] if len(hits) == 1 else None


def sections_of_text(scenario: Scenario, text: str, sections: list[Section]) -> SectionsOfScenario:
    """The sections (of ``text``, the document rendered for ``scenario``, split into
    ``sections``) that ``scenario`` tests and mentions (rules in the module docstring)."""
    tested: dict[int, list[str]] = {}
    for crit in scenario.criteria:
        for ex in crit.excerpts:
            span = locate_excerpt(text, ex)
            idx = section_at(sections, span[0]) if span else None
            if span and idx is not None and span[1] > _body_start(text, sections[idx]):
                tested.setdefault(idx, []).append(f"criterion {crit.id} quotes it")
    for check in scenario.action_checks:
        if not _graded(check):
            continue
        idx = _only_section(text, sections, check.tool)
        if idx is not None:
            tested.setdefault(idx, []).append(f"action check {check.id} on {check.tool}, named only here")
        for value in code_values(check):
            idx = _only_section(text, sections, value)
            if idx is not None:
                tested.setdefault(idx, []).append(f"action check {check.id} expects {value}, named only here")
    tools = {c.name for t in scenario.reference_path or [] for c in t.tool_calls}
    tools |= {c.tool for c in scenario.action_checks} | set(scenario.fixtures)
    mentioned = [
        s.title for i, s in enumerate(sections)
        if i not in tested and any(names_word(text[s.start : s.end], t) for t in tools)
    ]
    return SectionsOfScenario(
        tested={sections[i].title: list(dict.fromkeys(ev)) for i, ev in sorted(tested.items())},
        mentioned=mentioned,
    )


def scenario_sections(agent: LoadedAgent, scenario: Scenario) -> SectionsOfScenario:
    """The sections of ``agent``'s document that ``scenario`` tests and mentions, matched against
    the document rendered for this scenario (its own date and variables). Raises ``ValueError``
    when the document does not render for it (the message of
    :func:`callbench.bundle.loader.render_instructions`)."""
    text = render_instructions(agent, scenario)
    return sections_of_text(scenario, text, document_sections(text))
