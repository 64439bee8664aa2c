"""What an OpenAI-compatible server accepts, learnt from its request-validation errors.

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

- structured output: ``json_schema`` (strict where the schema allows) -> ``json_schema`` with the
  portable schema (``schemas.portable_schema``: Gemini's subset, no ``additionalProperties``,
  ``$ref``/``$defs`` or null type) -> ``json_object`` with the schema in the prompt (and as
  ``response_format.schema`` on servers other than OpenAI's, which llama-cpp-python turns into a
  grammar) -> ``prompt``: no ``response_format``, the schema in the prompt only. Every reply is
  validated against the original schema in every mode (``output.py``). A structured-output
  request steps down on its behaviour, not its wording: any 400/422 to it (or
  a 5xx whose text is a validation error naming ``response_format``) takes one step, unless the
  error names only the content of tool-call messages (the other dimension); an error that names
  ``json_object`` (the server's own alternative) skips the portable schema. Gemini words its
  schema errors without naming ``response_format`` ("Invalid JSON payload received. Unknown name
  \"additionalProperties\" ...").
- tool schemas: full -> portable, once a request with tools gets an error that names a keyword
  the portable form leaves out (``additionalProperties``, ``$ref``, ``$defs``, ``null``); from
  then on tool parameters are sent portable too. Not taken on other wording: a candidate's tools
  must not change in the middle of a run for an unrelated error.
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
PORTABLE_NAMES = ("additionalProperties", "$ref", "$defs", "null")
"""Words in an error about a tool schema that make the tools go portable (``schemas.portable_schema``)."""


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


StreamMode = Literal["usage", "plain", "off"]


class Capabilities:
    """What one client has learnt about its server (thread- and task-safe; see the module
    docstring). ``structured`` and ``content`` are the current choices; ``learnt`` one line per
    step taken, for messages and logs."""

    def __init__(self, structured_output: str = "auto") -> None:
        self.fixed = structured_output != "auto"
        self.structured: StructuredMode = (
            "json_schema" if structured_output == "auto" else structured_output)  # type: ignore[assignment]
        self.portable = False
        """Response schemas (in ``json_schema`` mode) sent in the portable subset."""
        self.portable_tools = False
        """Tool parameters sent in the portable subset."""
        self.content: ContentForm = "null"
        self.stream: StreamMode = "usage"
        """How streamed requests are asked for: ``usage`` (``stream`` with
        ``stream_options.include_usage``), ``plain`` (``stream`` alone) or ``off`` (not streamed:
        the server rejected or ignored ``stream``)."""
        self.learnt: list[str] = []
        self._lock = threading.Lock()

    def step_stream(self, problem: RequestProblem | None, sent: StreamMode, why: str = "") -> bool:
        """The server rejected a streamed request (``problem`` naming ``stream`` or
        ``stream_options``) or answered it without streaming (``problem`` None, ``why`` says how):
        ask for less streaming from now on (``usage`` -> ``plain`` when only the options were
        named, else ``off``). True when the request is worth sending again (stepped now, or a
        concurrent request stepped since ``sent``); False when the problem is not about
        streaming."""
        with self._lock:
            if self.stream != sent:
                return True
            if problem is not None and not problem.mentions("stream"):
                return False
            named_options = problem is not None and problem.mentions("stream_options", "include_usage")
            if problem is not None and sent == "usage" and named_options:
                self.stream = "plain"
                self.learnt.append(f"stream_options rejected ({problem.summary()}); streaming without usage")
                return True
            if sent == "off":
                return False
            self.stream = "off"
            self.learnt.append(f"streaming {'rejected (' + problem.summary() + ')' if problem else why}; "
                               "answers are not streamed (time to first token = completion time)")
            return True

    def _step_structured(self, problem: RequestProblem, sent: StructuredMode, sent_portable: bool) -> bool:
        if (self.structured, self.portable) != (sent, sent_portable):
            return True  # a concurrent request learnt it already
        # the portable schema is worth a try unless the server named json_object (the form it
        # takes instead: json_schema itself is unknown to it, as llama-cpp-python's 500 says)
        if sent == "json_schema" and not sent_portable and not problem.mentions("json_object"):
            self.portable = True
            self.learnt.append(f"structured output json_schema rejected ({problem.summary()}); "
                               "sending the portable schema (no additionalProperties, $ref/$defs, null type)")
            return True
        if self.fixed or sent == STRUCTURED_MODES[-1]:
            return False  # a fixed structured_output mode only tries its portable schema
        nxt = STRUCTURED_MODES[STRUCTURED_MODES.index(sent) + 1]
        what = f"{sent} (portable schema)" if sent_portable and sent == "json_schema" else sent
        self.portable = self.portable or sent_portable
        self.learnt.append(f"structured output {what} rejected ({problem.summary()}); using {nxt}")
        self.structured = nxt
        return True

    def step_down(self, problem: RequestProblem, *, sent_structured: StructuredMode | None,
                  sent_content: ContentForm | None, sent_portable: bool = False,
                  sent_tools: bool = False, sent_portable_tools: bool = False) -> bool:
        """Take the step ``problem`` calls for, given what the rejected request used
        (``sent_structured``: its structured-output mode, None without a schema; ``sent_portable``:
        whether its schema was portable; ``sent_tools``/``sent_portable_tools``: whether it offered
        tools, in the portable form; ``sent_content``: the form of its tool-call-only assistant
        messages, None without any). True when the request is worth sending again: a step was
        taken now, or by a concurrent request since. See the module docstring for which error
        takes which step."""
        with self._lock:
            stepped = False
            named_structured = problem.mentions("response_format", "json_schema", "json_object",
                                                "response_schema")
            named_content = sent_content is not None and problem.mentions("content")
            by_behaviour = problem.status in (400, 422) and not named_content
            if sent_structured is not None and (named_structured or by_behaviour):
                stepped = self._step_structured(problem, sent_structured, sent_portable)
            if sent_tools and not named_content and problem.mentions(*PORTABLE_NAMES):
                if self.portable_tools != sent_portable_tools:
                    return True
                if not sent_portable_tools:
                    self.portable_tools = True
                    self.learnt.append(f"tool schemas rejected ({problem.summary()}); sending them portable")
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
