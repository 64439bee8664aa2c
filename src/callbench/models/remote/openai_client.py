"""``openai:<model>``: OpenAI Chat Completions, or any OpenAI-compatible server.

The endpoint is ``settings.base_url``, else the SDK's own ``OPENAI_BASE_URL``, else OpenAI. The key
is ``OPENAI_API_KEY`` from the environment only; a server that needs no key (vLLM, Ollama, a
llama.cpp server) gets a placeholder key, but only when a base URL is set.

Message translation (Chat Completions API reference, "messages"):

- one leading ``system`` message holding every system text (``conversation.normalize_messages``);
- an assistant message that only calls tools has ``content: null`` (the reference's form), or
  ``""`` once the server has rejected ``null`` (``negotiation.py``: llama-cpp-python accepts only
  ``""``, AWS Bedrock only ``null``; OpenAI accepts both);
- each call is ``{"id", "type": "function", "function": {"name", "arguments"}}`` with the raw
  argument string the model produced; each result is a ``tool`` message right after its call,
  in call order, with unique ids;
- tools are ``{"type": "function", "function": {name, description, parameters}}`` with
  parameters cleaned by ``schemas.clean_tool_parameters``, and ``tool_choice`` (setting, default
  ``auto``) is sent explicitly with them;
- ``response_schema`` becomes ``response_format: {"type": "json_schema", ...}``, ``strict`` only
  when the schema meets strict mode's rules (otherwise the server would reject it); a server that
  rejects it (any 400, whatever its wording) gets the portable schema (Gemini's subset), then
  ``json_object`` with the schema in the prompt, then the schema in the prompt only
  (``negotiation.py``; every reply is validated against the original schema).

Errors: a 4xx/5xx whose body is a request-validation error (``negotiation.request_problem``) is
never retried as an outage: it takes the next negotiation step, or fails at once (fault kind
``invalid_request``) quoting the server. A reply with no ``tool_calls`` whose ``content`` holds tool
calls as JSON text (``content_calls.py``) is executed when ``parse_content_tool_calls`` is set, else a
ModelOutputError of kind ``tool_call_in_content`` (recorded and graded for a candidate).

Timing: ``usage.tokens_per_second`` is the generation speed the server reports (llama.cpp
server's ``timings.predicted_per_second`` / ``predicted_ms``, Groq's ``usage.completion_time``),
else output tokens over the wall time without the prompt read when the server reports that
(``timings.prompt_ms``, ``usage.prompt_time``), else output tokens over the request's wall time
(``remote.py``). The request timeout is ``timeout_s`` (default 120 s); a CPU server reading a long
prompt needs much longer (``callbench serve-local`` prints 1800 s).

Settings: temperature, top_p, reasoning_effort as named; seed mixed with where the request comes
from (``base.request_seed``, so repeats differ); max_tokens as
``max_completion_tokens`` on OpenAI (reasoning models reject ``max_tokens``) and ``max_tokens`` on
other servers (which do not all know the newer name); top_k, which OpenAI lacks, through
``extra_body`` (vLLM, llama.cpp server, OpenRouter read it); extra_headers as request headers.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

from callbench.models.base import (
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolCall,
    Usage,
    request_seed,
    wants_stream,
)
from callbench.models.conversation import normalize_messages
from callbench.models.faults import note_fault, note_request
from callbench.models.remote.anomalies import checked_body, openai_choices
from callbench.models.remote.client import RemoteClient
from callbench.models.remote.content_calls import content_tool_calls, truncated_call
from callbench.models.remote.negotiation import (
    Capabilities,
    ContentForm,
    StructuredMode,
    request_problem,
    schema_instruction,
    unfenced,
)
from callbench.models.remote.prepared import JsonView, cleaned_schema, post_json, shared_list, tool_parameters
from callbench.models.remote.schemas import (
    bounded_integers_as_enums,
    is_openai_strict_compatible,
    portable_schema,
)
from callbench.models.remote.secrets import resolve_base_url, resolve_headers
from callbench.models.remote.streaming import openai_stream_body, post_streamed
from callbench.models.remote.transport import bound_responses, sdk_http_client
from callbench.models.specs import parse_spec

PLACEHOLDER_KEY = "not-needed"
OPENAI_HOST = "api.openai.com"
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
LOG = logging.getLogger(__name__)
MAX_NEGOTIATION_STEPS = 6
"""Rejections one request may meet while negotiating (structured output has three steps, tool
schemas and tool-call content one each)."""


def _tool_call_only(request: ModelRequest) -> bool:
    return any(m.role == "assistant" and m.tool_calls and not m.content for m in request.messages)


def openai_messages(request: ModelRequest, *, tool_call_content: ContentForm = "null",
                    schema_text: str | None = None) -> list[dict[str, Any]]:
    """The ``messages`` array for ``request`` (see the module docstring). ``tool_call_content`` is
    the form of a tool-call-only assistant message's content (``null`` or ``""``); ``schema_text``
    is appended to the system message (the schema asked for in the prompt)."""
    conv = normalize_messages(request.messages)
    out: list[dict[str, Any]] = []
    system = conv.system
    if schema_text is not None:
        system = f"{system}\n\n{schema_text}" if system else schema_text
    if system is not None:
        out.append({"role": "system", "content": system})
    for msg in conv.messages:
        if msg.role == "assistant":
            item: dict[str, Any] = {"role": "assistant"}
            if msg.tool_calls:
                empty = None if tool_call_content == "null" else ""
                item["content"] = msg.content if msg.content else empty
                item["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in msg.tool_calls
                ]
            else:
                item["content"] = msg.content or ""
            out.append(item)
        elif msg.role == "tool":
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.content or ""})
        else:
            out.append({"role": "user", "content": msg.content or ""})
    return out


def openai_request_body(request: ModelRequest, model: str, settings: ModelSettings, *,
                        official_endpoint: bool, structured: StructuredMode = "json_schema",
                        tool_call_content: ContentForm = "null", portable: bool = False,
                        portable_tools: bool = False) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` (without headers and timeout), with
    structured output asked for in mode ``structured`` and tool-call-only assistant messages in
    form ``tool_call_content`` (``negotiation.py``); ``portable``/``portable_tools``: the response
    schema / tool parameters in the portable subset (``schemas.portable_schema``)."""
    schema = (cleaned_schema(request.response_schema, "openai")
              if request.response_schema is not None else None)
    if schema is not None and portable:
        schema = portable_schema(schema)
    in_prompt = schema is not None and structured != "json_schema"
    body: dict[str, Any] = {"model": model, "messages": openai_messages(
        request, tool_call_content=tool_call_content,
        schema_text=schema_instruction(schema) if in_prompt and schema is not None else None)}
    if request.tools:
        tools = request.tools
        body["tools"] = shared_list("openai-portable" if portable_tools else "openai", tuple(tools), lambda: [
            {"type": "function", "function": {
                "name": t.name, "description": t.description,
                "parameters": (portable_schema(tool_parameters(t, "openai")) if portable_tools
                               else tool_parameters(t, "openai"))}}
            for t in tools
        ])
        if settings.tool_choice != "omit":
            body["tool_choice"] = settings.tool_choice
    if schema is not None and structured == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": _NAME_BAD.sub("_", request.response_schema_name)[:64] or "output",
            "schema": schema,
            "strict": is_openai_strict_compatible(schema),
        }}
    elif schema is not None and structured == "json_object":
        # llama-cpp-python turns the schema into a grammar that ignores integer bounds: as enums
        body["response_format"] = {"type": "json_object"} if official_endpoint else {
            "type": "json_object", "schema": bounded_integers_as_enums(schema)}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.seed is not None:
        body["seed"] = request_seed(settings, request)
    if (settings.max_tokens or request.max_output_tokens) is not None:
        body["max_completion_tokens" if official_endpoint else "max_tokens"] = (
            settings.max_tokens or request.max_output_tokens)
    if settings.reasoning_effort is not None:
        body["reasoning_effort"] = settings.reasoning_effort
    if settings.top_k is not None:
        body["extra_body"] = {"top_k": settings.top_k}
    return body


def _seconds(value: Any, scale: float = 1.0) -> float | None:
    return float(value) / scale if isinstance(value, int | float) and value > 0 else None


def generation_speed(data: dict[str, Any], output_tokens: int, wall_s: float) -> float | None:
    """Tokens per second of generation alone, from the timing a server reports in its body
    (see the module docstring), or None when it reports none."""
    timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    assert isinstance(timings, dict) and isinstance(usage, dict)
    reported = timings.get("predicted_per_second")
    if isinstance(reported, int | float) and reported > 0:
        return float(reported)
    gen_s = _seconds(timings.get("predicted_ms"), 1000.0) or _seconds(usage.get("completion_time"))
    if gen_s:
        return output_tokens / gen_s
    prompt_s = _seconds(timings.get("prompt_ms"), 1000.0) or _seconds(usage.get("prompt_time"))
    if prompt_s is not None and wall_s > prompt_s:
        return output_tokens / (wall_s - prompt_s)
    return None


def parse_openai_completion(completion: Any) -> ModelResponse:
    """A ModelResponse (usage without cost) from a ``ChatCompletion``."""
    if not completion.choices:
        return ModelResponse(content=None, finish_reason="no_choices", model=completion.model or "")
    choice = completion.choices[0]
    message = choice.message
    calls = [
        ToolCall(id=c.id or "", name=c.function.name, arguments=c.function.arguments or "")
        for c in (message.tool_calls or []) if getattr(c, "function", None) is not None
    ]
    content = message.content or getattr(message, "refusal", None) or None
    usage = Usage()
    if completion.usage is not None:
        details = getattr(completion.usage, "prompt_tokens_details", None)
        usage = Usage(
            input_tokens=completion.usage.prompt_tokens or 0,
            output_tokens=completion.usage.completion_tokens or 0,
            cached_input_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
        )
    return ModelResponse(content=content, tool_calls=calls, usage=usage,
                         finish_reason=choice.finish_reason, model=completion.model or "")


class OpenAIClient(RemoteClient):
    """The ``openai:`` provider. ``http_client`` (an ``httpx2.AsyncClient``, the transport the
    SDK uses) may be injected, e.g. with a mock transport in tests. ``capabilities`` is what it has
    learnt about its server (``negotiation.py``)."""

    provider = "openai"

    def __init__(self, spec: str, settings: ModelSettings, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(spec, settings, **kwargs)
        _, self.model = parse_spec(spec)
        base_url, query = resolve_base_url(
            settings.base_url or os.environ.get("OPENAI_BASE_URL") or None, self.redactor)
        key = os.environ.get("OPENAI_API_KEY") or None
        if key is None:
            if base_url is None:
                raise ValueError(f"{spec}: set OPENAI_API_KEY in the environment (or a base_url for a "
                                 "server that needs no key)")
            key = PLACEHOLDER_KEY
        else:
            self.redactor.add(key)
        self.official_endpoint = base_url is None or OPENAI_HOST in base_url
        self.custom_endpoint = not self.official_endpoint
        self.capabilities = Capabilities(settings.structured_output)
        self._headers = resolve_headers(settings.extra_headers, self.redactor)
        import openai  # here, not at module level: the request-body builders serve validate without it

        if http_client is None:  # the SDK's aiohttp transport where it can be used (transport.py)
            http_client = sdk_http_client(openai, base_url, settings.timeout_s)
        self._client = openai.AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0,
                                          timeout=settings.timeout_s, http_client=http_client,
                                          default_query=query)
        bound_responses(self._client._client)  # a huge body or a gzip bomb: a fault, not the memory

    async def _send(self, request: ModelRequest) -> ModelResponse:
        """One request, negotiated: a request-validation error takes a negotiation step and the
        request is sent again (each send is counted), or fails at once as ``invalid_request``.
        The raw body is checked before the SDK reads it (``anomalies.py``): a 200 that is not a
        usable completion is an InfrastructureError of its fault kind."""
        import httpx2
        import openai

        role = request.context.role
        who = f"{self.provider} {role}"
        caps = self.capabilities
        for step in range(MAX_NEGOTIATION_STEPS + 1):
            structured = caps.structured if request.response_schema is not None else None
            portable, portable_tools = caps.portable, caps.portable_tools
            content = caps.content if _tool_call_only(request) else None
            body = openai_request_body(request, self.model, self.settings,
                                       official_endpoint=self.official_endpoint,
                                       structured=structured or "json_schema",
                                       tool_call_content=content or "null", portable=portable,
                                       portable_tools=portable_tools)
            stream = caps.stream if wants_stream(self.settings, role) else "off"
            if stream != "off":
                body["stream"] = True
                if stream == "usage":
                    body["stream_options"] = {"include_usage": True}
            start = time.perf_counter()
            streamed: dict[str, Any] | None = None
            try:
                if stream != "off":  # streaming.py: the chunks assembled into the plain body
                    streamed, http, raw = await post_streamed(
                        self._client, "/chat/completions", body, headers=self._headers or None,
                        timeout=self.settings.timeout_s, who=who, read=openai_stream_body)
                else:
                    # the body is plain JSON already: sent as is, without the SDK's per-request
                    # transform (models/remote/prepared.py); errors are the SDK's own
                    http = await post_json(self._client, "/chat/completions", body,
                                           headers=self._headers or None, timeout=self.settings.timeout_s,
                                           response_type=httpx2.Response)
                    raw = http.content
            except openai.APIStatusError as exc:
                problem = request_problem(exc.status_code, exc.response.text)
                if problem is None:
                    raise
                if stream != "off" and step < MAX_NEGOTIATION_STEPS and caps.step_stream(problem, stream):
                    note_fault(role, "invalid_request")
                    note_request(role)
                    LOG.info("%s (%s): %s", self.spec, role, caps.learnt[-1] if caps.learnt else "resent")
                    continue
                if step < MAX_NEGOTIATION_STEPS and caps.step_down(
                        problem, sent_structured=structured, sent_content=content, sent_portable=portable,
                        sent_tools=bool(request.tools), sent_portable_tools=portable_tools):
                    note_fault(role, "invalid_request")
                    note_request(role)
                    LOG.info("%s (%s): %s", self.spec, role,
                             caps.learnt[-1] if caps.learnt else "resent: a concurrent request learnt")
                    continue
                hint = (" (set tool_choice to another value or omit)" if problem.mentions("tool_choice")
                        else "")
                learnt = f"; learnt so far: {' | '.join(caps.learnt)}" if caps.learnt else ""
                raise InfrastructureError(
                    self.redactor.clean(f"{who}: invalid_request: HTTP {problem.status}: the server rejected "
                                        f"the request as invalid: {problem.summary()}{hint}{learnt}"),
                    retryable=False, status=problem.status, kind="invalid_request") from None
            wall_s = time.perf_counter() - start
            data = streamed if streamed is not None else checked_body(
                raw, http.headers.get("content-type", ""), who)
            openai_choices(data, who)
            if streamed is None and stream != "off":  # a usable plain answer to a streamed request
                caps.step_stream(None, stream, "ignored (the server answered with a plain body)")
            response = parse_openai_completion(JsonView(data))  # read as the SDK's ChatCompletion is
            speed = generation_speed(data, response.usage.output_tokens, wall_s)
            if speed is not None:
                response.usage.tokens_per_second = speed
            if structured not in (None, "json_schema"):
                response.content = unfenced(response.content)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_reply(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        """Tool calls returned as JSON text in ``content`` (``content_calls.py``): every one, in
        order, executed when ``parse_content_tool_calls`` is set, else a ModelOutputError
        ``tool_call_in_content``. A call cut off in the middle (``finish_reason`` ``length`` or
        unterminated JSON) is a ModelOutputError ``truncated_call``, never speech."""
        if not request.tools or response.tool_calls:
            return response
        names = [t.name for t in request.tools]
        cut = truncated_call(response.content, names)
        if cut is not None:
            note_fault(request.context.role, "truncated_call")
            why = ("the reply hit the token limit (finish_reason length)"
                   if response.finish_reason == "length" else "its JSON is unterminated")
            raise ModelOutputError(
                f"truncated_call: {self.spec} wrote a tool call as text ({cut or '?'}...) that was cut off "
                f"before it ended: {why}; nothing of it was executed or spoken",
                raw=response.content, usage=response.usage, kind="truncated_call")
        speech, calls = content_tool_calls(response.content, names)
        if not calls:
            return response
        if self.settings.parse_content_tool_calls:
            return response.model_copy(update={"content": speech, "tool_calls": calls})
        note_fault(request.context.role, "tool_call_in_content")
        called = ", ".join(c.name for c in calls)
        raise ModelOutputError(
            f"tool_call_in_content: {self.spec} returned its tool call(s) ({called}) as JSON text in "
            "content instead of tool_calls, so nothing was executed; set parse_content_tool_calls: "
            "true for this role to execute them, or use a server chat format that returns tool_calls",
            raw=response.content, usage=response.usage, kind="tool_call_in_content")
