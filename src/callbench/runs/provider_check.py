"""A bundle's tools and the roles' response schemas against the providers' request rules (issue 24
item 1): what ``callbench validate --providers`` reports and what the run preflight refuses.

Each tool is checked as the adapter would send it (``schemas.clean_tool_parameters`` for the
target's wire format: ``anthropic`` for Anthropic, ``openai`` for the OpenAI targets and Gemini's
OpenAI-compatible endpoint), so keywords the adapters drop or fold into descriptions are not
reported. The rules and their sources are in :mod:`callbench.models.remote.rules`.
"""

from __future__ import annotations

from typing import Any

from callbench.bundle.loader import Problem
from callbench.bundle.models import Bundle
from callbench.bundle.validate import bundle_files
from callbench.models.remote.rules import TargetRules, tools_problems
from callbench.models.remote.schemas import clean_tool_parameters


def wire_format(rules: TargetRules) -> str:
    """The adapter whose cleaning applies to ``rules``' target: ``anthropic`` or ``openai``."""
    return "anthropic" if rules.name == "anthropic" else "openai"


def sent_tools(tools: list[Any], rules: TargetRules) -> list[tuple[str, Any]]:
    """``[(name, parameters as the adapter sends them)]`` for bundle or request tools (objects with
    ``name`` and ``parameters``). Parameters that cannot be cleaned (not an object schema) are
    checked as written, so the rule check reports them."""
    out: list[tuple[str, Any]] = []
    for t in tools:
        try:
            params: Any = clean_tool_parameters(t.parameters, wire_format(rules), tool=t.name)
        except ValueError:
            params = t.parameters
        out.append((t.name, params))
    return out


def bundle_provider_problems(bundle: Bundle,
                             targets: list[TargetRules]) -> tuple[list[Problem], list[Problem]]:
    """(errors, warnings): every tool schema of ``bundle`` that a target of ``targets`` would
    reject, located by agent file, field path (``tools.<i>.parameters.<schema path>``) and tool
    name, with code ``provider.<target>``. A target whose ``severity`` is ``warning`` (Gemini)
    gives warnings; the others errors."""
    files = bundle_files(bundle)
    errors: list[Problem] = []
    warnings: list[Problem] = []
    for agent in bundle.agents.values():
        tools = agent.config.tools
        for rules in targets:
            for i, path, message in tools_problems(sent_tools(tools, rules), rules):
                where = "tools" if i < 0 else f"tools.{i}.{path}"
                tool = f"tool {tools[i].name!r}: " if i >= 0 else ""
                problem = Problem(file=files.agent(agent), path=where, code=f"provider.{rules.name}",
                                  message=f"{tool}{message}")
                (warnings if rules.severity == "warning" else errors).append(problem)
    return errors, warnings
