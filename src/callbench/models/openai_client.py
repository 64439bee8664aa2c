"""``openai:<model>``: OpenAI Chat Completions, or any OpenAI-compatible server.

The endpoint is ``settings.base_url``, else the SDK's own ``OPENAI_BASE_URL``, else OpenAI. The key
is ``OPENAI_API_KEY`` from the environment only; a server that needs no key (vLLM, Ollama, a
llama.cpp server) gets a placeholder key, but only when a base URL is set.

Message translation (Chat Completions API reference, "messages"):

- one leading ``system`` message holding every system text (``conversation.normalize_messages``);
- an assistant message that only calls tools has ``content: null`` (not ``""``);
- each call is ``{"id", "type": "function", "function": {"name", "arguments"}}`` with the raw
  argument string the model produced; each result is a ``tool`` message right after its call,
  in call order, with unique ids;
- tools are ``{"type": "function", "function": {name, description, parameters}}`` with
  parameters cleaned by ``schemas.clean_tool_parameters``;
- ``response_schema`` becomes ``response_format: {"type": "json_schema", ...}``, ``strict`` only
  when the schema meets strict mode's rules (otherwise the server would reject it).

Settings: temperature, top_p, reasoning_effort as named; seed mixed with where the request comes
from (``base.request_seed``, so repeats differ); max_tokens as
``max_completion_tokens`` on OpenAI (reasoning models reject ``max_tokens``) and ``max_tokens`` on
other servers (which do not all know the newer name); top_k, which OpenAI lacks, through
``extra_body`` (vLLM, llama.cpp server, OpenRouter read it); extra_headers as request headers.
"""

from __future__ import annotations

import os
import re
from typing import Any

import httpx2
import openai

from callbench.models.anomalies import checked_body, openai_choices
from callbench.models.base import ModelRequest, ModelResponse, ModelSettings, ToolCall, Usage, request_seed
from callbench.models.conversation import normalize_messages
from callbench.models.prepared import JsonView, cleaned_schema, post_json, tool_parameters
from callbench.models.remote import RemoteClient
from callbench.models.schemas import is_openai_strict_compatible
from callbench.models.secrets import resolve_headers
from callbench.models.specs import parse_spec

PLACEHOLDER_KEY = "not-needed"
OPENAI_HOST = "api.openai.com"
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")


def openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The ``messages`` array for ``request`` (see the module docstring)."""
    conv = normalize_messages(request.messages)
    out: list[dict[str, Any]] = []
    if conv.system is not None:
        out.append({"role": "system", "content": conv.system})
    for msg in conv.messages:
        if msg.role == "assistant":
            item: dict[str, Any] = {"role": "assistant"}
            if msg.tool_calls:
                item["content"] = msg.content if msg.content else None
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
                        official_endpoint: bool) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` (without headers and timeout)."""
    body: dict[str, Any] = {"model": model, "messages": openai_messages(request)}
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": t.name, "description": t.description,
                "parameters": tool_parameters(t, "openai")}}
            for t in request.tools
        ]
    if request.response_schema is not None:
        schema = cleaned_schema(request.response_schema, "openai")
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": _NAME_BAD.sub("_", request.response_schema_name)[:64] or "output",
            "schema": schema,
            "strict": is_openai_strict_compatible(schema),
        }}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.seed is not None:
        body["seed"] = request_seed(settings, request)
    if settings.max_tokens is not None:
        body["max_completion_tokens" if official_endpoint else "max_tokens"] = settings.max_tokens
    if settings.reasoning_effort is not None:
        body["reasoning_effort"] = settings.reasoning_effort
    if settings.top_k is not None:
        body["extra_body"] = {"top_k": settings.top_k}
    return body


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
    SDK uses) may be injected, e.g. with a mock transport in tests."""

    provider = "openai"

    def __init__(self, spec: str, settings: ModelSettings, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(spec, settings, **kwargs)
        _, self.model = parse_spec(spec)
        base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or None
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
        self._headers = resolve_headers(settings.extra_headers, self.redactor)
        self._client = openai.AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0,
                                          timeout=settings.timeout_s, http_client=http_client)

    async def _send(self, request: ModelRequest) -> ModelResponse:
        """One request. The raw body is checked before the SDK reads it (``anomalies.py``): a 200
        that is not a usable completion is an InfrastructureError of its fault kind."""
        body = openai_request_body(request, self.model, self.settings,
                                   official_endpoint=self.official_endpoint)
        # the body is plain JSON already: sent as is, without the SDK's per-request transform
        http = await post_json(self._client, "/chat/completions", body, headers=self._headers or None,
                               timeout=self.settings.timeout_s, response_type=httpx2.Response)
        who = f"{self.provider} {request.context.role}"
        data = checked_body(http.content, http.headers.get("content-type", ""), who)
        openai_choices(data, who)
        return parse_openai_completion(JsonView(data))  # read as the SDK's ChatCompletion is
