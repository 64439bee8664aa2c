"""A loopback OpenAI-compatible server with the schema rules of Gemini's OpenAI-compatible
endpoint, worded as Gemini words them.

A response schema (``response_format.json_schema.schema``) or tool parameter schema that uses a
keyword outside Gemini's subset gets HTTP 400 with Gemini's list-wrapped body, which names the
keyword and a ``generation_config``/``function_declarations`` path but never ``response_format``:

    [{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name
      \\"additionalProperties\\" at 'generation_config.response_schema': Cannot find field.",
      "status": "INVALID_ARGUMENT"}}]

Rejected: ``additionalProperties``, ``$ref``, ``$defs``, the ``null`` type (alone or in a type
list), and an ``enum`` on a non-string type. Everything else is answered as
:class:`fakes.fault_server.FaultServer` answers a valid request (a candidate, caller and judges
that complete an episode). :attr:`GeminiLikeServer.log` keeps (role, status, message).
"""

from __future__ import annotations

import json
from typing import Any

from fakes.fault_server import FaultServer, role_of
from fakes.json_post_server import JsonPostServer

UNKNOWN = ("additionalProperties", "$ref", "$defs")


def gemini_problem(schema: Any, where: str) -> str | None:
    """Gemini's message for the first keyword of ``schema`` it rejects, or None."""
    if isinstance(schema, dict):
        for key in UNKNOWN:
            if key in schema:
                return (f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': "
                        "Cannot find field.")
        kind = schema.get("type")
        if kind == "null" or (isinstance(kind, list)):
            return (f"Invalid value at '{where}.type' ({json.dumps(kind)}), only a single type of "
                    "STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT is accepted")
        if "enum" in schema and kind not in (None, "string"):
            return f"* GenerateContentRequest.{where}.enum: only allowed for STRING type"
        for key, value in schema.items():
            if key in ("properties",) and isinstance(value, dict):
                for name, sub in value.items():
                    found = gemini_problem(sub, f"{where}.properties[{name}].value")
                    if found:
                        return found
            elif key in ("items",):
                found = gemini_problem(value, f"{where}.items")
                if found:
                    return found
            elif key in ("anyOf",) and isinstance(value, list):
                for i, sub in enumerate(value):
                    found = gemini_problem(sub, f"{where}.any_of[{i}]")
                    if found:
                        return found
    return None


class GeminiLikeServer(JsonPostServer):
    """Use as a context manager; :attr:`url` is the ``/v1`` base URL."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, int, str]] = []
        self._answers = FaultServer()

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def problem(self, body: dict[str, Any]) -> str | None:
        """Gemini's message for the first rejected schema in ``body``, or None."""
        rf = body.get("response_format")
        if isinstance(rf, dict) and rf.get("type") == "json_schema":
            schema = rf.get("json_schema", {}).get("schema")
            found = gemini_problem(schema, "generation_config.response_schema")
            if found:
                return found
        for i, tool in enumerate(body.get("tools") or []):
            found = gemini_problem(tool.get("function", {}).get("parameters"),
                                   f"tools[0].function_declarations[{i}].parameters")
            if found:
                return found
        return None

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        """The status and JSON body answered to ``body``."""
        role = role_of(body)
        message = self.problem(body)
        if message is not None:
            with self._lock:
                self.log.append((role, 400, message))
            return 400, [{"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}]
        reply = self._answers.valid_message(body)
        with self._lock:
            self.log.append((role, 200, ""))
        return 200, {"id": "gemini-1", "object": "chat.completion", "created": 0,
                     "model": body.get("model", ""),
                     "choices": [{"index": 0, "message": reply, "logprobs": None,
                                  "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}],
                     "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
