"""What an agent's scenarios exercise: sections of its operating document and its tools,
so a reviewer sees the gaps.

Sections are those of :func:`callbench.bundle.sections.document_sections` (Markdown and
``[Bracketed]`` headings, repeated titles qualified by their flow, a non-blank preamble) that have
something to test, the ones a generation plan assigns
(:func:`callbench.bundle.sections.testable_sections`: not a heading without body, not a short
preamble, not a section holding only the call's date and time).

Rules (stated in ``callbench inspect --agent AGENT`` and docs/generating.md):

* a scenario exercises (*tests*) a *section* when a criterion quotes an excerpt located in it, or
  an action check grades a tool or a code value that only this section names
  (:mod:`callbench.bundle.section_tests`); it merely *mentions* a section when it only calls,
  answers or names a tool the section names. Only tests count as coverage (a
  section swallowing several blocks counted as exercised whenever a scenario merely used a tool);
  ``mentioned_only_sections`` lists the sections that are in play but never graded;
* a scenario exercises a *tool* when its reference path calls it or a positive action check
  (``count.max`` unset or above 0) expects it. A tool named only by negative checks
  (``count: {max: 0}``) is listed under ``only_negative``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.render import render_instructions
from callbench.bundle.section_tests import sections_of_text
from callbench.bundle.sections import PREAMBLE, QUALIFIER, Section, document_sections, testable_sections

__all__ = [
    "PREAMBLE", "QUALIFIER", "AgentCoverage", "Section", "Use", "agent_coverage", "bundle_coverage",
    "document_sections",
]


class Use(BaseModel):
    """A section or tool and the ids of the scenarios that exercise (test) it; for a section also
    the ids of the scenarios that only mention it (rules in the module docstring)."""

    name: str
    scenarios: list[str] = Field(default_factory=list)
    mentioned: list[str] = Field(default_factory=list)


class AgentCoverage(BaseModel):
    """Coverage of one agent: per section and per tool, the scenarios that exercise it; the names
    exercised by none (and of those, the sections some scenario only mentions); tools only negative
    checks name; scenarios whose document did not render."""

    agent: str
    scenarios: int
    sections: list[Use]
    tools: list[Use]
    unexercised_sections: list[str]
    unexercised_tools: list[str]
    mentioned_only_sections: list[str] = Field(default_factory=list)
    """Unexercised sections that some scenario mentions (calls or names a tool of) without testing."""
    only_negative: list[str] = Field(default_factory=list)
    not_rendered: list[str] = Field(default_factory=list)


def _tools_called(s: Scenario) -> set[str]:
    return {c.name for t in s.reference_path or [] for c in t.tool_calls}


def agent_coverage(agent: LoadedAgent) -> AgentCoverage:
    """Coverage of ``agent`` by its scenarios (rules in the module docstring). Sections come from
    the document rendered with neutral values; a scenario is matched against its own rendering
    (same headings, its own dates), and listed under ``not_rendered`` when that fails."""
    try:
        neutral_text = render_instructions(agent)
    except ValueError:
        neutral_text = ""
    neutral = document_sections(neutral_text)
    sec_uses = [Use(name=s.title) for s in testable_sections(neutral_text)]
    by_title = {u.name: u for u in sec_uses}
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
        found = sections_of_text(s, text, sections)
        for title, use in by_title.items():
            if title in found.tested:
                use.scenarios.append(s.id)
            elif title in found.mentioned:
                use.mentioned.append(s.id)
    tools = [tool_uses[n] for n in tool_names]
    return AgentCoverage(
        agent=agent.config.id,
        scenarios=len(agent.scenarios),
        sections=sec_uses,
        tools=tools,
        unexercised_sections=[u.name for u in sec_uses if not u.scenarios],
        unexercised_tools=[u.name for u in tools if not u.scenarios],
        mentioned_only_sections=[u.name for u in sec_uses if not u.scenarios and u.mentioned],
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
