"""What the generator model is sent, and how its answer is read.

One request per scenario: the system message is :data:`~callbench.generate.rules.GENERATOR_RULES`;
the user message holds the agent id, the full rendered operating document (template variables such
as ``{{date}}`` left as written: the scenario's ``brief.datetime`` fills them), the tool schemas,
the call-ending tools with their success conditions, the batch plan, this request's plan item, and
the id and title of every existing scenario of the agent (not to be repeated). The answer is JSON
constrained by the scenario JSON Schema (``callbench schema``: ``scenario.schema.json``). A repair
request appends the model's previous answer and the located problems.
"""

from __future__ import annotations

import json
from typing import Any

from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.schema import file_schema
from callbench.generate.plan import BatchPlan, PlanItem
from callbench.generate.rules import GENERATOR_RULES
from callbench.models.base import ChatMessage
from callbench.models.remote.schemas import map_subschemas

SCHEMA_NAME = "scenario"
PLAN_ITEM_MARK = "The plan item is a contract; the scenario must match it exactly: "
"""Starts the line of the user message that gives the plan item's contract as JSON
(:func:`plan_item_contract`); the scripted generator reads it from there."""


def plan_item_contract(item: PlanItem) -> dict[str, Any]:
    """What the scenario of ``item`` is checked against (:mod:`callbench.generate.contract`):
    ``{"language", "difficulty", "channel_kinds", "sections"}`` (``channel_kinds`` empty: a clean
    channel; ``sections``: the titles of the sections it must test)."""
    return {"language": item.language, "difficulty": item.difficulty, "channel_kinds": item.channel_kinds,
            "sections": item.sections}


ANY_JSON: dict[str, Any] = {"type": ["string", "number", "integer", "boolean", "null", "array", "object"]}
"""Any JSON value, spelt out: what an unconstrained field (``{}``, or only a title) means."""
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})


def _explicit_any(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if set(node) <= _ANNOTATIONS:
        return {**node, **ANY_JSON}
    return map_subschemas(node, _explicit_any)


def scenario_schema() -> dict[str, Any]:
    """The scenario JSON Schema (draft 2020-12), as ``callbench schema`` writes it, with every
    unconstrained subschema (pydantic writes ``{"title": ...}`` for an ``Any`` field such as a
    fixture response) spelt out as :data:`ANY_JSON`. Both accept exactly the same documents; the
    explicit form is one that structured-output converters (llama.cpp's grammar converter, which
    rejects a schema without a type) can compile."""
    return _explicit_any(file_schema(Scenario, "scenario.schema.json"))


def disk_matcher(value: Any) -> Any:
    """A dumped matcher (``{"kind": "eq", "eq": "ended"}``) in its on-disk form (``"ended"``);
    other values unchanged. Nested matchers (all / any / not) are converted too."""
    if isinstance(value, dict) and isinstance(value.get("kind"), str) and value["kind"] in value:
        kind = value["kind"]
        inner = value[kind]
        if isinstance(inner, list):
            inner = [disk_matcher(v) for v in inner]
        elif isinstance(inner, dict):
            inner = disk_matcher(inner) if "kind" in inner else inner
        if kind == "eq" and not isinstance(inner, dict):
            return inner
        rest = {k: v for k, v in value.items() if k not in ("kind", kind) and v not in (None, False)}
        return {kind: inner, **rest}
    return value


def tools_payload(agent: LoadedAgent) -> dict[str, Any]:
    """The agent's tools and call-ending tools as sent (and hashed): ``{"tools": [...],
    "call_ending_tools": [{"tool", "success"}]}`` with success matchers in on-disk form."""
    return {
        "tools": [t.model_dump(mode="json") for t in agent.config.tools],
        "call_ending_tools": [
            {
                "tool": e.tool,
                "success": {k: disk_matcher(m.model_dump(mode="json")) for k, m in e.success.items()},
            }
            for e in agent.config.call_ending_tools
        ],
    }


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def user_message(
    agent: LoadedAgent, rendered: str, plan: BatchPlan, item: PlanItem, existing: list[tuple[str, str]]
) -> str:
    """The user message of the first request for ``item`` (contents in the module docstring);
    ``existing`` is ``[(scenario id, title)]`` of the agent's scenarios, sorted."""
    payload = tools_payload(agent)
    agent_vars = ", ".join(sorted(agent.config.variables)) or "none"
    lines = "\n".join(i.line() for i in plan.items)
    taken = "\n".join(f"- {sid}: {title}" for sid, title in existing) or "- (none yet)"
    return (
        f"# Agent\nid: {agent.config.id}\nname: {agent.config.name}\ndomain: {agent.config.domain}\n"
        f"direction: {agent.config.direction}\nlanguages: {', '.join(agent.config.languages)}\n"
        f"template variables with agent defaults (a scenario may set them in variables): {agent_vars}\n\n"
        "# Operating document (rendered; {{date}}, {{time}} and {{weekday}} come from brief.datetime)\n"
        f"<document>\n{rendered}\n</document>\n\n"
        f"# Tools (JSON Schema parameters)\n{_json(payload['tools'])}\n\n"
        "# Call-ending tools and their success conditions (field of the returned object -> matcher)\n"
        f"{_json(payload['call_ending_tools'])}\n\n"
        f"# Batch plan ({len(plan.items)} scenarios; each covers its own intent)\n{lines}\n\n"
        f"# This request: item {item.index + 1}\n"
        f"Write the scenario for item {item.index + 1}: language {item.language}, difficulty "
        f"{item.difficulty}. Test the document's sections: {'; '.join(item.sections)} (each by a criterion "
        "whose excerpts quote it, or an action check on a tool or code value only it names). Use the tools: "
        f"{', '.join(item.tools) or 'as the call needs'}. Failure mode: {item.failure_mode}. Channel: "
        f"{item.channel}.\n"
        f"{PLAN_ITEM_MARK}{json.dumps(plan_item_contract(item), ensure_ascii=False, sort_keys=True)}\n\n"
        f"# Existing scenarios of this agent (do not repeat their intent and facts)\n{taken}\n"
    )


def first_messages(
    agent: LoadedAgent, rendered: str, plan: BatchPlan, item: PlanItem, existing: list[tuple[str, str]]
) -> list[ChatMessage]:
    """``[system (the rules), user (:func:`user_message`)]``."""
    return [
        ChatMessage(role="system", content=GENERATOR_RULES),
        ChatMessage(role="user", content=user_message(agent, rendered, plan, item, existing)),
    ]


def repair_messages(
    previous: list[ChatMessage], answer: str | None, problems: list[str]
) -> list[ChatMessage]:
    """``previous`` plus the model's ``answer`` (when there was text) and a user message listing
    the located ``problems`` and asking for the whole corrected scenario."""
    listed = "\n".join(f"- {p}" for p in problems)
    ask = (
        "Your scenario was not accepted. Problems (file:field path: [code] message):\n"
        f"{listed}\n\nFix every problem and answer with the whole corrected scenario as one JSON object."
    )
    out = list(previous)
    if answer:
        out.append(ChatMessage(role="assistant", content=answer))
    out.append(ChatMessage(role="user", content=ask))
    return out
