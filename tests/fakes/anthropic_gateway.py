"""A loopback Anthropic-format gateway in front of an OpenAI-style backend.

It behaves like a LiteLLM proxy's ``/v1/messages`` route as measured: the Messages API request is
translated to a Chat Completions request and forwarded to ``backend`` (an OpenAI-compatible base
URL, e.g. :class:`fakes.fault_server.FaultServer`'s), and the answer translated back. A ``system``
given as a list of text blocks is forwarded as a list in the system message's ``content``, which
the backend (llama-cpp-python's server) rejects; the gateway then answers HTTP 500 with an opaque
message that names nothing in the request. A plain-string ``system`` works.

Translation: text blocks -> message text; ``tool_use`` -> assistant ``tool_calls``;
``tool_result`` -> ``tool`` messages; tools -> functions; a forced ``tool_choice`` (callbench's
structured output) -> ``response_format: json_schema`` named after the tool, whose JSON answer
comes back as that tool's ``tool_use`` input. :attr:`AnthropicGateway.log` keeps (system type,
status) per request.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from fakes.json_post_server import JsonPostServer
from waiting import limit

OPAQUE_500 = {"type": "error", "error": {"type": "api_error",
                                         "message": "litellm.InternalServerError: Internal Server Error"}}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def to_openai(body: dict[str, Any]) -> dict[str, Any]:
    """The Chat Completions body a LiteLLM-like gateway forwards for a Messages API ``body``."""
    messages: list[dict[str, Any]] = []
    if "system" in body:
        system = body["system"]
        # the measured gateway passes a list on as it is: the backend then rejects the request
        messages.append({"role": "system", "content": system if isinstance(system, str) else
                         [{"type": "text", "text": b.get("text", "")} for b in system]})
    for m in body.get("messages", []):
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        if m["role"] == "assistant":
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}))}}
                     for b in blocks if b.get("type") == "tool_use"]
            item: dict[str, Any] = {"role": "assistant", "content": _text(blocks) or None}
            if calls:
                item["tool_calls"] = calls
            messages.append(item)
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                messages.append({"role": "tool", "tool_call_id": b["tool_use_id"],
                                 "content": _text(b.get("content", ""))})
        text = _text([b for b in blocks if b.get("type") == "text"])
        if text:
            messages.append({"role": "user", "content": text})
    out: dict[str, Any] = {"model": body.get("model", ""), "messages": messages}
    choice = body.get("tool_choice")
    tools = body.get("tools") or []
    if isinstance(choice, dict) and choice.get("type") == "tool":
        forced = next(t for t in tools if t["name"] == choice["name"])
        out["response_format"] = {"type": "json_schema", "json_schema": {
            "name": forced["name"], "schema": forced["input_schema"]}}
        tools = [t for t in tools if t is not forced]
    if tools:
        out["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""), "parameters": t["input_schema"]}}
            for t in tools]
    return out


def to_anthropic(body: dict[str, Any], completion: dict[str, Any]) -> dict[str, Any]:
    """The Messages API answer for ``completion`` (the backend's answer to ``to_openai(body)``)."""
    message = completion["choices"][0]["message"]
    choice = body.get("tool_choice")
    blocks: list[dict[str, Any]] = []
    if isinstance(choice, dict) and choice.get("type") == "tool":
        blocks.append({"type": "tool_use", "id": "toolu_answer", "name": choice["name"],
                       "input": json.loads(message["content"])})
    else:
        if message.get("content"):
            blocks.append({"type": "text", "text": message["content"]})
        for c in message.get("tool_calls") or []:
            args = json.loads(c["function"]["arguments"] or "{}")
            blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                           "input": args if isinstance(args, dict) else {}})
    usage = completion.get("usage") or {}
    return {"id": "msg_gateway", "type": "message", "role": "assistant", "model": body.get("model", ""),
            "content": blocks, "stop_sequence": None,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn",
            "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                      "output_tokens": usage.get("completion_tokens", 0)}}


class AnthropicGateway(JsonPostServer):
    """Use as a context manager; :attr:`root` is the Anthropic base URL (the SDK adds
    ``/v1/messages``). ``backend`` is the OpenAI-compatible ``/v1`` base URL it forwards to."""

    def __init__(self, backend: str) -> None:
        super().__init__()
        self.backend = backend.rstrip("/")
        self.log: list[tuple[str, int]] = []

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and body answered to a Messages API request ``body``."""
        system = body.get("system")
        kind = "none" if system is None else ("string" if isinstance(system, str) else "list")
        forwarded = to_openai(body)
        if kind == "list":  # what the backend does with a list system content: a validation 500
            status, data = 500, OPAQUE_500
        else:
            req = urllib.request.Request(f"{self.backend}/chat/completions",
                                         data=json.dumps(forwarded).encode(),
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": "Bearer gateway"})
            try:
                with urllib.request.urlopen(req, timeout=limit(120.0)) as r:  # a safety net only
                    status, data = 200, to_anthropic(body, json.loads(r.read()))
            except urllib.error.HTTPError as e:
                status, data = e.code, OPAQUE_500
        with self._lock:
            self.log.append((kind, status))
        return status, data
