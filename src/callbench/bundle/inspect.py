"""Composition summary of a bundle, as the paper's composition table (Table 2): agents, scenarios
by language and difficulty, tools per agent, and the length of the rendered instructions
(paper: "The median rendered instruction set is 30,834 characters, the range is 21,658 to 43,969,
and the active agents declare 371 tools between them, from one to eighteen each").
"""

from __future__ import annotations

import os
import statistics
from collections import Counter

from pydantic import BaseModel, Field
from rich.table import Table

from callbench.bundle.coverage import AgentCoverage, agent_coverage
from callbench.bundle.models import Bundle, LoadedAgent
from callbench.bundle.render import render_instructions


class Spread(BaseModel):
    """Median, minimum and maximum of a list of counts (all None when the list is empty)."""

    median: float | None = None
    min: int | None = None
    max: int | None = None

    @classmethod
    def of(cls, values: list[int]) -> Spread:
        if not values:
            return cls()
        return cls(median=float(statistics.median(values)), min=min(values), max=max(values))


class AgentRow(BaseModel):
    """One agent of the composition table."""

    id: str
    name: str
    domain: str
    direction: str
    active: bool
    languages: list[str]
    tools: int
    call_ending_tools: int
    scenarios: int
    medium: int
    hard: int
    instruction_chars: int | None = Field(
        description="Length of the rendered instructions in characters (rendered for the agent's first "
        "scenario, else with neutral values); None when they do not render.")
    shared_prefix_chars: int | None = Field(
        default=None,
        description="Characters at the start of the rendered instructions that are the same for every "
        "scenario of the agent: the part a prompt cache or the embedded model reads once per agent "
        "(so put the date, time and call-specific values in a final section). None when the "
        "agent has no scenario or its instructions do not render for one of them.")


class Composition(BaseModel):
    """The bundle's composition. Counts over active agents unless the field says otherwise."""

    bundle: str
    version: str
    content_hash: str
    agents: int = Field(description="All agent definitions.")
    active_agents: int
    scenarios: int = Field(description="Scenarios of active agents.")
    by_language: dict[str, dict[str, int]] = Field(
        description="language -> {medium, hard, total}, scenarios of active agents.")
    by_difficulty: dict[str, int]
    domains: dict[str, int] = Field(description="domain -> active agents.")
    tools_total: int = Field(description="Tools declared by active agents.")
    tools_per_agent: Spread
    instruction_chars: Spread = Field(description="Rendered instruction length over active agents.")
    agent_rows: list[AgentRow]
    coverage: list[AgentCoverage] = Field(
        default_factory=list,
        description="Per agent: the document sections and tools its scenarios exercise, and the ones none "
        "does (bundle/coverage.py).")


def _instruction_chars(agent: LoadedAgent) -> int | None:
    first = sorted(agent.scenarios, key=lambda s: s.id)[0] if agent.scenarios else None
    try:
        return len(render_instructions(agent, first))
    except ValueError:
        try:
            return len(render_instructions(agent))
        except ValueError:
            return None


def shared_prefix_chars(agent: LoadedAgent) -> int | None:
    """Length in characters of the longest common prefix of the agent's instructions rendered for
    each of its scenarios (the whole document when it has no template variable that varies), or
    None when the agent has no scenario or one of them fails to render."""
    if not agent.scenarios:
        return None
    try:
        rendered = [render_instructions(agent, s) for s in agent.scenarios]
    except ValueError:
        return None
    return len(os.path.commonprefix(rendered))  # noqa: RUF071 (a character prefix is meant)


def composition(bundle: Bundle) -> Composition:
    """Summarise ``bundle`` (whatever loaded of it: inspect works on a bundle with problems too)."""
    rows: list[AgentRow] = []
    for aid, a in sorted(bundle.agents.items()):
        diffs = Counter(s.difficulty for s in a.scenarios)
        rows.append(AgentRow(
            id=aid, name=a.config.name, domain=a.config.domain, direction=a.config.direction,
            active=a.config.active, languages=list(a.config.languages), tools=len(a.config.tools),
            call_ending_tools=len(a.config.call_ending_tools), scenarios=len(a.scenarios),
            medium=diffs.get("medium", 0), hard=diffs.get("hard", 0), instruction_chars=_instruction_chars(a),
            shared_prefix_chars=shared_prefix_chars(a),
        ))
    active = [r for r in rows if r.active]
    by_lang: dict[str, dict[str, int]] = {}
    by_diff: Counter[str] = Counter()
    for _, a in sorted(bundle.agents.items()):
        if not a.config.active:
            continue
        for s in a.scenarios:
            cell = by_lang.setdefault(s.language, {"medium": 0, "hard": 0, "total": 0})
            cell[s.difficulty] += 1
            cell["total"] += 1
            by_diff[s.difficulty] += 1
    return Composition(
        bundle=bundle.meta.name, version=bundle.meta.version, content_hash=bundle.content_hash,
        agents=len(rows), active_agents=len(active), scenarios=sum(r.scenarios for r in active),
        by_language=dict(sorted(by_lang.items())),
        by_difficulty={"medium": by_diff.get("medium", 0), "hard": by_diff.get("hard", 0)},
        domains=dict(sorted(Counter(r.domain for r in active).items())),
        tools_total=sum(r.tools for r in active),
        tools_per_agent=Spread.of([r.tools for r in active]),
        instruction_chars=Spread.of([r.instruction_chars for r in active if r.instruction_chars is not None]),
        agent_rows=rows,
        coverage=[agent_coverage(a) for _, a in sorted(bundle.agents.items())],
    )


def _num(v: float | int | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def composition_tables(c: Composition) -> list[Table]:
    """Rich tables: the summary (as the paper's Table 2), scenarios by language and difficulty,
    and one row per agent."""
    summary = Table(title=f"{c.bundle} {c.version} (hash {c.content_hash[:12]})", show_header=True)
    summary.add_column("item")
    summary.add_column("value", justify="right")
    summary.add_row("agent definitions (active)", f"{c.agents} ({c.active_agents})")
    summary.add_row("scenarios (medium / hard)",
                    f"{c.scenarios} ({c.by_difficulty['medium']} / {c.by_difficulty['hard']})")
    summary.add_row("languages", str(len(c.by_language)))
    summary.add_row("domains", str(len(c.domains)))
    summary.add_row("tools (per agent min-max, median)",
                    f"{c.tools_total} ({_num(c.tools_per_agent.min)}-{_num(c.tools_per_agent.max)}, "
                    f"{_num(c.tools_per_agent.median)})")
    ic = c.instruction_chars
    summary.add_row("instruction chars median (min-max)",
                    f"{_num(ic.median)} ({_num(ic.min)}-{_num(ic.max)})")

    langs = Table(title="Scenarios by language and difficulty")
    for col in ("language", "medium", "hard", "total"):
        langs.add_column(col, justify="left" if col == "language" else "right")
    for lang, cell in c.by_language.items():
        langs.add_row(lang, str(cell["medium"]), str(cell["hard"]), str(cell["total"]))
    langs.add_row("all", str(c.by_difficulty["medium"]), str(c.by_difficulty["hard"]), str(c.scenarios))

    agents = Table(title="Agents")
    numeric = ("tools", "instruction chars", "shared prefix")
    for col in ("agent", "domain", "direction", "languages", "tools", "scenarios (m/h)", *numeric[1:]):
        agents.add_column(col, justify="right" if col in numeric else "left", overflow="fold")
    for r in c.agent_rows:
        agents.add_row(r.id + ("" if r.active else " (inactive)"), r.domain, r.direction,
                       ", ".join(r.languages), str(r.tools), f"{r.scenarios} ({r.medium}/{r.hard})",
                       _num(r.instruction_chars), _num(r.shared_prefix_chars))
    return [summary, langs, agents]


def _tools_gap(cov: AgentCoverage) -> str:
    text = ", ".join(cov.unexercised_tools)
    if cov.only_negative:
        text += f" (only negative checks: {', '.join(cov.only_negative)})"
    return text or "-"


def _sections_gap(cov: AgentCoverage) -> str:
    text = "; ".join(cov.unexercised_sections)
    if cov.mentioned_only_sections:
        text += f" (mentioned, not tested: {'; '.join(cov.mentioned_only_sections)})"
    return text or "-"


def coverage_tables(c: Composition, agent: str | None = None) -> list[Table]:
    """Rich tables of coverage: one row per agent (sections and tools exercised, and the ones no
    scenario exercises); with ``agent``, that agent's sections and tools with their scenario counts
    and ids instead. Raises KeyError naming an unknown agent."""
    rule = ("a section is exercised when a criterion quotes it or an action check grades a tool or "
            "code value only it names (calling a tool it names only mentions it); a tool when the "
            "reference path calls it or a positive check expects it")
    if agent is None:
        t = Table(title=f"Coverage ({rule})")
        for col in ("agent", "sections", "tools", "sections no scenario exercises",
                    "tools no scenario exercises"):
            t.add_column(col, overflow="fold")
        for cov in c.coverage:
            t.add_row(cov.agent, f"{len(cov.sections) - len(cov.unexercised_sections)}/{len(cov.sections)}",
                      f"{len(cov.tools) - len(cov.unexercised_tools)}/{len(cov.tools)}",
                      _sections_gap(cov),
                      _tools_gap(cov))
        return [t]
    one = next((x for x in c.coverage if x.agent == agent), None)
    if one is None:
        raise KeyError(f"no agent {agent!r} (agents: {', '.join(x.agent for x in c.coverage)})")
    out = []
    t = Table(title=f"{agent}: sections of the operating document tested by its {one.scenarios} "
              f"scenario(s) ({rule})")
    for col in ("section", "tested", "ids", "only mentioned by"):
        t.add_column(col, justify="right" if col == "tested" else "left", overflow="fold")
    for u in one.sections:
        t.add_row(u.name, str(len(u.scenarios)), ", ".join(u.scenarios) or "NONE",
                  ", ".join(u.mentioned) or "-")
    out.append(t)
    t = Table(title=f"{agent}: tools exercised by its {one.scenarios} scenario(s)")
    for col in ("tool", "scenarios", "ids"):
        t.add_column(col, justify="right" if col == "scenarios" else "left", overflow="fold")
    for u in one.tools:
        t.add_row(u.name, str(len(u.scenarios)), ", ".join(u.scenarios) or "NONE")
    out.append(t)
    return out
