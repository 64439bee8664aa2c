"""``anthropic:<model>``: the Anthropic Messages API with native tool use and prompt caching.

The key is ``ANTHROPIC_API_KEY`` from the environment only; ``settings.base_url`` (or the SDK's
``ANTHROPIC_BASE_URL``) selects another endpoint.

Message translation (Messages API reference, "messages", "tool use"):

- every system text goes into ``system`` text blocks marked ``cache_control: ephemeral``: one, or
  two when the request says how much of it is the same for every call of the agent
  (:func:`system_blocks`); the last tool and the last message block are marked too, so tools,
  system prompt and the conversation so far form cached prefixes (prompt caching guide: the cache
  prefix is tools, then system, then messages; at most four breakpoints). The API also accepts
  ``system`` as a plain string (Messages API reference, ``system``: "string or array of text
  blocks"), which is all some gateways pass on: a LiteLLM ``/v1/messages`` proxy forwarded the
  list to an OpenAI-style backend, which answered HTTP 500 to every request. The form is
  negotiated per client (:class:`AnthropicClient`): blocks first, then the plain string (without
  the system cache breakpoints) after a 400 that names ``system``/``cache_control`` or
  :data:`SHAPE_5XX_LIMIT` server errors in a row to requests of the same shape;
- an assistant message that only calls tools has only ``tool_use`` blocks (no empty text block:
  the API rejects empty text); tool inputs are the parsed argument objects (a string that is not a
  JSON object, which only another model could have produced, is sent as ``{"_raw_arguments": s}``);
- consecutive tool results become ``tool_result`` blocks of one user message, right after the
  calls, in call order; caller text that follows them joins that user message after the results
  (the API requires results first);
- consecutive messages of one role are merged (the API expects alternation); the first message
  must be a user message, so a conversation that starts with the agent (the candidate greets
  first) gets a user turn: the role's ``first_user_message`` when the conversation carries one
  (recorded in the trace), else ``[call connected]``; empty texts become ``[silence]``; a
  conversation that ends with an assistant message gets a ``[silence]`` user turn (a trailing
  assistant message would be read as a prefill);
- ``response_schema`` becomes a forced tool (``tool_choice: {"type": "tool"}``) whose input is the
  answer; a non-object schema is wrapped as ``{"value": ...}`` and unwrapped.

Settings: max_tokens (required by the API; default 4096), temperature/top_p/top_k sent in the body,
reasoning_effort as ``output_config.effort``, extra_headers as headers. The API has no seed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from typing import Any, Literal

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolSchema,
    Usage,
    wants_stream,
)
from callbench.models.conversation import normalize_messages
from callbench.models.faults import note_fault, note_request
from callbench.models.remote.anomalies import anthropic_content, checked_body
from callbench.models.remote.client import RemoteClient
from callbench.models.remote.negotiation import request_problem
from callbench.models.remote.prepared import (
    JsonView,
    cleaned_schema,
    shared_list,
    tool_parameters,
    within_deadline,
)
from callbench.models.remote.secrets import resolve_base_url, resolve_headers
from callbench.models.remote.streaming import anthropic_stream_body, post_streamed
from callbench.models.remote.transport import bound_responses, sdk_http_client
from callbench.models.specs import parse_spec

DEFAULT_MAX_TOKENS = 4096
CONNECTED = "[call connected]"
SILENCE = "[silence]"
EPHEMERAL = {"type": "ephemeral"}
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
WRAP_KEY = "value"
LOG = logging.getLogger(__name__)
SystemForm = Literal["blocks", "string"]
SHAPE_5XX_LIMIT = 2
"""Server errors in a row, with no success in between, to requests of one shape (system form,
tools or not, response schema or not) after which the shape is taken to be what the server
cannot take: the system form steps down, or (nothing left to change, while other shapes succeed)
the request fails at once as ``rejected_shape`` instead of being retried as an outage. Only on an
endpoint other than Anthropic's own (a gateway), and only for :data:`SHAPE_STATUSES`: 503 and 529
("overloaded") say the server is busy, and Anthropic's API documents both system forms."""
SHAPE_STATUSES = frozenset({500, 502})
ANTHROPIC_HOST = "api.anthropic.com"


def _tool_input(arguments: str) -> dict[str, Any]:
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_raw_arguments": arguments}


def _blocks(msg: ChatMessage) -> list[dict[str, Any]]:
    if msg.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.tool_call_id}
        if msg.content:
            block["content"] = msg.content
        return [block]
    blocks: list[dict[str, Any]] = []
    if msg.content and msg.content.strip():
        blocks.append({"type": "text", "text": msg.content})
    for call in msg.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": _tool_input(call.arguments)})
    if not blocks:
        blocks.append({"type": "text", "text": SILENCE})
    return blocks


def anthropic_messages(request: ModelRequest) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system text, messages)`` for ``request`` (see the module docstring)."""
    conv = normalize_messages(request.messages)
    out: list[dict[str, Any]] = []
    for msg in conv.messages:
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = _blocks(msg)
        if out and out[-1]["role"] == role:
            merged = out[-1]["content"] + blocks
            # tool results first in a user message (Messages API, "tool use": tool_result blocks
            # must precede any text)
            merged.sort(key=lambda b: 0 if b["type"] == "tool_result" else 1)
            out[-1]["content"] = merged
        else:
            out.append({"role": role, "content": blocks})
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": CONNECTED}]})
    if out[-1]["role"] == "assistant":
        out.append({"role": "user", "content": [{"type": "text", "text": SILENCE}]})
    return conv.system, out


def _output_tool_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    cleaned = cleaned_schema(schema, "anthropic")
    if cleaned.get("type") == "object" or ("type" not in cleaned and "properties" in cleaned):
        return {"type": "object", **cleaned}, False
    return {"type": "object", "properties": {WRAP_KEY: cleaned}, "required": [WRAP_KEY]}, True


def output_tool_name(request: ModelRequest) -> str:
    """The forced tool's name for a ``response_schema`` request."""
    return _NAME_BAD.sub("_", request.response_schema_name)[:64] or "output"


def system_blocks(system: str, static_chars: int) -> list[dict[str, Any]]:
    """The ``system`` text blocks, each a cache breakpoint. When the operating document's first
    ``static_chars`` characters are the same for every call of the agent
    (``ModelRequest.static_system_chars``), the text is split at the last line break before that
    point, so tools and that part form a prefix cached across all the agent's scenarios and the
    call-specific rest is cached within the call. With the tools and the last message that makes
    at most four breakpoints, the API's limit."""
    cut = system.rfind("\n", 0, static_chars) + 1 if 0 < static_chars < len(system) else 0
    parts = [system[:cut], system[cut:]] if cut > 0 and system[cut:].strip() else [system]
    return [{"type": "text", "text": part, "cache_control": EPHEMERAL} for part in parts]


def anthropic_request_body(request: ModelRequest, model: str, settings: ModelSettings, *,
                           system_form: SystemForm = "blocks") -> dict[str, Any]:
    """Keyword arguments for ``messages.create`` (without headers and timeout); ``system`` as
    cached text blocks (:func:`system_blocks`) or, with ``system_form="string"``, a plain string."""
    system, messages = anthropic_messages(request)
    body: dict[str, Any] = {"model": model, "max_tokens": settings.max_tokens or request.max_output_tokens
                            or DEFAULT_MAX_TOKENS,
                            "messages": messages}
    if system is not None:
        body["system"] = (system_blocks(system, request.static_system_chars) if system_form == "blocks"
                          else system)
    # the conversation so far is the next request's prefix (prompt caching guide: a breakpoint on
    # the last block caches the conversation incrementally); a "[silence]" turn added after a
    # trailing assistant message will not be in the next request, so the mark goes before it
    silence_only = messages[-1]["content"] == [{"type": "text", "text": SILENCE}]
    target = messages[-2] if silence_only and len(messages) > 1 else messages[-1]
    target["content"][-1]["cache_control"] = EPHEMERAL
    if request.response_schema is not None:
        tools = _tool_entries(request.tools)
        schema, _ = _output_tool_schema(request.response_schema)
        name = output_tool_name(request)
        tools.append({"name": name, "description": "Give your answer by calling this tool.",
                      "input_schema": schema, "cache_control": EPHEMERAL})
        body["tool_choice"] = {"type": "tool", "name": name}
        body["tools"] = tools
    elif request.tools:  # the same list object for every request with these tools: encoded once
        body["tools"] = shared_list("anthropic", tuple(request.tools), lambda: _tool_entries(
            request.tools, cache_last=True))
    extra: dict[str, Any] = {}
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(settings, name)
        if value is not None:
            extra[name] = value
    if extra:
        body["extra_body"] = extra
    if settings.reasoning_effort is not None:
        body["output_config"] = {"effort": settings.reasoning_effort}
    return body


def _tool_entries(tools: list[ToolSchema], *, cache_last: bool = False) -> list[dict[str, Any]]:
    """The Messages API ``tools`` entries of ``tools`` (``cache_last``: a cache breakpoint on the
    last one, which caches the tool list with the system prompt before it)."""
    entries = [{"name": t.name, "description": t.description, "input_schema": tool_parameters(t, "anthropic")}
               for t in tools]
    if cache_last and entries:
        entries[-1]["cache_control"] = EPHEMERAL
    return entries


def _plain(value: Any) -> Any:
    """The JSON value under a ``JsonView`` (a streamed body is read through one), else ``value``."""
    return value._value if isinstance(value, JsonView) else value


def parse_anthropic_message(message: Any, request: ModelRequest) -> ModelResponse:
    """A ModelResponse (usage without cost) from a ``Message``. For a ``response_schema``
    request the forced tool's input becomes the JSON ``content``."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    answer: str | None = None
    wanted = output_tool_name(request) if request.response_schema is not None else None
    wrapped = request.response_schema is not None and _output_tool_schema(request.response_schema)[1]
    for block in message.content:
        if block.type == "text":
            texts.append(block.text or "")
        elif block.type == "tool_use":
            if wanted is not None and block.name == wanted and answer is None:
                value = block.input
                value = _plain(value)
                if wrapped and isinstance(value, dict):
                    value = value.get(WRAP_KEY)
                answer = json.dumps(value, ensure_ascii=False)
            else:
                calls.append(ToolCall(id=block.id, name=block.name,
                                      arguments=json.dumps(_plain(block.input), ensure_ascii=False)))
    content = answer if wanted is not None else ("".join(texts) or None)
    u = message.usage  # None when a server leaves usage out (its tokens are then unknown: 0)
    read = getattr(u, "cache_read_input_tokens", None) or 0
    written = getattr(u, "cache_creation_input_tokens", None) or 0
    usage = Usage(input_tokens=(getattr(u, "input_tokens", None) or 0) + read + written,
                  output_tokens=getattr(u, "output_tokens", None) or 0,
                  cached_input_tokens=read, cache_write_input_tokens=written)
    return ModelResponse(content=content, tool_calls=calls, usage=usage, finish_reason=message.stop_reason,
                         model=message.model or "")


def _shape(request: ModelRequest, system_form: SystemForm) -> tuple[str, bool, bool]:
    return (system_form, bool(request.tools), request.response_schema is not None)


class AnthropicClient(RemoteClient):
    """The ``anthropic:`` provider. ``http_client`` (an ``httpx2.AsyncClient``) may be injected.

    ``system_form`` is the form of ``system`` this client's server takes, learnt per client (see the
    module docstring); ``learnt`` one line per step taken. Thread- and task-safe."""

    provider = "anthropic"
    default_first_user_message = CONNECTED
    """``first_user_message: auto`` sends this recorded user turn before the greeting."""

    def __init__(self, spec: str, settings: ModelSettings, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(spec, settings, **kwargs)
        _, self.model = parse_spec(spec)
        key = os.environ.get("ANTHROPIC_API_KEY") or None
        if key is None:
            raise ValueError(f"{spec}: set ANTHROPIC_API_KEY in the environment")
        if settings.first_user_message == "none":
            raise ValueError(f"{spec}: first_user_message: none is not possible here: the Messages API "
                             "needs a user message before the first assistant turn; use auto ([call "
                             "connected]), empty or text")
        self.redactor.add(key)
        self._headers = resolve_headers(settings.extra_headers, self.redactor)
        base_url, query = resolve_base_url(
            settings.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None, self.redactor)
        self.custom_endpoint = False
        self.gateway = base_url is not None and ANTHROPIC_HOST not in base_url
        import anthropic  # here, not at module level: the request-body builders serve validate without it

        if http_client is None:  # the SDK's aiohttp transport where it can be used (transport.py)
            http_client = sdk_http_client(anthropic, base_url, settings.timeout_s)
        self._client = anthropic.AsyncAnthropic(api_key=key, base_url=base_url, max_retries=0,
                                                timeout=settings.timeout_s, http_client=http_client,
                                                default_query=query)
        bound_responses(self._client._client)  # a huge body or a gzip bomb: a fault, not the memory
        self.system_form: SystemForm = "blocks"
        self.learnt: list[str] = []
        self._lock = threading.Lock()
        self._failures: dict[tuple[str, bool, bool], int] = {}
        self._succeeded: set[tuple[str, bool, bool]] = set()
        self._streams = True  # False once the server rejected or ignored a streamed request

    def _step_down(self, sent: SystemForm, why: str) -> bool:
        """Use the plain-string ``system`` from now on; True when the request is worth resending
        (stepped now, or a concurrent request stepped since ``sent``)."""
        with self._lock:
            if self.system_form != sent:
                return True
            if sent == "string":
                return False
            self.system_form = "string"
            self.learnt.append(f"system as text blocks rejected ({why}); sending system as a plain string")
            return True

    def _server_error(self, request: ModelRequest, form: SystemForm, status: int) -> str:
        """What a 5xx to a request of this shape means: ``step`` (resend with a plain-string
        system), ``rejected`` (the server answers every request of this shape with an error while
        others succeed) or ``retry`` (possibly an outage: retried by ``retry.py``)."""
        if not self.gateway or status not in SHAPE_STATUSES:
            return "retry"
        shape = _shape(request, form)
        with self._lock:
            count = self._failures[shape] = self._failures.get(shape, 0) + 1
            others_ok = bool(self._succeeded - {shape})
        if count < SHAPE_5XX_LIMIT:
            return "retry"
        has_system = any(m.role == "system" and m.content for m in request.messages)
        if has_system and self._step_down(form, f"HTTP {status} {count} times in a row"):
            return "step"
        return "rejected" if others_ok else "retry"

    async def _send(self, request: ModelRequest) -> ModelResponse:
        """One request, with the ``system`` form negotiated (see the class docstring); the raw
        body is checked first (``anomalies.py``), as for OpenAI."""
        import anthropic

        role = request.context.role
        who = f"{self.provider} {role}"
        for _ in range(2):
            form = self.system_form
            body = anthropic_request_body(request, self.model, self.settings, system_form=form)

            stream = self._streams and wants_stream(self.settings, role)

            async def exchange(body: dict[str, Any] = body) -> tuple[Any, bytes]:
                raw = await self._client.messages.with_raw_response.create(
                    **body, extra_headers=self._headers or None, timeout=self.settings.timeout_s)
                return raw, await raw.read()

            streamed: dict[str, Any] | None = None
            try:
                if stream:  # streaming.py: the events assembled into the plain body
                    streamed, raw, content = await post_streamed(
                        self._client, "/v1/messages", {**body, "stream": True}, headers=self._headers or None,
                        timeout=self.settings.timeout_s, who=who, read=anthropic_stream_body)
                else:
                    # timeout_s bounds the whole exchange, body included (a slow drip is a timeout fault)
                    raw, content = await within_deadline(self.settings.timeout_s, exchange())
            except anthropic.APIStatusError as exc:
                status = exc.status_code
                if status >= 500:
                    verdict = self._server_error(request, form, status)
                    if verdict == "rejected":
                        raise InfrastructureError(
                            self.redactor.clean(
                                f"{who}: rejected_shape: HTTP {status} {SHAPE_5XX_LIMIT} times in a row to "
                                "this request while other requests succeed: the server cannot take its "
                                f"shape (system {form}, tools {bool(request.tools)}, response schema "
                                f"{request.response_schema is not None}), so it is not retried as an outage"
                                + (f"; learnt so far: {' | '.join(self.learnt)}" if self.learnt else "")),
                            retryable=False, status=status, kind="rejected_shape") from None
                else:
                    problem = request_problem(status, exc.response.text)
                    verdict = ("step" if problem is not None and problem.mentions("system", "cache_control")
                               and self._step_down(form, problem.summary()) else "raise")
                    if verdict == "raise" and stream and problem is not None and problem.mentions("stream"):
                        verdict = "step"
                        self._no_stream(f"streaming rejected ({problem.summary()})")
                if verdict != "step":
                    raise
                note_fault(role, "invalid_request")
                note_request(role)
                LOG.info("%s (%s): %s", self.spec, role, self.learnt[-1] if self.learnt else "resent")
                continue
            with self._lock:
                shape = _shape(request, form)
                self._failures.pop(shape, None)
                self._succeeded.add(shape)
            break
        else:  # pragma: no cover - the form steps down at most once
            raise AssertionError("unreachable")
        if streamed is not None:
            anthropic_content(streamed, who)
            return parse_anthropic_message(JsonView(streamed), request)
        data = checked_body(content, raw.headers.get("content-type", ""), who)
        anthropic_content(data, who)
        if stream:  # a usable plain answer to a streamed request: the server does not stream
            self._no_stream("streaming ignored (the server answered with a plain body)")
            return parse_anthropic_message(JsonView(data), request)
        return parse_anthropic_message(await raw.parse(), request)

    def _no_stream(self, why: str) -> None:
        """Ask for plain answers from now on (``why`` is logged and kept in ``learnt``)."""
        with self._lock:
            if self._streams:
                self._streams = False
                self.learnt.append(f"{why}; answers are not streamed (time to first token = completion time)")
