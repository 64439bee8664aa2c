"""A bundle's tools and the roles' response schemas against the providers' request rules:
what ``callbench validate --providers`` reports (:func:`bundle_provider_problems`) and
what the run preflight refuses before any request (:func:`request_rule_problems`).

Each tool is checked as the adapter would send it (``schemas.clean_tool_parameters`` for the
target's wire format: ``anthropic`` for Anthropic, ``openai`` for the OpenAI targets and Gemini's
OpenAI-compatible endpoint), so keywords the adapters drop or fold into descriptions are not
reported. The rules and their sources are in :mod:`callbench.models.remote.rules`.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from callbench.bundle.loader import Problem
from callbench.bundle.models import Bundle, LoadedAgent, Pillar, Scenario
from callbench.bundle.validate.audits import bundle_files
from callbench.models.remote.rules import ANTHROPIC, GEMINI, OPENAI, TargetRules, tools_problems
from callbench.models.remote.schemas import clean_tool_parameters
from callbench.sim.tools import candidate_tools

if TYPE_CHECKING:
    from callbench.models.base import ChatMessage, ModelRequest

# The preflight's imports (the adapters' body functions, the judges' and caller's schemas) are
# made where used: `callbench validate --providers` needs only the tool checks above, and these
# cost about 0.1 s of its start-up.

LOG = logging.getLogger(__name__)


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
        tools = candidate_tools(agent.config)  # as offered: concluding_message added where declared
        for rules in targets:
            for i, path, message in tools_problems(sent_tools(tools, rules), rules):
                where = "tools" if i < 0 else f"tools.{i}.{path}"
                tool = f"tool {tools[i].name!r}: " if i >= 0 else ""
                problem = Problem(file=files.agent(agent), path=where, code=f"provider.{rules.name}",
                                  message=f"{tool}{message}")
                (warnings if rules.severity == "warning" else errors).append(problem)
    return errors, warnings


GEMINI_HOST = "generativelanguage.googleapis.com"
PREFLIGHT_INDICES = 64
"""Message indices a judge schema is checked with before a run (traces differ; the rules checked
here do not depend on the count, and a long transcript's enum is the judges' own concern)."""
MAX_SHOWN = 3


def _unwrap(client: Any) -> Any:
    seen = 0
    while hasattr(client, "inner") and seen < 5:
        client = client.inner
        seen += 1
    return client


def client_target(client: Any) -> tuple[TargetRules, bool] | None:
    """(rules, binding) for a role client, or None when no provider rule applies (scripted, local).
    Binding rules stop the run: Anthropic's Messages API (any base URL: a gateway speaking it
    takes its request format) and OpenAI's own endpoint. An OpenAI-compatible server elsewhere is
    checked against OpenAI's rules, or Gemini's on Gemini's host, as warnings: such servers accept
    more (llama.cpp, vLLM) or differently, and the run's own requests tell."""
    inner = _unwrap(client)
    provider = getattr(inner, "provider", None)
    if provider == "anthropic":
        return ANTHROPIC, True
    if provider != "openai":
        return None
    base = inner.settings.base_url or os.environ.get("OPENAI_BASE_URL") or ""
    if GEMINI_HOST in base:
        return GEMINI, False
    return OPENAI, bool(getattr(inner, "official_endpoint", False))


def _messages() -> list[ChatMessage]:
    from callbench.models.base import ChatMessage

    return [ChatMessage(role="system", content="preflight"), ChatMessage(role="user", content="preflight")]


def _body(client: Any, request: ModelRequest) -> tuple[dict[str, Any], str]:
    from callbench.models.remote.anthropic_client import anthropic_request_body
    from callbench.models.remote.openai_client import openai_request_body

    inner = _unwrap(client)
    if inner.provider == "anthropic":
        return anthropic_request_body(request, inner.model, inner.settings), "anthropic"
    return openai_request_body(request, inner.model, inner.settings,
                               official_endpoint=bool(getattr(inner, "official_endpoint", False))), "openai"


def _requests(role: str, pairs: list[tuple[LoadedAgent, Scenario]]) -> list[tuple[str, ModelRequest]]:
    """(what it is for, the role's request) for each distinct thing the role is sent in the run."""
    from callbench.grade.prompts import response_schema
    from callbench.grade.rubric import DEFAULT_RUBRIC
    from callbench.models.base import ModelRequest, RequestContext
    from callbench.sim.caller import SCHEMA_NAME as CALLER_SCHEMA_NAME
    from callbench.sim.caller import caller_schema

    out: list[tuple[str, ModelRequest]] = []
    if role == "candidate":
        for agent in dict.fromkeys(a.config.id for a, _ in pairs):
            config = next(a.config for a, _ in pairs if a.config.id == agent)
            out.append((f"agent {agent}", ModelRequest(
                messages=_messages(), tools=candidate_tools(config),
                context=RequestContext(role="candidate", episode_id="preflight", agent_id=agent))))
        return out
    indices = list(range(PREFLIGHT_INDICES))
    for _, scen in pairs:
        if role == "caller":
            schema, name = caller_schema(scen.brief), CALLER_SCHEMA_NAME
        elif role == "task_judge":
            ids = [c.id for c in scen.criteria if c.pillar == Pillar.TASK]
            schema, name = response_schema(ids, [], indices), "task_judgement"
        else:
            ids = [c.id for c in scen.criteria if c.pillar == Pillar.CONVERSATION]
            schema = response_schema(ids, [r.id for r in DEFAULT_RUBRIC.ratings], indices)
            name = "conversation_judgement"
        out.append((f"scenario {scen.id}", ModelRequest(
            messages=_messages(), response_schema=schema, response_schema_name=name,
            context=RequestContext(role=role, episode_id="preflight"))))
    return out


def request_rule_problems(clients: dict[str, Any], pairs: list[tuple[LoadedAgent, Scenario]]
                          ) -> tuple[list[str], list[str]]:
    """(errors, warnings), one line per role client: the requests the run would send (each
    candidate's real tools per agent; the caller's and judges' real response schemas per
    scenario), built by the adapters' own body functions and checked against the target's rules
    (:func:`client_target`). Makes no request."""
    from callbench.models.remote.request_rules import anthropic_request_problems, openai_request_problems

    errors: list[str] = []
    warnings: list[str] = []
    checked: set[tuple[str, str, str]] = set()
    for name, client in clients.items():
        found = client_target(client)
        if found is None:
            continue
        rules, binding = found
        role = "candidate" if name.startswith("candidate") else name
        key = (client.spec, client.settings.model_dump_json(), role)
        if key in checked:
            continue
        checked.add(key)
        broken: list[str] = []
        for what, request in _requests(role, pairs):
            body, dialect = _body(client, request)
            check = anthropic_request_problems if dialect == "anthropic" else openai_request_problems
            for param, message in check(body, rules):
                tool = _tool_named(body, param, dialect)
                broken.append(f"{what}: {param}{tool}: {message}")
        if broken:
            more = f" (and {len(broken) - MAX_SHOWN} more)" if len(broken) > MAX_SHOWN else ""
            line = (f"preflight: {name} {client.spec}: {rules.title} would reject {len(broken)} part(s) of "
                    f"the run's requests: {'; '.join(broken[:MAX_SHOWN])}{more}")
            (errors if binding and rules.severity == "error" else warnings).append(line)
    return errors, warnings


def _tool_named(body: dict[str, Any], param: str, dialect: str) -> str:
    if not param.startswith("tools["):
        return ""
    try:
        tool = body["tools"][int(param[6:param.index("]")])]
    except (ValueError, IndexError, KeyError, TypeError):
        return ""
    name = tool.get("function", {}).get("name") if dialect == "openai" else tool.get("name")
    return f" (tool {name!r})"


def check_request_rules(clients: dict[str, Any], pairs: list[tuple[LoadedAgent, Scenario]]) -> list[str]:
    """The first step of the run preflight: :func:`request_rule_problems` for the run's role
    clients and selected (agent, scenario) pairs. Raises :class:`PreflightError` with the first
    error line (the run would send requests its provider rejects); returns the warning lines,
    each also logged."""
    from callbench.runs.preflight import PreflightError

    errors, warnings = request_rule_problems(clients, pairs)
    for line in warnings:
        LOG.warning("%s", line)
    if errors:
        raise PreflightError(errors[0])
    return warnings
