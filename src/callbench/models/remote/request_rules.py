"""Whole request bodies checked against a target's rules (:mod:`callbench.models.remote.rules`).

:func:`openai_request_problems` reads a Chat Completions body, :func:`anthropic_request_problems`
a Messages body. Each returns ``[(param, message), ...]`` where ``param`` locates the broken part
as the providers' own errors do (``tools[3].function.parameters.anyOf``,
``messages[0].role``). An empty list means the target's documented rules accept the body. Used by
the run preflight (the bodies the adapters would send) and the conformance fake in the tests.

Message rules and sources:

- OpenAI (API reference, "messages"; the 400s "messages with role 'tool' must be a response to a
  preceeding message with 'tool_calls'" and "An assistant message with 'tool_calls' must be
  followed by tool messages responding to each 'tool_call_id'"): roles system, developer, user,
  assistant, tool; a tool message answers a call of the assistant message before it; every call
  is answered before the next other message; ``content`` may be null only on an assistant message
  with ``tool_calls``; ``tool_choice`` only with ``tools``; a ``response_format`` ``json_schema``
  with ``strict: true`` meets the strict rules (Structured Outputs, "Supported schemas") and its
  name matches ``^[a-zA-Z0-9_-]{1,64}$``.
- Anthropic (Messages API reference; tool use guide; prompt caching guide): ``max_tokens``
  required; roles user and assistant only (``system`` is a top-level parameter, a string or text
  blocks); the first message is a user message; each ``tool_result`` answers a ``tool_use`` of
  the assistant message just before and comes before any other block of its message; every
  ``tool_use`` is answered in the next message; text blocks are non-empty; a forced
  ``tool_choice`` names a declared tool; at most 4 ``cache_control`` blocks; at most 32 MB.
"""

from __future__ import annotations

import json
from typing import Any

from callbench.models.remote.rules import (
    OPENAI_STRICT,
    TargetRules,
    parameters_problems,
    schema_problems,
    tools_problems,
)

_OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}


def _tool_list(body: dict[str, Any], dialect: str) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for t in body.get("tools") or []:
        if dialect == "openai":
            fn = t.get("function") if isinstance(t, dict) else None
            fn = fn if isinstance(fn, dict) else {}
            out.append((fn.get("name"), fn.get("parameters", {"type": "object", "properties": {}})))
        else:
            t = t if isinstance(t, dict) else {}
            out.append((t.get("name"), t.get("input_schema")))
    return out


def _tools(body: dict[str, Any], rules: TargetRules, dialect: str) -> list[tuple[str, str]]:
    prefix = "function." if dialect == "openai" else ""
    schema_key = "parameters" if dialect == "openai" else "input_schema"
    out = []
    for i, path, msg in tools_problems(_tool_list(body, dialect), rules):
        where = "tools" if i < 0 else f"tools[{i}].{prefix}{path.replace('parameters', schema_key, 1)}"
        out.append((where, msg))
    return out


def openai_request_problems(body: dict[str, Any], rules: TargetRules) -> list[tuple[str, str]]:
    """Every rule of ``rules`` the Chat Completions ``body`` breaks (see the module docstring)."""
    out = _tools(body, rules, "openai")
    if "tool_choice" in body and not body.get("tools"):
        out.append(("tool_choice", "tool_choice is only allowed when tools are specified"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*out, ("messages", "messages must be a non-empty array")]
    open_calls: set[Any] = set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _OPENAI_ROLES:
            out.append((f"messages[{i}].role", f"unknown role {role!r}"))
            continue
        if role == "tool":
            if m.get("tool_call_id") not in open_calls:
                out.append((f"messages[{i}]", "messages with role 'tool' must be a response to a preceding "
                            "message with 'tool_calls'"))
            open_calls.discard(m.get("tool_call_id"))
            continue
        if open_calls:
            out.append((f"messages[{i - 1}]", "An assistant message with 'tool_calls' must be followed by "
                        "tool messages responding to each 'tool_call_id'"))
            open_calls = set()
        calls = m.get("tool_calls") if role == "assistant" else None
        if m.get("content") is None and not calls:
            out.append((f"messages[{i}].content", "content may be null only on an assistant message with "
                        "tool_calls"))
        for c in calls or []:
            open_calls.add(c.get("id") if isinstance(c, dict) else None)
    if open_calls:
        out.append((f"messages[{len(messages) - 1}]", "An assistant message with 'tool_calls' must be "
                    "followed by tool messages responding to each 'tool_call_id'"))
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec: dict[str, Any] = fmt["json_schema"] if isinstance(fmt.get("json_schema"), dict) else {}
        if not rules.name_ok(spec.get("name")):
            out.append(("response_format.json_schema.name", f"name must match {rules.tool_name}"))
        schema = spec.get("schema")
        where = "response_format.json_schema.schema"
        found = parameters_problems(schema, OPENAI_STRICT) if spec.get("strict") is True else []
        if rules.keywords is not None and not rules.strict:  # a target with its own schema subset
            found += schema_problems(schema, rules)
        out += [(f"{where}.{p}" if p else where, msg) for p, msg in found]
    return out


def anthropic_request_problems(body: dict[str, Any], rules: TargetRules) -> list[tuple[str, str]]:
    """Every rule of ``rules`` the Messages ``body`` breaks (see the module docstring)."""
    out = _tools(body, rules, "anthropic")
    if rules.requires_max_tokens and not isinstance(body.get("max_tokens"), int):
        out.append(("max_tokens", "max_tokens: Field required"))
    system = body.get("system")
    if system is not None and not isinstance(system, str) and (
            not isinstance(system, list)
            or any(not isinstance(b, dict) or b.get("type") != "text" for b in system)):
        out.append(("system", "system must be a string or a list of text blocks"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*out, ("messages", "messages: at least one message is required")]
    pending: set[Any] = set()
    breakpoints = sum(1 for b in system or [] if isinstance(b, dict) and "cache_control" in b)
    breakpoints += sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t)
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            out.append((f"messages[{i}].role", f"Unexpected role {role!r}. Allowed roles are 'user' or "
                        "'assistant'; the system prompt is the top-level system parameter"))
            continue
        if i == 0 and rules.first_message_user and role != "user":
            out.append(("messages[0].role", "first message must use the \"user\" role"))
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        answered: set[Any] = set()
        seen_other = False
        for j, b in enumerate(blocks):
            kind = b.get("type") if isinstance(b, dict) else None
            breakpoints += 1 if isinstance(b, dict) and "cache_control" in b else 0
            where = f"messages[{i}].content[{j}]"
            if kind == "text" and not str(b.get("text", "")).strip():
                out.append((where, "text content blocks must contain non-whitespace text"))
            if kind == "tool_result":
                if role != "user" or b.get("tool_use_id") not in pending:
                    out.append((where, "unexpected `tool_use_id` found in `tool_result` blocks: each "
                                "tool_result block must have a corresponding tool_use block in the previous "
                                "message"))
                if seen_other:
                    out.append((where, "tool_result blocks must come first in the message content"))
                answered.add(b.get("tool_use_id"))
            else:
                seen_other = True
        if pending - answered:
            out.append((f"messages[{i}]", "`tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {', '.join(sorted(map(str, pending - answered)))}"))
        pending = {b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        names = {n for n, _ in _tool_list(body, "anthropic")}
        if choice.get("name") not in names:
            out.append(("tool_choice.name", f"tool {choice.get('name')!r} is not among the tools"))
    if rules.max_request_bytes is not None:
        size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
        if size > rules.max_request_bytes:
            out.append(("", f"request_too_large: {size} bytes, over the {rules.max_request_bytes} "
                        "byte limit"))
    if rules.max_cache_breakpoints is not None and breakpoints > rules.max_cache_breakpoints:
        out.append(("cache_control", f"A maximum of {rules.max_cache_breakpoints} blocks with cache_control "
                    f"may be provided. Found {breakpoints}."))
    return out
