"""Provider anomalies are infrastructure faults (issue 16 item 1), against the fault-injecting fake
server for the OpenAI adapter and a mock transport for the Anthropic adapter."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2
import pytest

from callbench.models.anthropic_client import AnthropicClient
from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    ToolSchema,
)
from callbench.models.faults import collect_faults
from callbench.models.openai_client import OpenAIClient
from fakes.fault_server import FaultServer

TOOL = ToolSchema(name="lookup", description="Look something up.",
                  parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}
RETRYABLE = {
    "rate_limit": "rate_limit", "server_error": "server_error", "unavailable": "server_error",
    "hang": "timeout", "truncated_json": "malformed_body", "not_utf8": "not_utf8", "html": "html_body",
    "empty_choices": "empty_choices", "missing_choices": "missing_choices", "null_content": "empty_reply",
    "reset": "reset",
}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-anomaly-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-anomaly-test")
    yield


def _candidate() -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="system", content="Be brief."),
                                  ChatMessage(role="user", content="Hello?")],
                        tools=[TOOL], context=RequestContext(role="candidate", episode_id="e1"))


def _client(url: str, attempts: int = 4) -> OpenAIClient:
    return OpenAIClient("openai:fake", ModelSettings(base_url=url, timeout_s=1.0, max_attempts=attempts,
                                                     retry_base_delay_s=0.0))


@pytest.mark.parametrize("fault", sorted(RETRYABLE))
async def test_each_anomaly_is_retried_then_the_valid_reply_is_used(fault: str) -> None:
    with FaultServer(rate=1.0, kinds=(fault,), repeats=1, hang_s=2.0) as server:
        client = _client(server.url)
        with collect_faults() as ledger:
            response = await client.complete(_candidate())
        await client.aclose()
        log = list(server.log)
    assert [e.kind for e in log] == [fault, None]
    assert response.content == log[1].content and response.content  # the valid greeting
    counts = ledger.roles["candidate"]
    assert (counts.requests, counts.retries, counts.faults) == (2, 1, {RETRYABLE[fault]: 1})


@pytest.mark.parametrize("fault", sorted(set(RETRYABLE) - {"hang", "null_content"}))
async def test_a_persistent_anomaly_names_provider_role_and_kind(fault: str) -> None:
    with FaultServer(rate=1.0, kinds=(fault,)) as server:
        client = _client(server.url, attempts=2)
        with pytest.raises(InfrastructureError) as info:
            await client.complete(_candidate())
        await client.aclose()
    err = info.value
    assert err.kind == RETRYABLE[fault] and err.role == "candidate" and not err.retryable
    prefix = f"openai:fake (candidate) failed after 2 attempts: openai candidate: {err.kind}"
    assert str(err).startswith(prefix)


@pytest.mark.parametrize(
    ("fault", "status", "kind"), [("unauthorized", 401, "auth"), ("not_found", 404, "not_found")]
)
async def test_auth_and_not_found_are_not_retried(fault: str, status: int, kind: str) -> None:
    with FaultServer(rate=1.0, kinds=(fault,)) as server:
        client = _client(server.url)
        with collect_faults() as ledger, pytest.raises(InfrastructureError) as info:
            await client.complete(_candidate())
        await client.aclose()
        assert len(server.log) == 1
    assert (info.value.status, info.value.kind, info.value.retryable) == (status, kind, False)
    assert "openai:fake" in str(info.value) and "candidate" in str(info.value)
    assert ledger.roles["candidate"].faults == {kind: 1}


async def test_an_empty_completion_twice_is_a_visible_empty_reply_output_error() -> None:
    with FaultServer(rate=1.0, kinds=("null_content",)) as server:
        client = _client(server.url)
        with collect_faults() as ledger, pytest.raises(ModelOutputError) as info:
            await client.complete(_candidate())
        await client.aclose()
        assert len(server.log) == 2  # retried once, not more
    assert info.value.kind == "empty_reply" and str(info.value).startswith("empty_reply:")
    assert ledger.roles["candidate"].faults == {"empty_reply": 2}


async def test_json_roles_get_the_same_rules() -> None:
    request = ModelRequest(messages=[ChatMessage(role="user", content="judge")], response_schema=SCHEMA,
                           response_schema_name="preflight", context=RequestContext(role="task_judge"))
    with FaultServer(rate=1.0, kinds=("html",), repeats=1) as server:
        client = _client(server.url)
        with collect_faults() as ledger:
            response = await client.complete(request)
        await client.aclose()
    assert json.loads(response.content or "") == {"ok": False}
    assert ledger.roles["task_judge"].faults == {"html_body": 1}


# ---------------------------------------------------------------- Anthropic (mock transport)

GOOD = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": "Hello there."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 3}}


def _anthropic(responses: list[httpx2.Response]) -> tuple[AnthropicClient, list[httpx2.Request]]:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return responses.pop(0) if len(responses) > 1 else responses[0]

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    client = AnthropicClient("anthropic:claude-x", ModelSettings(max_attempts=3, retry_base_delay_s=0.0),
                             http_client=http)
    return client, seen


JSON_TYPE = {"content-type": "application/json"}


@pytest.mark.parametrize(("bad", "kind"), [
    (httpx2.Response(200, content=b"<html>gateway</html>", headers={"content-type": "text/html"}),
     "html_body"),
    (httpx2.Response(200, content=json.dumps(GOOD).encode()[:40], headers=JSON_TYPE), "malformed_body"),
    (httpx2.Response(200, content=b'{"content": "\xff\xfe"}', headers=JSON_TYPE), "not_utf8"),
    (httpx2.Response(200, json={k: v for k, v in GOOD.items() if k != "content"}), "missing_content"),
    (httpx2.Response(200, json={**GOOD, "content": []}), "empty_reply"),
])
async def test_anthropic_anomalies_are_retried(bad: httpx2.Response, kind: str) -> None:
    client, seen = _anthropic([bad, httpx2.Response(200, json=GOOD)])
    with collect_faults() as ledger:
        response = await client.complete(_candidate())
    await client.aclose()
    assert response.content == "Hello there." and len(seen) == 2
    assert ledger.roles["candidate"].faults == {kind: 1}
