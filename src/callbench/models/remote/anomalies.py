"""Provider responses that are not usable completions.

An HTTP 200 is not yet a completion. :func:`checked_body` reads a raw response and raises an
:class:`InfrastructureError` (retryable, with its fault ``kind``) for a body that is not JSON
(``html_body`` for a non-JSON content type, ``not_utf8``, ``malformed_body`` for truncated or
otherwise undecodable JSON, or JSON that is not an object); :func:`openai_choices` and
:func:`anthropic_content` check the shape each adapter reads (``error_body`` for a 200 that
carries an error object instead of a completion; ``missing_choices`` / ``empty_choices``;
``missing_content``; ``malformed_body`` for fields of the wrong type, e.g. a tool call without a
name, content that is not a string, usage that is not an object). These are the provider's faults,
never the candidate's:
they are retried with backoff and, when they persist, the episode is skipped with a reason naming
the provider, the role and the kind.
"""

from __future__ import annotations

import json
from typing import Any

from callbench.models.base import InfrastructureError

_SHOWN = 80


def _anomaly(who: str, kind: str, detail: str) -> InfrastructureError:
    return InfrastructureError(f"{who}: {kind}: {detail}", retryable=True, kind=kind)


def _ends_early(text: str) -> bool:
    """True when ``text`` is a JSON document cut short: the parse fails only where the text ends
    (a NUL byte, invalid anywhere in JSON, is appended so the error lands at the cut)."""
    try:
        json.loads(text + "\x00")
    except json.JSONDecodeError as e:
        return e.pos >= len(text)
    return False


def checked_body(content: bytes, content_type: str, who: str) -> dict[str, Any]:
    """The decoded JSON object of a 200 response body.

    ``who`` names provider and role for the message (e.g. ``"openai candidate"``). Raises
    InfrastructureError of kind ``html_body`` (content type neither JSON nor empty; the first
    80 characters are quoted), ``not_utf8``, ``malformed_body`` (not JSON, e.g. truncated, or
    not a JSON object).
    """
    ctype = content_type.split(";")[0].strip().lower()
    if ctype and "json" not in ctype:
        shown = content[:_SHOWN].decode("utf-8", errors="replace")
        raise _anomaly(who, "html_body", f"HTTP 200 with content type {ctype!r}, not JSON: {shown!r}")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _anomaly(who, "not_utf8", f"the response body is not UTF-8 (byte {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        what = "empty" if not text.strip() else "truncated JSON" if _ends_early(text) else "not JSON"
        raise _anomaly(who, "malformed_body", f"the response body is {what} ({e.msg}: line {e.lineno} "
                       f"column {e.colno}; {len(content)} bytes)") from None
    if not isinstance(data, dict):
        raise _anomaly(who, "malformed_body", f"the response body is a JSON {type(data).__name__}, "
                       "not an object")
    return data


def _error_body(data: dict[str, Any], who: str) -> None:
    """Raise ``error_body`` for a 200 whose body is an error object (``{"error": {...}}``, or the
    Anthropic shape ``{"type": "error", "error": {...}}``) rather than a completion."""
    err = data.get("error")
    if data.get("type") != "error" and not (isinstance(err, dict | str) and err):
        return
    if isinstance(err, dict):
        label = str(err.get("type") or err.get("code") or "error")
        text = f"{label}: {err.get('message', '')}".strip().rstrip(":")
    else:
        text = str(err or "error")
    raise _anomaly(who, "error_body",
                   f"HTTP 200 carrying an error instead of a completion: {text[:_SHOWN * 2]}")


def _bad(who: str, what: str) -> InfrastructureError:
    return _anomaly(who, "malformed_body", what)


MAX_USAGE_TOKENS = 100_000_000
"""More tokens than any model reads or writes in one request (contexts are at most a few million
tokens): a count above it is not a count."""


def _check_usage(usage: Any, who: str, fields: tuple[str, ...]) -> None:
    """Usage is untrusted input: a count that is not a whole number, is negative
    (``prompt_tokens: -100`` gave a caller speed of -1687.7 tokens/s in a report) or is above
    :data:`MAX_USAGE_TOKENS` is a ``malformed_body`` anomaly, retried and counted. A missing usage
    object or count is read as 0 and noted in the ledger by the client (``usage_missing``)."""
    if usage is None:
        return
    if not isinstance(usage, dict):
        raise _bad(who, f"'usage' is a JSON {type(usage).__name__}, not an object")
    for name in fields:
        value = usage.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(who, f"'usage.{name}' is {json.dumps(value)[:_SHOWN]}, not a whole number")
        if value < 0:
            raise _bad(who, f"'usage.{name}' is {value}, a negative token count")
        if value > MAX_USAGE_TOKENS:
            raise _bad(who, f"'usage.{name}' is {value}, more tokens than any request has")


def openai_choices(data: dict[str, Any], who: str) -> None:
    """Check a Chat Completions body before the SDK reads it. Raises InfrastructureError
    ``error_body`` (an error object instead of a completion), ``missing_choices`` /
    ``empty_choices`` (no non-empty ``choices`` list), ``malformed_body`` (the first choice has no
    ``message`` object, its ``content`` is neither a string nor null, a tool call has no function
    name, its arguments are not a string, or ``usage`` is not an object of whole numbers)."""
    choices = data.get("choices")
    if choices is None:
        _error_body(data, who)
        raise _anomaly(who, "missing_choices", "the response has no 'choices'")
    if not isinstance(choices, list) or not choices:
        _error_body(data, who)
        raise _anomaly(who, "empty_choices", f"the response's 'choices' is {json.dumps(choices)[:_SHOWN]}")
    first = choices[0]
    if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
        raise _bad(who, "the first choice has no 'message' object")
    message = first["message"]
    for name in ("content", "refusal"):
        if message.get(name) is not None and not isinstance(message[name], str):
            raise _bad(who, f"the message's {name!r} is a JSON {type(message[name]).__name__}, not a string")
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise _bad(who, f"the message's 'tool_calls' is a JSON {type(calls).__name__}, not a list")
        for i, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise _bad(who, f"tool_calls[{i}] has no function name")
            if fn.get("arguments") is not None and not isinstance(fn["arguments"], str):
                raise _bad(who, f"tool_calls[{i}].function.arguments is not a JSON string")
            if call.get("id") is not None and not isinstance(call["id"], str):
                raise _bad(who, f"tool_calls[{i}].id is not a string")
    _check_usage(data.get("usage"), who, ("prompt_tokens", "completion_tokens", "total_tokens"))


def anthropic_content(data: dict[str, Any], who: str) -> None:
    """Check a Messages API body before the SDK reads it. Raises InfrastructureError
    ``error_body`` (``type: error``, an error object with HTTP 200), ``missing_content`` (no
    ``content`` list, e.g. a body with only ``stop_reason``), ``malformed_body`` (a block that is
    not an object with a string ``type``, a text block without text, a ``tool_use`` block without
    id, name or object input, or ``usage`` that is not an object of whole numbers). An empty
    ``content`` list is a usable but empty completion (``empty_reply``, checked by the client)."""
    _error_body(data, who)
    content = data.get("content")
    if not isinstance(content, list):
        raise _anomaly(who, "missing_content", "the response has no 'content' list")
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _bad(who, f"content[{i}] is not a block object with a 'type'")
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise _bad(who, f"content[{i}] is a text block without 'text'")
        if block["type"] == "tool_use" and not (
            isinstance(block.get("id"), str) and isinstance(block.get("name"), str) and block["name"]
            and isinstance(block.get("input"), dict)
        ):
            raise _bad(who, f"content[{i}] is a tool_use block without id, name or object input")
    _check_usage(data.get("usage"), who, ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                          "cache_creation_input_tokens"))
