"""The Anthropic adapter's ``system`` form, learnt per client, and server errors that always answer
one request shape. Mock transport, no network."""

from __future__ import annotations

import json
import random

import httpx2
import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    ToolSchema,
)
from callbench.models.faults import collect_faults
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.retry import RetryPolicy

CTX = RequestContext(role="candidate", episode_id="ep1")
MESSAGES = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hi")]
TOOLS = [ToolSchema(name="lookup", description="Look up.", parameters={"type": "object", "properties": {}})]
OPAQUE = {"type": "error", "error": {"type": "api_error", "message": "Internal Server Error"}}


def make(mk, handler, sleeps, attempts: int = 3) -> AnthropicClient:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return AnthropicClient("anthropic:claude-x", ModelSettings(base_url="http://gateway.test"),
                           http_client=http, retry_policy=RetryPolicy(max_attempts=attempts),
                           rng=random.Random(0), sleep=sleeps)


class Gateway:
    """500 (opaque) to a list ``system``, and to every request with tools when ``tools_fail``."""

    def __init__(self, mk, tools_fail: bool = False, status: int = 500) -> None:
        self.mk, self.tools_fail, self.status = mk, tools_fail, status
        self.bodies: list[dict] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if isinstance(body.get("system"), list) or (self.tools_fail and body.get("tools")):
            return self.mk.json_response(OPAQUE, self.status)
        return self.mk.json_response(self.mk.anthropic_message([{"type": "text", "text": "ok"}]))

    def forms(self) -> list[str]:
        return ["list" if isinstance(b.get("system"), list) else type(b.get("system")).__name__
                for b in self.bodies]


async def test_repeated_500_to_system_blocks_steps_down_once_per_client(keys, mk, sleeps) -> None:
    gateway = Gateway(mk)
    client = make(mk, gateway, sleeps)
    with collect_faults() as ledger:
        reply = await client.complete(ModelRequest(messages=MESSAGES, context=CTX))
    assert reply.content == "ok"
    assert gateway.forms() == ["list", "list", "str"]
    assert gateway.bodies[-1]["system"] == "Be brief."
    assert client.system_form == "string" and "HTTP 500 2 times in a row" in client.learnt[0]
    assert len(sleeps.delays) == 1  # one backoff before the second identical 500, none after
    counts = ledger.roles["candidate"]
    # the first 500 is retried as a server error; the second, the same shape again, is the rejection
    assert (counts.requests, counts.retries) == (3, 1)
    assert counts.faults == {"server_error": 1, "invalid_request": 1}
    # remembered: the next request goes out as a string at once
    await client.complete(ModelRequest(messages=MESSAGES, context=CTX))
    assert gateway.forms()[3:] == ["str"]


async def test_a_400_naming_system_steps_down_at_once(keys, mk, sleeps) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if isinstance(body["system"], list):
            return mk.json_response({"type": "error", "error": {
                "type": "invalid_request_error", "message": "system: Input should be a valid string"}}, 400)
        return mk.json_response(mk.anthropic_message([{"type": "text", "text": "ok"}]))

    client = make(mk, handler, sleeps)
    assert (await client.complete(ModelRequest(messages=MESSAGES, context=CTX))).content == "ok"
    assert client.system_form == "string" and sleeps.delays == []


async def test_a_shape_always_answered_with_500_is_classified_not_retried_forever(keys, mk, sleeps) -> None:
    gateway = Gateway(mk, tools_fail=True)
    client = make(mk, gateway, sleeps, attempts=6)
    await client.complete(ModelRequest(messages=MESSAGES, context=CTX))  # no tools: learns the string form
    with pytest.raises(InfrastructureError) as info:
        await client.complete(ModelRequest(messages=MESSAGES, tools=TOOLS, context=CTX))
    err = info.value
    assert (err.kind, err.retryable, err.status) == ("rejected_shape", False, 500)
    assert "2 times in a row to this request while other requests succeed" in str(err)
    assert "tools True" in str(err)
    assert len(gateway.bodies) == 3 + 2  # stepping down took 3; then two 500s, not six attempts


async def test_an_outage_is_still_retried_as_one(keys, mk, sleeps) -> None:
    gateway = Gateway(mk, tools_fail=True)
    client = make(mk, gateway, sleeps, attempts=4)
    request = ModelRequest(messages=[ChatMessage(role="user", content="Hi")], tools=TOOLS, context=CTX)
    with pytest.raises(InfrastructureError) as info:
        await client.complete(request)  # nothing ever succeeded: maybe an outage, so retried
    assert info.value.kind == "server_error" and "failed after 4 attempts" in str(info.value)
    assert len(gateway.bodies) == 4


def test_first_user_message_auto_is_the_recorded_call_connected_turn(keys) -> None:
    from callbench.models.base import first_user_message

    assert first_user_message(AnthropicClient("anthropic:m", ModelSettings())) == "[call connected]"
    with pytest.raises(ValueError, match="first_user_message: none is not possible here"):
        AnthropicClient("anthropic:m", ModelSettings(first_user_message="none"))
    text = ModelSettings(first_user_message="text", first_user_message_text="Namaste")
    assert first_user_message(AnthropicClient("anthropic:m", text)) == "Namaste"


def test_the_agents_first_turn_on_anthropic(keys) -> None:
    """The agent's convention is the default of ``auto``, except ``none``: the Messages API needs a
    user turn first, so the adapter's recorded ``[call connected]`` stays."""
    from callbench.models.base import first_user_message
    from callbench.models.remote.anthropic_client import AnthropicClient

    auto = AnthropicClient("anthropic:m", ModelSettings())
    assert first_user_message(auto, "none") == "[call connected]"
    assert first_user_message(auto, "empty") == ""
    assert first_user_message(auto, "text", "Hello?") == "Hello?"
    said = ModelSettings(first_user_message="text", first_user_message_text="Hi")
    text = AnthropicClient("anthropic:m", said)
    assert first_user_message(text, "empty") == "Hi"  # the role setting over the agent


def test_first_user_message_text_is_checked() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="first_user_message: text needs first_user_message_text"):
        ModelSettings(first_user_message="text")
    with pytest.raises(ValidationError, match="only used with first_user_message: text"):
        ModelSettings(first_user_message="empty", first_user_message_text="hi")
