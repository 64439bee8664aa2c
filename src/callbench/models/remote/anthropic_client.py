"""``anthropic:<model>``: the Anthropic Messages API with native tool use and prompt caching.

The key is ``ANTHROPIC_API_KEY`` from the environment only; ``settings.base_url`` (or the SDK's
``ANTHROPIC_BASE_URL``) selects another endpoint.

Message translation (Messages API reference, "messages", "tool use"):

- every system text goes into ``system`` text blocks marked ``cache_control: ephemeral``: one, or
  two when the request says how much of it is the same for every call of the agent
  (:func:`system_blocks`); the last tool and the last message block are marked too, so tools,
  system prompt and the conversation so far form cached prefixes (prompt caching guide: the cache
  prefix is tools, then system, then messages; at most four breakpoints);
- an assistant message that only calls tools has only ``tool_use`` blocks (no empty text block:
  the API rejects empty text); tool inputs are the parsed argument objects (a string that is not a
  JSON object, which only another model could have produced, is sent as ``{"_raw_arguments": s}``);
- consecutive tool results become ``tool_result`` blocks of one user message, right after the
  calls, in call order; caller text that follows them joins that user message after the results
  (the API requires results first);
- consecutive messages of one role are merged (the API expects alternation); the first message
  must be a user message, so a conversation that starts with the agent (the candidate greets
  first) gets a ``[call connected]`` user turn, and empty texts become ``[silence]``; a
  conversation that ends with an assistant message gets a ``[silence]`` user turn (a trailing
  assistant message would be read as a prefill);
- ``response_schema`` becomes a forced tool (``tool_choice: {"type": "tool"}``) whose input is the
  answer; a non-object schema is wrapped as ``{"value": ...}`` and unwrapped.

Settings: max_tokens (required by the API; default 4096), temperature/top_p/top_k sent in the body,
reasoning_effort as ``output_config.effort``, extra_headers as headers. The API has no seed.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import anthropic

from callbench.models.base import ChatMessage, ModelRequest, ModelResponse, ModelSettings, ToolCall, Usage
from callbench.models.conversation import normalize_messages
from callbench.models.remote.anomalies import anthropic_content, checked_body
from callbench.models.remote.client import RemoteClient
from callbench.models.remote.prepared import cleaned_schema, tool_parameters, within_deadline
from callbench.models.remote.secrets import resolve_base_url, resolve_headers
from callbench.models.specs import parse_spec

DEFAULT_MAX_TOKENS = 4096
CONNECTED = "[call connected]"
SILENCE = "[silence]"
EPHEMERAL = {"type": "ephemeral"}
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
WRAP_KEY = "value"


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


def anthropic_request_body(request: ModelRequest, model: str, settings: ModelSettings) -> dict[str, Any]:
    """Keyword arguments for ``messages.create`` (without headers and timeout)."""
    system, messages = anthropic_messages(request)
    body: dict[str, Any] = {"model": model, "max_tokens": settings.max_tokens or request.max_output_tokens
                            or DEFAULT_MAX_TOKENS,
                            "messages": messages}
    if system is not None:
        body["system"] = system_blocks(system, request.static_system_chars)
    # the conversation so far is the next request's prefix (prompt caching guide: a breakpoint on
    # the last block caches the conversation incrementally); a "[silence]" turn added after a
    # trailing assistant message will not be in the next request, so the mark goes before it
    silence_only = messages[-1]["content"] == [{"type": "text", "text": SILENCE}]
    target = messages[-2] if silence_only and len(messages) > 1 else messages[-1]
    target["content"][-1]["cache_control"] = EPHEMERAL
    tools = [{"name": t.name, "description": t.description,
              "input_schema": tool_parameters(t, "anthropic")}
             for t in request.tools]
    if request.response_schema is not None:
        schema, _ = _output_tool_schema(request.response_schema)
        name = output_tool_name(request)
        tools.append({"name": name, "description": "Give your answer by calling this tool.",
                      "input_schema": schema})
        body["tool_choice"] = {"type": "tool", "name": name}
    if tools:
        tools[-1]["cache_control"] = EPHEMERAL
        body["tools"] = tools
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
                if wrapped and isinstance(value, dict):
                    value = value.get(WRAP_KEY)
                answer = json.dumps(value, ensure_ascii=False)
            else:
                calls.append(ToolCall(id=block.id, name=block.name,
                                      arguments=json.dumps(block.input, ensure_ascii=False)))
    content = answer if wanted is not None else ("".join(texts) or None)
    u = message.usage  # None when a server leaves usage out (its tokens are then unknown: 0)
    read = getattr(u, "cache_read_input_tokens", None) or 0
    written = getattr(u, "cache_creation_input_tokens", None) or 0
    usage = Usage(input_tokens=(getattr(u, "input_tokens", None) or 0) + read + written,
                  output_tokens=getattr(u, "output_tokens", None) or 0,
                  cached_input_tokens=read, cache_write_input_tokens=written)
    return ModelResponse(content=content, tool_calls=calls, usage=usage, finish_reason=message.stop_reason,
                         model=message.model or "")


class AnthropicClient(RemoteClient):
    """The ``anthropic:`` provider. ``http_client`` (an ``httpx2.AsyncClient``) may be injected."""

    provider = "anthropic"

    def __init__(self, spec: str, settings: ModelSettings, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(spec, settings, **kwargs)
        _, self.model = parse_spec(spec)
        key = os.environ.get("ANTHROPIC_API_KEY") or None
        if key is None:
            raise ValueError(f"{spec}: set ANTHROPIC_API_KEY in the environment")
        self.redactor.add(key)
        self._headers = resolve_headers(settings.extra_headers, self.redactor)
        base_url, query = resolve_base_url(
            settings.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None, self.redactor)
        self.custom_endpoint = False
        self._client = anthropic.AsyncAnthropic(api_key=key, base_url=base_url, max_retries=0,
                                                timeout=settings.timeout_s, http_client=http_client,
                                                default_query=query)

    async def _send(self, request: ModelRequest) -> ModelResponse:
        """One request; the raw body is checked first (``anomalies.py``), as for OpenAI."""
        body = anthropic_request_body(request, self.model, self.settings)

        async def exchange() -> tuple[Any, bytes]:
            raw = await self._client.messages.with_raw_response.create(
                **body, extra_headers=self._headers or None, timeout=self.settings.timeout_s)
            return raw, await raw.read()

        # timeout_s bounds the whole exchange, body included (a slow drip is a timeout fault)
        raw, content = await within_deadline(self.settings.timeout_s, exchange())
        who = f"{self.provider} {request.context.role}"
        data = checked_body(content, raw.headers.get("content-type", ""), who)
        anthropic_content(data, who)
        return parse_anthropic_message(await raw.parse(), request)
