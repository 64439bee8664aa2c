"""What an agent's scenarios exercise: sections of its operating document and its tools (issue 13
item 6), so a reviewer sees the gaps.

Sections are the headings of the rendered document, outside fenced code blocks: Markdown ATX
headings (``#`` to ``######`` at the start of a line) and, as voice-agent platforms write them
(Vapi, Retell), bracketed headings: a line holding only ``[Title]`` (optionally followed by a
colon), which counts as level 1. A section runs from its heading to the next heading of any level,
and text before the first heading is the section ``(preamble)`` when it is not blank. A title
used by more than one heading (``1. Greet`` in the booking flow and in the cancellation flow) is
qualified by its enclosing headings until it is unique: ``Booking flow > 1. Greet``.

Rules (stated in ``callbench inspect --agent AGENT`` and docs/generating.md):

* a scenario exercises a *section* when one of its criteria quotes an excerpt located in that
  section (``excerpts.locate_excerpt`` on the document rendered for the scenario): a criterion
  then tests what the section says. Calling a tool the section names does not count (issue 26
  item 5: a section swallowing several blocks counted as exercised whenever a scenario merely
  used a tool);
* a scenario exercises a *tool* when its reference path calls it or a positive action check
  (``count.max`` unset or above 0) expects it. A tool named only by negative checks
  (``count: {max: 0}``) is listed under ``only_negative``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from callbench.bundle.excerpts import locate_excerpt
from callbench.bundle.loader import render_instructions
from callbench.bundle.models import Bundle, LoadedAgent, Scenario

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_BRACKETED = re.compile(r"^[ \t]*\[([^\[\]\n]*[^\[\]\s][^\[\]\n]*)\][ \t]*:?[ \t]*$")
QUALIFIER = " > "
"""Joins an enclosing heading's title to a repeated title (``Booking flow > 1. Greet``)."""
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
PREAMBLE = "(preamble)"


class Section(BaseModel):
    """One section of a document: heading ``title`` (without the ``#``), heading ``level`` (0 for
    the preamble), and its ``start``/``end`` character offsets in the text."""

    title: str
    level: int
    start: int
    end: int


def document_sections(text: str) -> list[Section]:
    """The sections of a Markdown document (rules in the module docstring), in order."""
    heads: list[tuple[int, int, str]] = []
    offset = 0
    fenced = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            m = _HEADING.match(line.rstrip("\r\n"))
            b = _BRACKETED.match(line.rstrip("\r\n")) if m is None else None
            if m:
                heads.append((offset, len(m.group(1)), m.group(2).strip()))
            elif b:
                heads.append((offset, 1, b.group(1).strip()))
        offset += len(line)
    heads = _qualified(heads)
    out: list[Section] = []
    first = heads[0][0] if heads else len(text)
    if text[:first].strip():
        out.append(Section(title=PREAMBLE, level=0, start=0, end=first))
    for i, (start, level, title) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
        out.append(Section(title=title, level=level, start=start, end=end))
    return out


def _qualified(heads: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """``heads`` with every repeated title prefixed by its enclosing headings' titles (nearest
    first, as many as make it unique, or all there are)."""
    parents: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    for _, level, title in heads:
        while stack and stack[-1][0] >= level:
            stack.pop()
        parents.append([t for _, t in reversed(stack)])
        stack.append((level, title))
    titles = [t for _, _, t in heads]
    out = []
    for i, (start, level, title) in enumerate(heads):
        name = title
        depth = 0
        while titles.count(title) > 1 and depth < len(parents[i]):
            depth += 1
            name = QUALIFIER.join([*reversed(parents[i][:depth]), title])
            if sum(1 for j in range(len(heads)) if titles[j] == title and _name(parents[j], title, depth)
                   == name) == 1:
                break
        out.append((start, level, name))
    return out


def _name(parents: list[str], title: str, depth: int) -> str:
    return QUALIFIER.join([*reversed(parents[:depth]), title])


class Use(BaseModel):
    """A section or tool and the ids of the scenarios that exercise it."""

    name: str
    scenarios: list[str] = Field(default_factory=list)


class AgentCoverage(BaseModel):
    """Coverage of one agent: per section and per tool, the scenarios that exercise it; the names
    exercised by none; tools only negative checks name; scenarios whose document did not render."""

    agent: str
    scenarios: int
    sections: list[Use]
    tools: list[Use]
    unexercised_sections: list[str]
    unexercised_tools: list[str]
    only_negative: list[str] = Field(default_factory=list)
    not_rendered: list[str] = Field(default_factory=list)


def _tools_called(s: Scenario) -> set[str]:
    return {c.name for t in s.reference_path or [] for c in t.tool_calls}


def _section_index(sections: list[Section], pos: int) -> int | None:
    for i, sec in enumerate(sections):
        if sec.start <= pos < sec.end:
            return i
    return None


def agent_coverage(agent: LoadedAgent) -> AgentCoverage:
    """Coverage of ``agent`` by its scenarios (rules in the module docstring). Sections come from
    the document rendered with neutral values; a scenario is matched against its own rendering
    (same headings, its own dates), and listed under ``not_rendered`` when that fails."""
    try:
        neutral = document_sections(render_instructions(agent))
    except ValueError:
        neutral = []
    sec_uses = [Use(name=s.title) for s in neutral]
    tool_names = [t.name for t in agent.config.tools]
    tool_uses = {n: Use(name=n) for n in tool_names}
    negative: set[str] = set()
    not_rendered: list[str] = []
    for s in sorted(agent.scenarios, key=lambda x: x.id):
        called = _tools_called(s)
        positive = {c.tool for c in s.action_checks if c.count.max is None or c.count.max > 0}
        negative |= {c.tool for c in s.action_checks if c.count.max == 0}
        for name in sorted((called | positive) & set(tool_uses)):
            tool_uses[name].scenarios.append(s.id)
        try:
            text = render_instructions(agent, s)
        except ValueError:
            not_rendered.append(s.id)
            continue
        sections = document_sections(text)
        if [x.title for x in sections] != [x.title for x in neutral]:
            not_rendered.append(s.id)
            continue
        hit: set[int] = set()
        for crit in s.criteria:
            for ex in crit.excerpts:
                span = locate_excerpt(text, ex)
                idx = _section_index(sections, span[0]) if span else None
                if idx is not None:
                    hit.add(idx)
        for i in sorted(hit):
            sec_uses[i].scenarios.append(s.id)
    tools = [tool_uses[n] for n in tool_names]
    return AgentCoverage(
        agent=agent.config.id,
        scenarios=len(agent.scenarios),
        sections=sec_uses,
        tools=tools,
        unexercised_sections=[u.name for u in sec_uses if not u.scenarios],
        unexercised_tools=[u.name for u in tools if not u.scenarios],
        only_negative=sorted(n for n in negative if n in tool_uses and not tool_uses[n].scenarios),
        not_rendered=not_rendered,
    )


def bundle_coverage(bundle: Bundle, agent_id: str | None = None) -> list[AgentCoverage]:
    """:func:`agent_coverage` for every agent (or the one named), by agent id. Raises KeyError
    naming an unknown agent id."""
    if agent_id is not None:
        if agent_id not in bundle.agents:
            raise KeyError(
                f"no agent {agent_id!r} in bundle {bundle.meta.name!r} "
                f"(agents: {', '.join(sorted(bundle.agents))})"
            )
        return [agent_coverage(bundle.agents[agent_id])]
    return [agent_coverage(a) for _, a in sorted(bundle.agents.items())]
