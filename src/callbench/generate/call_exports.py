"""Voice platforms' call objects as callbench transcript rows (:mod:`callbench.generate.transcript`).

Each converter takes a loaded call object and returns the rows of the callbench JSONL shape
(``{"role": "caller" | "agent" | "tool", ...}``) with the JSON path they came from, or None when
the object is not of its shape. Only what was said and the tool calls with their results are kept:
timestamps, costs, recordings, analysis and the platform's phone numbers are dropped before
anything else reads the call.

- **Vapi call object** (``GET /call/{id}``, https://docs.vapi.ai/api-reference/calls/get-call; the
  message schemas at https://schemas.apis.io/schemas/vapi/vapi-toolcallmessage/ and
  https://schemas.apis.io/schemas/vapi/vapi-toolcallresultmessage/): ``artifact.messages`` (or the
  top-level ``messages``), each ``{"role", "message", "time", "secondsFromStart", ...}`` with role
  ``user`` (the caller), ``bot`` (the agent), ``system`` (dropped), ``tool_calls`` (``toolCalls``:
  ``[{"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}]``) and
  ``tool_call_result`` (``{"toolCallId", "name", "result": "<JSON or text>"}``).
- **Retell call object** (``GET /v2/get-call/{call_id}``,
  https://docs.retellai.com/api-references/get-call): ``transcript_with_tool_calls`` ("transcript
  of the call weaved with tool call invocation and results"), else ``transcript_object`` (the
  utterances only). Utterances are ``{"role": "agent" | "user", "content", "words"}``;
  ``{"role": "tool_call_invocation", "tool_call_id", "name", "arguments": "<JSON>"}`` and
  ``{"role": "tool_call_result", "tool_call_id", "content"}`` are the tool calls and results.
  Flow bookkeeping entries (``transition``, ``node_transition``, ``dtmf``) are dropped.
"""

from __future__ import annotations

from typing import Any

_VAPI_ROLES = frozenset({"bot", "tool_calls", "tool_call_result"})
_RETELL_SKIPPED = frozenset({"transition", "node_transition", "dtmf"})


def _rows(value: Any) -> list[Any] | None:
    return value if isinstance(value, list) and value else None


def vapi_rows(data: Any) -> tuple[list[dict[str, Any]], str] | None:
    """The rows of a Vapi call object (module docstring) and the path they came from
    (``artifact.messages`` or ``messages``); None when ``data`` is not one."""
    if not isinstance(data, dict):
        return None
    artifact = data.get("artifact")
    nested = artifact.get("messages") if isinstance(artifact, dict) else None
    for path, messages in (("artifact.messages", nested), ("messages", data.get("messages"))):
        rows = _rows(messages)
        if rows is None or not any(isinstance(m, dict) and m.get("role") in _VAPI_ROLES for m in rows):
            continue
        out: list[dict[str, Any]] = []
        for m in rows:
            role = m.get("role") if isinstance(m, dict) else None
            if role == "bot":
                out.append({"role": "agent", "text": m.get("message") or ""})
            elif role == "user":
                out.append({"role": "caller", "text": m.get("message") or ""})
            elif role == "tool_calls":
                out.append({"role": "agent", "text": "", "tool_calls": m.get("toolCalls") or []})
            elif role == "tool_call_result":
                out.append({"role": "tool", "tool_call_id": m.get("toolCallId", ""),
                            "result": m.get("result")})
            elif role == "system":
                continue
            else:  # left as it is, so that the reader names the entry
                out.append(m if isinstance(m, dict) else {"role": None})
        return out, path
    return None


def retell_rows(data: Any) -> tuple[list[dict[str, Any]], str] | None:
    """The rows of a Retell call object (module docstring) and the field they came from
    (``transcript_with_tool_calls`` or ``transcript_object``); None when ``data`` is not one."""
    if not isinstance(data, dict):
        return None
    for path in ("transcript_with_tool_calls", "transcript_object"):
        rows = _rows(data.get(path))
        if rows is None:
            continue
        out: list[dict[str, Any]] = []
        for u in rows:
            role = u.get("role") if isinstance(u, dict) else None
            if role == "agent":
                out.append({"role": "agent", "text": u.get("content") or ""})
            elif role == "user":
                out.append({"role": "caller", "text": u.get("content") or ""})
            elif role == "tool_call_invocation":
                out.append({"role": "agent", "text": "", "tool_calls": [
                    {"id": u.get("tool_call_id", ""), "name": u.get("name"),
                     "arguments": u.get("arguments") or "{}"}]})
            elif role == "tool_call_result":
                out.append({"role": "tool", "tool_call_id": u.get("tool_call_id", ""),
                            "result": u.get("content")})
            elif role in _RETELL_SKIPPED:
                continue
            else:
                out.append(u if isinstance(u, dict) else {"role": None})
        return out, path
    return None
