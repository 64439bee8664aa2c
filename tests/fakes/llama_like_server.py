"""A loopback OpenAI-compatible server that behaves like llama-cpp-python 0.3.36's.

Measured against the real server (``callbench serve-local``) and reproduced here:

- ``response_format.type == "json_schema"``: HTTP 500 whose ``error.message`` is FastAPI's text
  of a pydantic ``literal_error`` at ``('body', 'response_format', 'type')``:
  ``Input should be 'text' or 'json_object'``; ``json_object`` with a ``schema`` is honoured;
- an assistant message with ``"content": null``: HTTP 500, ``Input should be a valid string`` at
  ``('body', 'messages', N, 'ChatCompletionRequestAssistantMessage', 'content')`` (``""`` passes);
- ``tools`` without ``tool_choice`` are left out of the prompt (the reply is plain speech that
  mentions no tool); with ``tool_choice: auto`` the reply is the tool call, as structured
  ``tool_calls`` (``calls_as="tool_calls"``) or, like the GGUF template, as JSON text in
  ``content`` (``calls_as="content"``); ``tool_choice: required`` is a 500 with an empty message;
- no cached-token details; ``timings`` only when ``timings=True`` (llama.cpp's own server sends
  them; llama-cpp-python does not).

:attr:`LlamaLikeServer.log` keeps every request body and the status answered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fakes.fault_server import FaultServer, smallest_instance
from fakes.json_post_server import JsonPostServer

_NAMES = {"expressed_step": "caller_turn", "criteria": "task_judgement", "ratings": "conversation_judgement"}


def _json_reply(body: dict[str, Any], schema: dict[str, Any]) -> str:
    """A valid reply for ``schema``: the fault server's caller and judge answers (named by the
    schema's properties, as no name is sent with json_object), else the schema's smallest instance."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    name = next((n for key, n in _NAMES.items() if key in props), "output")
    named = {
        **body,
        "tools": [],
        "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}},
    }
    return str(FaultServer().valid_message(named)["content"])


def _literal_error(loc: tuple[Any, ...], msg: str, value: Any) -> str:
    return f"{{'type': 'literal_error', 'loc': {loc!r}, 'msg': {msg!r}, 'input': {value!r}}}"


def _validation_text(errors: list[str]) -> str:
    n = len(errors)
    lines = "".join(f"  {e}\n" for e in errors)
    return (
        f'{n} validation error{"s" if n != 1 else ""}:\n{lines}\n  File "llama_cpp/server/app.py", '
        "line 376, in create_chat_completion\n    POST /v1/chat/completions"
    )


@dataclass
class Entry:
    """One request: its body and the HTTP status answered."""

    body: dict[str, Any]
    status: int = 200
    reply: dict[str, Any] = field(default_factory=dict)


class LlamaLikeServer(JsonPostServer):
    """Use as a context manager; :attr:`url` is the ``/v1`` base URL. ``calls_as`` is how tool calls
    come back (see the module docstring); ``timings`` adds llama.cpp-style timings."""

    def __init__(self, *, calls_as: str = "tool_calls", timings: bool = False) -> None:
        super().__init__()
        self.calls_as, self.timings = calls_as, timings
        self.log: list[Entry] = []

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def statuses(self) -> list[int]:
        return [e.status for e in self.log]

    # ------------------------------------------------------------------ behaviour
    def _errors(self, body: dict[str, Any]) -> list[str]:
        errors = []
        rf = body.get("response_format")
        if isinstance(rf, dict) and rf.get("type") not in ("text", "json_object"):
            errors.append(
                _literal_error(
                    ("body", "response_format", "type"),
                    "Input should be 'text' or 'json_object'",
                    rf.get("type"),
                )
            )
        for i, m in enumerate(body.get("messages", [])):
            if m.get("role") == "assistant" and m.get("content") is None:
                errors.append(
                    _literal_error(
                        ("body", "messages", i, "ChatCompletionRequestSystemMessage", "role"),
                        "Input should be 'system'",
                        "assistant",
                    )
                )
                errors.append(
                    f"{{'type': 'string_type', 'loc': ('body', 'messages', {i}, "
                    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a "
                    "valid string', 'input': None}"
                )
        return errors

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON body the server answers ``body`` with."""
        entry = Entry(body=body)
        with self._lock:
            self.log.append(entry)
        errors = self._errors(body)
        if errors:
            entry.status = 500
            return 500, {
                "error": {
                    "message": _validation_text(errors),
                    "type": "internal_server_error",
                    "param": None,
                    "code": None,
                }
            }
        tools = body.get("tools") or []
        choice = body.get("tool_choice")
        if tools and choice == "required":
            entry.status = 500
            return 500, {
                "error": {"message": "", "type": "internal_server_error", "param": None, "code": None}
            }
        message: dict[str, Any]
        rf = body.get("response_format")
        if tools and choice == "auto" and body["messages"][-1]["role"] == "user":
            fn = tools[0]["function"]
            args = json.dumps(smallest_instance(fn.get("parameters", {})))
            if self.calls_as == "content":
                message = {
                    "role": "assistant",
                    "content": f'{{\n  "name": "{fn["name"]}",\n  "arguments": {args}\n}}',
                }
            else:
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call__0_x",
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": args},
                        }
                    ],
                }
        elif isinstance(rf, dict) and rf.get("type") == "json_object":
            message = {"role": "assistant", "content": _json_reply(body, rf.get("schema") or {})}
        elif not tools and "JSON Schema:\n" in (body["messages"][0].get("content") or ""):
            schema = json.loads(body["messages"][0]["content"].split("JSON Schema:\n", 1)[1])
            message = {"role": "assistant", "content": "```json\n" + _json_reply(body, schema) + "\n```"}
        else:
            message = {"role": "assistant", "content": "Hello, how can I help you today?"}
        reply: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930},
        }
        if self.timings:
            reply["timings"] = {
                "prompt_n": 900,
                "prompt_ms": 12000.0,
                "predicted_n": 30,
                "predicted_ms": 1500.0,
            }
        entry.reply = reply
        return 200, reply
