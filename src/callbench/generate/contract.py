"""The plan as a contract: a generated scenario must be what its plan item asked.

:func:`plan_problems` compares a candidate scenario with its :class:`~callbench.generate.plan.PlanItem`:
its ``language`` and ``brief.language`` must be the item's language (code ``generate.plan_language``),
its ``difficulty`` the item's difficulty (``generate.plan_difficulty``), and its channel program must
carry every channel event kind the item asks for, or none at all when the item asks for a clean
channel (``generate.plan_channel``). Each is a located problem sent back for repair, like an audit
problem.

:func:`section_problems` holds the scenario to the sections its plan item names:
each must be *tested*, by a criterion quoting it or an action check on a tool or code value only it
names (the rule of :mod:`callbench.bundle.section_tests`); naming a tool of the section, calling it
in the reference path or citing the section's title does not count (``generate.plan_section``).

:func:`written_facts` gives what was written, recorded in ``generation.yaml`` beside what was
planned (:class:`~callbench.generate.manifest.PlanFacts`).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from callbench.bundle.loader import Problem
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.render import render_instructions
from callbench.bundle.section_tests import sections_of_text
from callbench.bundle.sections import Section, document_sections
from callbench.generate.manifest import PlanFacts
from callbench.generate.plan import NO_SECTIONS, PlanItem


def channel_kinds(channel: Any) -> list[str]:
    """The channel event kinds of a scenario's ``channel`` (its JSON form), sorted and unique:
    ``asr_<kind>`` per ASR event, ``vad_split`` for VAD splits, ``seeded_noise`` when set.
    Anything not of the schema's shape counts as no event (the schema audit reports it)."""
    if not isinstance(channel, dict):
        return []
    kinds: set[str] = set()
    for e in channel.get("asr_events") or []:
        if isinstance(e, dict) and isinstance(e.get("kind"), str):
            kinds.add(f"asr_{e['kind']}")
    if channel.get("vad_splits"):
        kinds.add("vad_split")
    if channel.get("seeded_noise") is True:
        kinds.add("seeded_noise")
    return sorted(kinds)


def planned_facts(item: PlanItem) -> PlanFacts:
    """What ``item`` asked for, in the manifest's form."""
    return PlanFacts(language=item.language, difficulty=item.difficulty, channel=sorted(item.channel_kinds),
                     sections=[t for t in item.sections if t != NO_SECTIONS])


def _rendered(agent: LoadedAgent, data: dict[str, Any]) -> tuple[Scenario, str, list[Section]] | None:
    try:
        scen = Scenario.model_validate(data)
        text = render_instructions(agent, scen)
    except (ValidationError, ValueError):
        return None  # the schema audit or validate reports why
    return scen, text, document_sections(text)


def tested_sections(agent: LoadedAgent, data: dict[str, Any]) -> list[str]:
    """The titles of the sections of ``agent``'s document that the scenario ``data`` (its JSON
    form) tests, in document order; empty when it is not a valid scenario or does not render."""
    got = _rendered(agent, data)
    return list(sections_of_text(*got).tested) if got else []


def written_facts(data: dict[str, Any], agent: LoadedAgent | None = None) -> PlanFacts:
    """What a scenario (its JSON form) is: language, difficulty, channel event kinds and (given
    its ``agent``) the sections it tests."""
    return PlanFacts(
        language=str(data.get("language", "")),
        difficulty=str(data.get("difficulty", "")),
        channel=channel_kinds(data.get("channel")),
        sections=tested_sections(agent, data) if agent is not None else [],
    )


def _hint(text: str, section: Section) -> str:
    """The first line of body text of ``section`` (at most 100 characters), to show the model
    what quoting the section means."""
    for line in text[section.start : section.end].splitlines()[1:]:
        line = line.strip().lstrip("-*+ ").strip()
        if line:
            return line if len(line) <= 100 else line[:97] + "..."
    return ""


def section_problems(item: PlanItem, agent: LoadedAgent, data: dict[str, Any], file: str) -> list[Problem]:
    """One ``generate.plan_section`` problem, located in ``file`` at ``criteria``, per section of
    ``item`` that the scenario ``data`` does not test (module docstring). None when the item names
    no section, or when ``data`` is not a valid scenario or its document does not render (the
    schema audit and validate report that)."""
    wanted = [t for t in item.sections if t != NO_SECTIONS]
    got = _rendered(agent, data) if wanted else None
    if got is None:
        return []
    scen, text, sections = got
    found = sections_of_text(scen, text, sections)
    by_title = {s.title: s for s in sections}
    out: list[Problem] = []
    for title in wanted:
        if title in found.tested:
            continue
        sec = by_title.get(title)
        if sec is None:
            message = (f"plan item {item.index + 1} asks to test section {title!r}, which the document "
                       "rendered for this scenario (its date and variables) does not have")
        else:
            only = (" (the scenario only mentions it: it calls or names a tool the section names, "
                    "which grades nothing)") if title in found.mentioned else ""
            hint = _hint(text, sec)
            example = f", e.g. a whole sentence of {hint!r}" if hint else ""
            message = (f"plan item {item.index + 1} asks to test section {title!r}, and no check or "
                       f"criterion tests it{only}; add a criterion whose excerpts quote the section "
                       f"verbatim{example}, or an action check on a tool or code value that only this "
                       "section names")
        out.append(Problem(file=file, path="criteria", code="generate.plan_section", message=message))
    return out


def plan_problems(item: PlanItem, data: dict[str, Any], file: str) -> list[Problem]:
    """Every way the scenario ``data`` differs from its plan item ``item`` (codes in the module
    docstring), located in ``file`` (the scenario's bundle path) by field path."""
    out: list[Problem] = []
    item_no = f"plan item {item.index + 1}"
    brief = data.get("brief") if isinstance(data.get("brief"), dict) else {}
    assert isinstance(brief, dict)
    for path, value in (("language", data.get("language")), ("brief.language", brief.get("language"))):
        if value != item.language:
            out.append(Problem(file=file, path=path, code="generate.plan_language",
                               message=f"{value!r} but {item_no} asks for language {item.language!r}; "
                               f"write the whole call (brief, plan, reference speech) in {item.language}"))
    if data.get("difficulty") != item.difficulty:
        out.append(Problem(file=file, path="difficulty", code="generate.plan_difficulty",
                           message=f"{data.get('difficulty')!r} but {item_no} asks for difficulty "
                           f"{item.difficulty!r}"))
    have = set(channel_kinds(data.get("channel")))
    want = set(item.channel_kinds)
    if not want and have:
        out.append(Problem(file=file, path="channel", code="generate.plan_channel",
                           message=f"{item_no} asks for a clean channel, but the scenario has "
                           f"{', '.join(sorted(have))}; remove the channel events"))
    for kind in sorted(want - have):
        out.append(Problem(file=file, path="channel", code="generate.plan_channel",
                           message=f"{item_no} asks for a {kind.replace('_', ' ')} event ({item.channel}), "
                           "and the scenario has none"))
    return out
