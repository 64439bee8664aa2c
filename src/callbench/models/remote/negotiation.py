"""What an OpenAI-compatible server accepts, learnt from its request-validation errors (issue 18).

Servers differ where the Chat Completions API leaves room or where they lag behind it. Measured
with llama-cpp-python 0.3.36's server: ``response_format: {"type": "json_schema"}`` gets HTTP 500
``Input should be 'text' or 'json_object'``; an assistant message that only calls tools with
``"content": null`` gets HTTP 500 ``Input should be a valid string`` (only ``""`` passes), while
other servers reject ``""`` there (AWS Bedrock: "text content blocks must be non-empty") and
OpenAI's reference gives ``null``. Both errors are FastAPI/pydantic request validation, which
that server wraps as a 500, so a status code alone cannot tell them from an outage.

:func:`request_problem` recognises a request-validation error in an error body (4xx or 5xx):
pydantic messages (``Input should be ...``, ``Field required``, ``Extra inputs are not
permitted``, ``N validation error(s)``), FastAPI's 422 ``{"detail": [{"loc", "msg"}, ...]}``,
and OpenAI-style ``invalid_request_error`` bodies. Such an error is never retried as an outage:
:class:`Capabilities` takes one step down the dimension the error names and the request is sent
again at once, or, when nothing is left to try, the request fails with the server's own words.

Dimensions, each remembered per client (so the first rejection costs one request, once):

- structured output: ``json_schema`` (strict where the schema allows) -> ``json_object`` with the
  schema in the prompt (and as ``response_format.schema`` on servers other than OpenAI's, which
  llama-cpp-python turns into a grammar) -> ``prompt``: no ``response_format``, the schema in the
  prompt only. Every reply is validated against the schema in every mode (``output.py``).
- content of an assistant message that only calls tools: ``null`` (the reference) -> ``""``.

The setting ``structured_output`` fixes the first dimension (``json_schema``, ``json_object`` or
``prompt``: no negotiation); ``auto`` (the default) negotiates from ``json_schema``.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from typing import Any, Literal

from pydantic import BaseModel

StructuredMode = Literal["json_schema", "json_object", "prompt"]
STRUCTURED_MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "prompt")
ContentForm = Literal["null", "empty"]

_PYDANTIC = re.compile(
    r"Input should be|Field required|Extra inputs are not permitted|\d+ validation errors?\b|"
    r"'type': '(?:literal_error|string_type|missing|extra_forbidden|union_tag_invalid)'"
)
_LOC_MSG = re.compile(r"'loc': (\([^)]*\)), 'msg': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
_SHOWN = 400


class RequestProblem(BaseModel):
    """A request-validation error: the server's status, its messages (``loc: msg`` lines when the
    body gives them, else the error text) and the request fields they name."""

    status: int
    messages: list[str]
    text: str

    def mentions(self, *words: str) -> bool:
        low = self.text.lower()
        return any(w.lower() in low for w in words)

    def summary(self) -> str:
        more = len(self.messages) - 4
        shown = "; ".join(self.messages[:4]) + (f" (+{more} more)" if more > 0 else "")
        return shown[:_SHOWN]


def _error_message(data: Any) -> tuple[str, str]:
    """(message, type) of an OpenAI-style error body ``{"error": {"message", "type"}}``."""
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]
        return str(err.get("message") or ""), str(err.get("type") or "")
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return data["message"], str(data.get("type") or "")
    return "", ""


def _loc_messages(text: str) -> list[str]:
    out = []
    for loc_src, msg_src in _LOC_MSG.findall(text):
        try:
            loc = ast.literal_eval(loc_src)
            msg = ast.literal_eval(msg_src)
        except (ValueError, SyntaxError):
            continue
        where = ".".join(str(p) for p in loc if p != "body")
        out.append(f"{where}: {msg}")
    return out


def request_problem(status: int, body: str) -> RequestProblem | None:
    """The request-validation error in an HTTP error response (``status`` >= 400, ``body`` its
    text), or None when the body does not say the request was invalid (an outage, a rate limit,
    an authentication failure: handled by ``retry.py``)."""
    if status < 400 or status in (401, 403, 404, 408, 409, 429):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("detail"), list):  # FastAPI's own 422
        items = [d for d in data["detail"] if isinstance(d, dict)]
        messages = [".".join(str(p) for p in d.get("loc", []) if p != "body") + f": {d.get('msg', '')}"
                    for d in items]
        if messages:
            return RequestProblem(status=status, messages=messages, text=body)
    message, kind = _error_message(data)
    text = message or body
    if _PYDANTIC.search(text):
        messages = _loc_messages(text) or [text.strip()[:_SHOWN]]
        return RequestProblem(status=status, messages=messages, text=text)
    if status in (400, 422) or kind == "invalid_request_error":
        return RequestProblem(status=status, messages=[text.strip()[:_SHOWN] or f"HTTP {status}"], text=text)
    return None


class Capabilities:
    """What one client has learnt about its server (thread- and task-safe; see the module
    docstring). ``structured`` and ``content`` are the current choices; ``learnt`` one line per
    step taken, for messages and logs."""

    def __init__(self, structured_output: str = "auto") -> None:
        self.fixed = structured_output != "auto"
        self.structured: StructuredMode = (
            "json_schema" if structured_output == "auto" else structured_output)  # type: ignore[assignment]
        self.content: ContentForm = "null"
        self.learnt: list[str] = []
        self._lock = threading.Lock()

    def step_down(self, problem: RequestProblem, *, sent_structured: StructuredMode | None,
                  sent_content: ContentForm | None) -> bool:
        """Take the step ``problem`` calls for, given what the rejected request used
        (``sent_structured``: its structured-output mode, None without a schema; ``sent_content``:
        the form of its tool-call-only assistant messages, None without any). True when the
        request is worth sending again: a step was taken now, or by a concurrent request since."""
        with self._lock:
            stepped = False
            structured = problem.mentions("response_format", "json_schema", "json_object")
            if sent_structured is not None and structured:
                if self.structured != sent_structured:
                    return True  # a concurrent request learnt it already
                if not self.fixed and sent_structured != STRUCTURED_MODES[-1]:
                    nxt = STRUCTURED_MODES[STRUCTURED_MODES.index(sent_structured) + 1]
                    self.learnt.append(f"structured output {sent_structured} rejected ({problem.summary()}); "
                                       f"using {nxt}")
                    self.structured = nxt
                    stepped = True
            if sent_content is not None and problem.mentions("content"):
                if self.content != sent_content:
                    return True
                if sent_content == "null":
                    self.learnt.append(f"null content of tool-call messages rejected ({problem.summary()}); "
                                       'sending ""')
                    self.content = "empty"
                    stepped = True
            return stepped


def schema_instruction(schema: dict[str, Any]) -> str:
    """The text that asks for JSON in the prompt (``json_object`` and ``prompt`` modes)."""
    return ("Reply with exactly one JSON object and nothing else (no code fence, no other text). "
            "It must be valid against this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False))


_FENCED = re.compile(r"^\s*```(?:json|JSON)?\s*(.*?)\s*```\s*$", re.DOTALL)


def unfenced(text: str | None) -> str | None:
    """``text`` without a surrounding Markdown code fence (models asked for JSON in the prompt
    often add one); anything else unchanged."""
    if text is None:
        return None
    m = _FENCED.match(text)
    return m.group(1) if m else text
