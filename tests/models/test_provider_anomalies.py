"""Provider anomalies are infrastructure faults: every anomaly the fault server
injects, for every role (candidate, caller, both judges), through both adapters (OpenAI-compatible
and Anthropic) over real loopback HTTP; then odd shapes through a mock transport."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    Role,
    ToolSchema,
)
from callbench.models.faults import collect_faults
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.client import RemoteClient
from fakes.fault_server import ANTHROPIC_KINDS, COMMON_KINDS, LEDGER_KIND, OPENAI_KINDS, FaultServer
from waiting import scale

TOOL = ToolSchema(
    name="lookup",
    description="Look something up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
ROLES: tuple[Role, ...] = ("candidate", "caller", "task_judge", "conversation_judge")
FATAL = ("unauthorized", "not_found")
KINDS = {
    "openai": sorted(k for k in COMMON_KINDS + OPENAI_KINDS if k not in FATAL),
    "anthropic": sorted(k for k in COMMON_KINDS + ANTHROPIC_KINDS if k not in FATAL),
}
CASES = [(d, r, k) for d in ("openai", "anthropic") for r in ROLES for k in KINDS[d]]
EMPTY = ("null_content", "empty_content")
LONG_S = 120.0 * scale()
"""The timeout of an attempt that is not meant to time out: far above a loaded machine's need."""
HANG_TIMEOUT_S = 2.0 * scale()
"""The timeout that a hanging server must exceed (it hangs for LONG_S, until it is closed)."""
# JSON schemas shaped like the real ones, so the fake answers them as it answers callbench
_ITEM = {
    "type": "object",
    "properties": {
        "label": {"enum": ["met", "not_met"]},
        "reason": {"type": "string"},
        "cited_messages": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["label", "reason", "cited_messages"],
}
SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "caller": (
        "caller_turn",
        {
            "type": "object",
            "properties": {
                "expressed_step": {"anyOf": [{"enum": ["ask_balance"]}, {"type": "null"}]},
                "speech": {"type": "string"},
                "done": {"type": "boolean"},
            },
            "required": ["expressed_step", "speech", "done"],
        },
    ),
    "task_judge": (
        "task_judgement",
        {
            "type": "object",
            "properties": {"criteria": {"type": "object", "properties": {"c1": _ITEM}, "required": ["c1"]}},
            "required": ["criteria"],
        },
    ),
    "conversation_judge": (
        "conversation_judgement",
        {
            "type": "object",
            "properties": {"criteria": {"type": "object", "properties": {"c2": _ITEM}, "required": ["c2"]}},
            "required": ["criteria"],
        },
    ),
}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-anomaly-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-anomaly-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    yield


def _request(role: Role) -> ModelRequest:
    context = RequestContext(role=role, episode_id="e1")
    messages = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hello?")]
    if role == "candidate":
        return ModelRequest(messages=messages, tools=[TOOL], context=context)
    name, schema = SCHEMAS[role]
    return ModelRequest(messages=messages, response_schema=schema, response_schema_name=name, context=context)


def _client(
    server: FaultServer, dialect: str, attempts: int = 4, timeout_s: float = LONG_S, **kwargs: Any
) -> RemoteClient:
    common = dict(timeout_s=timeout_s, max_attempts=attempts, retry_base_delay_s=0.0)
    if dialect == "anthropic":
        return AnthropicClient("anthropic:fake", ModelSettings(base_url=server.root, **common), **kwargs)
    from callbench.models.remote.openai_client import OpenAIClient

    return OpenAIClient("openai:fake", ModelSettings(base_url=server.url, **common), **kwargs)


def _usable(role: Role, response: Any) -> None:
    if role == "candidate":
        assert response.content and "Hello, thank you for calling" in response.content
    else:
        assert isinstance(json.loads(response.content), dict)


@pytest.mark.parametrize(("dialect", "role", "fault"), CASES)
async def test_each_anomaly_is_retried_then_the_valid_reply_is_used(
    dialect: str, role: Role, fault: str
) -> None:
    # only a hang needs the timeout to fire: every other attempt may take as long as a loaded
    # machine needs (a 1 s limit cut a valid attempt short at load 10 and the count was off)
    with FaultServer(rate=1.0, kinds=(fault,), repeats=1, hang_s=LONG_S) as server:
        client = _client(server, dialect, timeout_s=HANG_TIMEOUT_S if fault == "hang" else LONG_S)
        with collect_faults() as ledger:
            response = await client.complete(_request(role))
        await client.aclose()
        log = list(server.log)
    assert [(e.kind, e.dialect, e.role) for e in log] == [(fault, dialect, role), (None, dialect, role)]
    _usable(role, response)
    if role == "candidate":
        assert response.content == log[1].content
    counts = ledger.roles[role]
    assert (counts.requests, counts.retries, counts.faults) == (2, 1, {LEDGER_KIND[fault]: 1})


@pytest.mark.parametrize(("dialect", "role", "fault"), [c for c in CASES if c[2] not in ("hang", *EMPTY)])
async def test_a_persistent_anomaly_names_provider_role_and_kind(
    dialect: str, role: Role, fault: str
) -> None:
    with FaultServer(rate=1.0, kinds=(fault,)) as server:
        client = _client(server, dialect, attempts=3)
        with collect_faults() as ledger, pytest.raises(InfrastructureError) as info:
            await client.complete(_request(role))
        await client.aclose()
        log = list(server.log)
    # a 500 that answers the same shape twice makes an Anthropic gateway client resend once with
    # system as a plain string: one more request, noted as invalid_request
    stepped = dialect == "anthropic" and log[0].status == 500
    assert len(log) == 3 + stepped
    err = info.value
    kind = LEDGER_KIND[fault]
    assert err.kind == kind and err.role == role and not err.retryable
    prefix = f"{dialect}:fake ({role}) failed after 3 attempts: {dialect} {role}: {kind}"
    assert str(err).startswith(prefix), str(err)
    if fault == "truncated_json":
        assert "the response body is truncated JSON" in str(err)
    expected = {kind: 3, "invalid_request": 1} if stepped else {kind: 3}
    assert ledger.roles[role].faults == expected and ledger.roles[role].retries == 2


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("fault", "status", "kind"), [("unauthorized", 401, "auth"), ("not_found", 404, "not_found")]
)
async def test_auth_and_not_found_are_not_retried(dialect: str, fault: str, status: int, kind: str) -> None:
    with FaultServer(rate=1.0, kinds=(fault,)) as server:
        client = _client(server, dialect)
        with collect_faults() as ledger, pytest.raises(InfrastructureError) as info:
            await client.complete(_request("candidate"))
        await client.aclose()
        assert len(server.log) == 1
    assert (info.value.status, info.value.kind, info.value.retryable) == (status, kind, False)
    assert f"{dialect}:fake" in str(info.value) and "candidate" in str(info.value)
    assert ledger.roles["candidate"].faults == {kind: 1}


@pytest.mark.parametrize(("dialect", "role", "fault"), [c for c in CASES if c[2] in EMPTY])
async def test_an_empty_completion_twice_is_a_visible_empty_reply_output_error(
    dialect: str, role: Role, fault: str
) -> None:
    with FaultServer(rate=1.0, kinds=(fault,)) as server:
        client = _client(server, dialect)
        with collect_faults() as ledger, pytest.raises(ModelOutputError) as info:
            await client.complete(_request(role))
        await client.aclose()
        assert len(server.log) == 2  # retried once, not more
    assert info.value.kind == "empty_reply" and str(info.value).startswith("empty_reply:")
    assert ledger.roles[role].faults == {"empty_reply": 2}


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_429_waits_at_least_its_retry_after(dialect: str) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with FaultServer(rate=1.0, kinds=("rate_limit",), repeats=2, retry_after_ms=4500) as server:
        client = _client(server, dialect, sleep=sleep)
        response = await client.complete(_request("candidate"))
        await client.aclose()
    _usable("candidate", response)
    assert waits == [4.5, 4.5]  # the backoff base is 0 here: each wait is the server's Retry-After


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_hang_past_the_timeout_is_a_timeout_fault_then_a_skip_reason(dialect: str) -> None:
    with FaultServer(rate=1.0, kinds=("hang",), hang_s=LONG_S) as server:
        client = _client(server, dialect, attempts=2, timeout_s=HANG_TIMEOUT_S)
        with pytest.raises(InfrastructureError) as info:
            await client.complete(_request("conversation_judge"))
        await client.aclose()
    assert info.value.kind == "timeout"
    assert f"{dialect} conversation_judge: timeout" in str(info.value)


# ---------------------------------------------------------------- odd shapes (mock transport)

GOOD = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "Hello there."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 3},
}
GOOD_OPENAI = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello there."}, "finish_reason": "stop"}
    ],
}
JSON_TYPE = {"content-type": "application/json"}


def _mocked(dialect: str, responses: list[httpx2.Response]) -> tuple[RemoteClient, list[httpx2.Request]]:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return responses.pop(0) if len(responses) > 1 else responses[0]

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    settings = ModelSettings(max_attempts=3, retry_base_delay_s=0.0)
    if dialect == "anthropic":
        return AnthropicClient("anthropic:claude-x", settings, http_client=http), seen
    from callbench.models.remote.openai_client import OpenAIClient

    return OpenAIClient(
        "openai:m", settings.model_copy(update={"base_url": "http://fake/v1"}), http_client=http
    ), seen


def _msg(**fields: Any) -> dict[str, Any]:
    return {**GOOD_OPENAI, "choices": [{"index": 0, "message": {"role": "assistant", **fields}}]}


ODD = [
    (
        "anthropic",
        httpx2.Response(200, content=b"<html>gateway</html>", headers={"content-type": "text/html"}),
        "html_body",
    ),
    (
        "anthropic",
        httpx2.Response(200, content=json.dumps(GOOD).encode()[:40], headers=JSON_TYPE),
        "malformed_body",
    ),
    ("anthropic", httpx2.Response(200, content=b'{"content": "\xff\xfe"}', headers=JSON_TYPE), "not_utf8"),
    (
        "anthropic",
        httpx2.Response(200, json={k: v for k, v in GOOD.items() if k != "content"}),
        "missing_content",
    ),
    ("anthropic", httpx2.Response(200, json={"stop_reason": "end_turn"}), "missing_content"),
    ("anthropic", httpx2.Response(200, json={**GOOD, "content": []}), "empty_reply"),
    (
        "anthropic",
        httpx2.Response(
            200, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        ),
        "error_body",
    ),
    (
        "anthropic",
        httpx2.Response(
            529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        ),
        "server_error",
    ),
    ("anthropic", httpx2.Response(200, json={**GOOD, "content": ["text"]}), "malformed_body"),
    ("anthropic", httpx2.Response(200, json={**GOOD, "content": [{"type": "text"}]}), "malformed_body"),
    (
        "anthropic",
        httpx2.Response(
            200, json={**GOOD, "content": [{"type": "tool_use", "id": "t", "name": None, "input": "x"}]}
        ),
        "malformed_body",
    ),
    ("anthropic", httpx2.Response(200, json={**GOOD, "usage": "many"}), "malformed_body"),
    (
        "openai",
        httpx2.Response(200, json={"error": {"message": "upstream failed", "type": "server_error"}}),
        "error_body",
    ),
    ("openai", httpx2.Response(200, json=_msg(content=5)), "malformed_body"),
    ("openai", httpx2.Response(200, json=_msg(content=None, tool_calls="x")), "malformed_body"),
    (
        "openai",
        httpx2.Response(
            200,
            json=_msg(
                content=None,
                tool_calls=[{"id": "a", "type": "function", "function": {"name": None, "arguments": "{}"}}],
            ),
        ),
        "malformed_body",
    ),
    ("openai", httpx2.Response(200, json={**GOOD_OPENAI, "usage": "many"}), "malformed_body"),
    ("openai", httpx2.Response(200, json={**GOOD_OPENAI, "choices": [None]}), "malformed_body"),
    ("openai", httpx2.Response(200, content=b"", headers=JSON_TYPE), "malformed_body"),
]


@pytest.mark.parametrize(("dialect", "bad", "kind"), ODD)
async def test_odd_shapes_are_faults_of_their_kind_then_retried(
    dialect: str, bad: httpx2.Response, kind: str
) -> None:
    good = GOOD if dialect == "anthropic" else GOOD_OPENAI
    client, seen = _mocked(dialect, [bad, httpx2.Response(200, json=good)])
    with collect_faults() as ledger:
        response = await client.complete(_request("candidate"))
    await client.aclose()
    assert response.content == "Hello there." and len(seen) == 2
    assert ledger.roles["candidate"].faults == {kind: 1}


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_reset_raised_by_the_transport_is_a_reset_fault(dialect: str) -> None:
    def boom(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(boom))
    settings = ModelSettings(
        max_attempts=2, retry_base_delay_s=0.0, base_url="http://fake/v1" if dialect == "openai" else None
    )
    if dialect == "anthropic":
        client: RemoteClient = AnthropicClient("anthropic:m", settings, http_client=http)
    else:
        from callbench.models.remote.openai_client import OpenAIClient

        client = OpenAIClient("openai:m", settings, http_client=http)
    with pytest.raises(InfrastructureError) as info:
        await client.complete(_request("caller"))
    await client.aclose()
    assert info.value.kind == "reset" and f"{dialect} caller: reset" in str(info.value)


async def test_a_shape_the_body_checks_miss_is_still_a_malformed_body_fault_not_a_traceback() -> None:
    from callbench.models.base import ModelResponse, ToolCall

    class Odd(RemoteClient):
        provider = "odd"

        def __init__(self) -> None:
            super().__init__("openai:odd-model", ModelSettings(max_attempts=2, retry_base_delay_s=0.0))
            self.sent = 0

        async def _send(self, request: ModelRequest) -> ModelResponse:
            self.sent += 1
            if self.sent == 1:
                ToolCall.model_validate({"id": "a", "name": None, "arguments": "{}"})  # raises
            return ModelResponse(content="fine")

    client = Odd()
    with collect_faults() as ledger:
        response = await client.complete(_request("candidate"))
    assert response.content == "fine" and client.sent == 2
    assert ledger.roles["candidate"].faults == {"malformed_body": 1}
