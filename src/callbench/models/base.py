"""The ``ModelClient`` protocol and the provider-neutral message types every role uses.

Messages follow the OpenAI chat shape (roles system / user / assistant / tool; an assistant
message may carry ``tool_calls`` whose ``arguments`` is the raw JSON *string* the model produced;
a tool message answers one call by ``tool_call_id``). Adapters translate to each provider.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from callbench.models.timing import ResponseTiming

Role = Literal["candidate", "caller", "task_judge", "conversation_judge", "generator"]
"""Who sends a request; ``generator`` is scenario generation (``callbench generate``)."""

SECRET_HEADER_RE = re.compile(
    r"auth|key|token|secret|cookie|pass|credential|signature|session|subscription|bearer|jwt|private"
    r"|csrf|xsrf",
    re.IGNORECASE,
)
"""Header names that look like credentials: their value must be ``env:VAR``."""
SECRET_VALUE_RE = re.compile(r"(bearer|basic)\s+\S|sk-[A-Za-z0-9_-]{8,}", re.IGNORECASE)
"""Literal header values that look like credentials whatever the header's name (``Bearer ...``,
``Basic ...``, an ``sk-...`` key): refused too."""
ENV_REF_RE = re.compile(r"env:[A-Za-z_][A-Za-z0-9_]*")
HEADER_VALUE_MARKER = "[not saved]"
URL_PART_MARKER = "not-saved"
"""What a saved ``base_url`` holds in place of its userinfo and of each query value."""
"""What every saved header value is replaced by (manifests, traces, grade sets, reports)."""
OPERATIONAL_SETTINGS = frozenset({"extra_headers", "max_attempts", "retry_base_delay_s", "stream"})
"""Settings that never change what a model says (left out of candidate ids)."""
OMITTED_AT_DEFAULT = frozenset({"tool_choice", "structured_output", "parse_content_tool_calls",
                                "first_user_message", "first_user_message_text", "stream"})
"""Settings added after runs were saved: left out of candidate ids and cache keys while at their
default, so ids and cache keys of earlier runs stay the same (``identity_settings``)."""


class ToolCall(BaseModel):
    """One tool call as the model emitted it; ``arguments`` is the raw string (may be malformed)."""

    id: str
    name: str
    arguments: str


class ChatMessage(BaseModel):
    """A chat message. ``content`` is None for an assistant message that only calls tools."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class ToolSchema(BaseModel):
    """A function tool offered to the model: name, description, JSON Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelSettings(BaseModel):
    """Sampling and endpoint settings for one role. Secrets never live here: keys come from the
    environment only (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``)."""

    model_config = ConfigDict(extra="forbid")
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    base_url: str | None = None
    extra_headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = 120.0
    max_attempts: int = Field(default=6, ge=1, le=50)
    """Requests per call for provider faults that can pass (the first try included)."""
    retry_base_delay_s: float = Field(default=1.0, ge=0.0, le=600.0)
    """Backoff base: retry n waits uniform(0, min(60 s, base * 2**n)) seconds (``retry.py``)."""
    n_ctx: int | None = None  # local model only: context size in tokens (None: sized to the prompt)
    tool_choice: Literal["auto", "required", "none", "omit"] = "auto"
    """openai: the ``tool_choice`` sent with every request that offers tools (``omit``: none sent).
    Sent explicitly because llama-cpp-python's function-calling format leaves the tools out of the
    prompt without it."""
    structured_output: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    """openai: how JSON output is asked for (``models/remote/negotiation.py``); ``auto`` negotiates."""
    parse_content_tool_calls: bool = False
    """openai: execute tool calls a server returns as JSON text in ``content`` (``content_calls.py``);
    when False such a reply is a candidate output error of kind ``tool_call_in_content``."""
    first_user_message: Literal["auto", "none", "empty", "text"] = "auto"
    """candidate: the user turn put before the agent's greeting, for chat templates that need a user
    turn first (paper, section 3: "Models whose templates require a user message before the first
    assistant turn get an empty one"): ``none``, ``empty`` (an empty user message), ``text``
    (``first_user_message_text``), or ``auto``: what the provider needs (``anthropic:`` the text
    ``[call connected]``, as the Messages API requires a user message first; others none). The
    message is a trace message, so the trace records it (:func:`first_user_message`)."""
    first_user_message_text: str | None = None
    """The text of ``first_user_message: text``."""
    stream: Literal["auto", "on", "off"] = "auto"
    """openai, anthropic, local: ask for the answer as a stream, so that the time to its first
    token is measured (``models/timing.py``). ``auto``: the candidate streams, other roles do not
    (nothing waits on their first token); ``on``: every role; ``off``: none. An endpoint that
    cannot stream is negotiated down and its answers are marked not streamed. Never changes what
    the model says: left out of candidate ids and cache keys."""

    @model_validator(mode="after")
    def _first_user_text(self) -> ModelSettings:
        """``first_user_message: text`` needs a non-empty ``first_user_message_text``; the text is
        refused with any other value (it would be silently ignored)."""
        has_text = bool(self.first_user_message_text and self.first_user_message_text.strip())
        if self.first_user_message == "text" and not has_text:
            raise ValueError("first_user_message: text needs first_user_message_text (the text to send)")
        if self.first_user_message != "text" and self.first_user_message_text is not None:
            raise ValueError(f"first_user_message_text is only used with first_user_message: text "
                             f"(got first_user_message: {self.first_user_message})")
        return self

    @field_validator("extra_headers")
    @classmethod
    def _no_secret_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        """A header whose name looks like a credential (:data:`SECRET_HEADER_RE`: authorization,
        api-key, token, secret, cookie, subscription...) or whose literal value does
        (:data:`SECRET_VALUE_RE`: ``Bearer ...``, ``sk-...``) must take its value from the
        environment as ``env:VAR_NAME``. (Every value is left out of saved files anyway, by the
        serializer below; this keeps secrets out of settings files too.)"""
        for name, value in headers.items():
            if value == HEADER_VALUE_MARKER:
                continue  # loaded from a saved file: the value was never saved
            if ENV_REF_RE.fullmatch(value):
                continue
            if SECRET_HEADER_RE.search(name) or SECRET_VALUE_RE.match(value.strip()):
                raise ValueError(
                    f"extra_headers[{name!r}] looks like a credential; give it as 'env:VAR_NAME' "
                    "and put the secret in that environment variable"
                )
        return headers

    @field_serializer("base_url")
    def _url_without_credentials(self, url: str | None) -> str | None:
        """Every dump keeps the endpoint (scheme, host, port, path) but not what may authenticate
        to it: the userinfo (``user:password@``) and every query value (``?subscription-key=...``)
        become :data:`URL_PART_MARKER`. The live object keeps the URL."""
        return saved_url(url)

    @field_serializer("extra_headers")
    def _header_names_only(self, headers: dict[str, str]) -> dict[str, str]:
        """Every dump (manifests, traces, grade sets, reports) keeps header names only: each value,
        literal or ``env:VAR``, becomes :data:`HEADER_VALUE_MARKER`. The live
        object keeps its values for the requests."""
        return {name: HEADER_VALUE_MARKER for name in headers}


def saved_url(url: str | None) -> str | None:
    """``url`` with its userinfo and each query value replaced by :data:`URL_PART_MARKER` (query
    names and everything else kept; RFC 3986 section 3.2.1 deprecates passwords in userinfo, and
    providers put keys in the query). A text that does not parse as a URL is kept only when it has
    neither ``@`` nor ``?``; otherwise it is replaced whole."""
    if url is None:
        return None
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return url if "@" not in url and "?" not in url else URL_PART_MARKER
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{URL_PART_MARKER}@{'[' + host + ']' if ':' in host else host}{port}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, URL_PART_MARKER) for k, _ in pairs]) if pairs else URL_PART_MARKER
    return urlunsplit((parts.scheme, netloc, parts.path, query, URL_PART_MARKER if parts.fragment else ""))


class RequestContext(BaseModel):
    """Where a request comes from. Not sent to providers; scripted models use it to find their
    script (e.g. the scenario's reference path). The response cache uses only ``episode_id`` and
    ``attempt``, to give each episode and attempt its own sample slot (``models/cache.py``), so
    keep them stable across reruns of the same run."""

    role: Role
    episode_id: str = ""
    agent_id: str = ""
    scenario_id: str = ""
    turn: int = 0
    attempt: int = 0


class ModelRequest(BaseModel):
    """One completion request. ``response_schema`` (a JSON Schema object) asks for JSON output
    constrained to it (callers and judges); ``tools`` offers function tools (candidates)."""

    messages: list[ChatMessage]
    tools: list[ToolSchema] = Field(default_factory=list)
    response_schema: dict[str, Any] | None = None
    response_schema_name: str = "output"
    context: RequestContext
    max_output_tokens: int | None = Field(default=None, ge=1)
    """This request's output budget in tokens, used when the client's ``settings.max_tokens`` is
    not set (the generator sizes it from the expected scenario: ``generate/budget.py``)."""
    static_system_chars: int = 0
    """How many leading characters of the system prompt are the same for every call of this agent
    (the operating document before its first template variable); 0 when unknown. Providers may
    place or cache shared material at this boundary (the local format puts its tools list there
    when the call-specific rest is a trailing section, ``local_format.tools_block_position``)."""


class Usage(BaseModel):
    """Token usage of one call (or a sum). ``cost_usd`` is None when the price is unknown.

    ``input_tokens`` counts every prompt token, including ``cached_input_tokens`` (read from a
    provider's prompt cache, or reused from the local model's KV cache) and
    ``cache_write_input_tokens`` (written to Anthropic's prompt cache, billed at a premium)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    calls: int = 0
    latency_s: float = 0.0
    tokens_per_second: float | None = None
    cost_usd: float | None = 0.0

    @field_validator("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens",
                     "calls", mode="before")
    @classmethod
    def _count_not_negative(cls, value: Any) -> Any:
        """A negative count (saved by a version that trusted a provider's usage) reads as 0: no
        report shows negative tokens, speeds or costs."""
        return 0 if isinstance(value, int) and not isinstance(value, bool) and value < 0 else value

    @field_validator("tokens_per_second", "cost_usd", mode="before")
    @classmethod
    def _rate_not_negative(cls, value: Any) -> Any:
        """A negative speed or cost is unknown (None), never shown."""
        return None if isinstance(value, int | float) and not isinstance(value, bool) and value < 0 else value

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens + other.cache_write_input_tokens,
            calls=self.calls + other.calls,
            latency_s=self.latency_s + other.latency_s,
            tokens_per_second=other.tokens_per_second or self.tokens_per_second,
            cost_usd=cost,
        )


class ModelResponse(BaseModel):
    """A completion: speech (``content``), tool calls, usage, and the provider's finish reason."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""
    cached: bool = False
    timing: ResponseTiming | None = None
    """When and how the answer arrived (``models/timing.py``); None when the client does not
    measure its requests (scripted models: the episode loop then times the call itself)."""


class InfrastructureError(Exception):
    """A provider or transport failure (rate limit, 5xx, timeout, auth, a response that is not a
    usable completion). Retried by adapters; when retries run out the episode is skipped with this
    reason, never charged to the candidate. ``kind`` is the fault class (``models/faults.py``)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        status: int | None = None,
        retry_after_s: float | None = None,
        kind: str = "other",
        role: str = "",
    ) -> None:
        super().__init__(message)
        self.role = role  # the role of the failed request, when known
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s  # the server's Retry-After, in seconds, when it sent one
        self.kind = kind


class ModelOutputError(Exception):
    """The model answered but the answer is unusable (e.g. output that violates its schema).
    Recorded in the trace and graded for candidates; retried for callers and judges.
    ``raw`` holds the unusable output text (None when there was none); ``usage`` what it cost."""

    def __init__(self, message: str, *, raw: str | None = None, usage: Usage | None = None,
                 kind: str = "invalid_output") -> None:
        super().__init__(message)
        self.raw = raw
        self.usage = usage
        self.kind = kind  # "empty_reply": no content and no tool calls, after one retry
        self.timing: ResponseTiming | None = None  # set by clients that time their requests


@runtime_checkable
class ModelClient(Protocol):
    """What every role's model implements.

    ``spec`` is the model spec string (``openai:gpt-4o``, ``local``, ``scripted:reference``...),
    ``settings`` its settings. ``complete`` raises :class:`InfrastructureError` or
    :class:`ModelOutputError`; it never returns partial output silently.
    """

    spec: str
    settings: ModelSettings

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    async def aclose(self) -> None: ...


def wants_stream(settings: ModelSettings, role: str) -> bool:
    """Whether a request of ``role`` asks for a streamed answer under ``settings.stream``."""
    return settings.stream == "on" or (settings.stream == "auto" and role == "candidate")


def first_user_message(
    client: Any, agent_mode: str | None = None, agent_text: str | None = None
) -> str | None:
    """The user message a conversation with ``client`` as the candidate starts with (before the
    greeting), or None for none. Order: the role setting ``settings.first_user_message`` when it
    is not ``auto``; else the agent's first-turn convention ``agent_mode`` (``none``, ``empty``,
    ``text`` with ``agent_text``; from ``agent.yaml``, e.g. imported from a Vapi or Retell export
    by ``new-agent``), except that ``none`` on a client whose API needs a user turn first (one
    with a ``default_first_user_message``: ``anthropic:``) keeps that default; else the client's
    ``default_first_user_message`` when it has one, else None. Raises ``ValueError`` for an
    unknown ``agent_mode`` or ``text`` without a text."""
    settings: ModelSettings = client.settings
    default = getattr(client, "default_first_user_message", None)
    default = default if isinstance(default, str) else None
    mode: str = settings.first_user_message
    text = settings.first_user_message_text
    if mode == "auto":
        if agent_mode is None or (agent_mode == "none" and default is not None):
            return default
        mode, text = agent_mode, agent_text
    if mode == "none":
        return None
    if mode == "empty":
        return ""
    if mode == "text" and text:
        return text
    raise ValueError(f"first_user_message: {mode!r} needs to be none, empty or text with its text")


def identity_settings(settings: ModelSettings, exclude: set[str] | frozenset[str]) -> dict[str, Any]:
    """``settings`` as JSON data for an id or a cache key: without ``exclude``, and without the
    :data:`OMITTED_AT_DEFAULT` settings that hold their default value."""
    data = settings.model_dump(mode="json", exclude=set(exclude))
    for name in OMITTED_AT_DEFAULT:
        if name in data and data[name] == ModelSettings.model_fields[name].default:
            del data[name]
    return data


def request_seed(settings: ModelSettings, request: ModelRequest) -> int:
    """The sampling seed sent with one request: a 31-bit number from SHA-256 of the settings' seed
    and where the request comes from (episode id, which includes the repeat; attempt; turn; role;
    message count). Every call is reproducible, and repeats of a scenario (or two turns with the
    same prompt) do not draw the same sample, as one fixed seed per run would make them do."""
    ctx = request.context
    material = json.dumps(
        [settings.seed, ctx.episode_id, ctx.attempt, ctx.turn, ctx.role, len(request.messages)]
    )
    return int.from_bytes(hashlib.sha256(material.encode()).digest()[:4], "big") & 0x7FFFFFFF
