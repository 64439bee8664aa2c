"""The wire formats the webhook reads: Vapi ``tool-calls`` server messages, Retell custom-function
requests (with their signature), and the OpenAPI document of the generic routes.

Sources: Vapi, https://docs.vapi.ai/tools/custom-tools (``message.toolCallList`` items ``{id,
name, arguments}``, or ``{id, function: {name, arguments}}`` in ``toolWithToolCallList``; answer
``{"results": [{"toolCallId", "result"}]}``); Retell, https://docs.retellai.com/build/custom-function
and https://docs.retellai.com/features/secure-webhook (body ``{name, call, args}``; header
``X-Retell-Signature: v=<ms timestamp>,d=<hex HMAC-SHA256 of body + timestamp, keyed by the API
key>``, as the retell-sdk ``verify`` function computes it, fresh for 5 minutes).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from typing import Any

from callbench.models.base import ToolSchema
from callbench.sim.webhook.hooks import IncomingCall

SIGNATURE_RE = re.compile(r"v=(\d+),d=([0-9a-f]+)")
SIGNATURE_MAX_AGE_S = 300.0


class BadRequest(ValueError):
    """A request the webhook cannot use; the message says why (sent back as the error)."""


def _raw(arguments: Any) -> str:
    # a string is kept as the agent sent it, so malformed JSON is recorded as such
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def vapi_ids(message: dict[str, Any]) -> list[str]:
    """The ids a Vapi server message may be routed by: ``call.id``, ``chat.id``,
    ``chat.sessionId``, ``session.id``, ``sessionId`` (those present, in that order)."""
    out = []
    for outer, inner in (("call", "id"), ("chat", "id"), ("chat", "sessionId"), ("session", "id")):
        obj = message.get(outer)
        if isinstance(obj, dict) and isinstance(obj.get(inner), str):
            out.append(obj[inner])
    if isinstance(message.get("sessionId"), str):
        out.append(message["sessionId"])
    return out


def vapi_calls(body: Any) -> tuple[dict[str, Any], list[IncomingCall]]:
    """``(message, calls)`` of a Vapi server message; ``calls`` is empty for a message that is
    not ``tool-calls`` (status updates, reports: acknowledged and ignored). Raises
    :class:`BadRequest` for a body without a ``message`` object or a malformed call list."""
    if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
        raise BadRequest('expected a Vapi server message: {"message": {"type": ...}}')
    message = body["message"]
    if message.get("type") != "tool-calls":
        return message, []
    items = message.get("toolCallList")
    if items is None:
        items = [t.get("toolCall") for t in message.get("toolWithToolCallList") or [] if isinstance(t, dict)]
    if not isinstance(items, list) or not items:
        raise BadRequest("message.toolCallList: expected a non-empty list of tool calls")
    calls = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"message.toolCallList[{i}]: expected an object")
        fn: dict[str, Any] = item["function"] if isinstance(item.get("function"), dict) else item
        name, cid = fn.get("name"), item.get("id")
        if not isinstance(name, str) or not isinstance(cid, str):
            raise BadRequest(f"message.toolCallList[{i}]: expected id and name strings")
        calls.append(IncomingCall(call_id=cid, name=name, raw_arguments=_raw(fn.get("arguments", {}))))
    return message, calls


def retell_signature(body: bytes, key: str, timestamp_ms: int) -> str:
    """The ``X-Retell-Signature`` value of ``body`` at ``timestamp_ms`` (module docstring)."""
    digest = hmac.new(key.encode(), body + str(timestamp_ms).encode(), hashlib.sha256).hexdigest()
    return f"v={timestamp_ms},d={digest}"


def retell_verified(body: bytes, key: str, header: str | None, now_s: float | None = None) -> bool:
    """True when ``header`` signs ``body`` with ``key`` and is at most 5 minutes old."""
    m = SIGNATURE_RE.fullmatch((header or "").strip())
    if m is None:
        return False
    ts = int(m.group(1))
    now_ms = (time.time() if now_s is None else now_s) * 1000
    if abs(now_ms - ts) > SIGNATURE_MAX_AGE_S * 1000:
        return False
    return hmac.compare_digest(retell_signature(body, key, ts), f"v={ts},d={m.group(2)}")


def retell_call(body: Any) -> tuple[list[str], IncomingCall]:
    """``(routing ids, call)`` of a Retell custom-function body; ids are ``call.chat_id`` and
    ``call.call_id`` (those present). Raises :class:`BadRequest` for another shape."""
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise BadRequest('expected a Retell custom-function request: {"name", "call", "args"}')
    call = body.get("call") if isinstance(body.get("call"), dict) else body.get("chat")
    ids = [call[k] for k in ("chat_id", "call_id") if isinstance(call, dict) and isinstance(call.get(k), str)]
    return ids, IncomingCall(call_id="", name=body["name"], raw_arguments=_raw(body.get("args", {})))


def openapi_document(tools: list[ToolSchema], server_url: str) -> dict[str, Any]:
    """An OpenAPI 3.1 document of the generic tool routes at ``server_url`` (the episode's
    ``tools_url``): one ``POST /{tool}`` per tool, its JSON Schema as the request body, answered
    ``{"result": ..., "call_ended": bool}``."""
    answer = {
        "type": "object",
        "properties": {"result": {}, "call_ended": {"type": "boolean"}},
        "required": ["result", "call_ended"],
    }
    paths = {
        f"/{t.name}": {
            "post": {
                "operationId": t.name,
                "summary": t.description,
                "requestBody": {"required": True, "content": {"application/json": {"schema": t.parameters}}},
                "responses": {
                    "200": {
                        "description": "the backend's answer",
                        "content": {"application/json": {"schema": answer}},
                    },
                    "409": {"description": "the episode has ended"},
                },
            }
        }
        for t in tools
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "callbench mock backend", "version": "1"},
        "servers": [{"url": server_url}],
        "paths": paths,
    }
