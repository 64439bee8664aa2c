"""The OpenAI adapter against recorded request payloads (mock transport, no network)."""

from __future__ import annotations

import json
import random

import httpx2
import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    ToolCall,
    ToolSchema,
    request_seed,
)
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.retry import RetryPolicy

CTX = RequestContext(role="candidate", episode_id="ep1")
LOOKUP = ToolSchema(
    name="lookup",
    description="Look up an account.",
    parameters={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "type": "object",
        "properties": {
            "account": {"type": "string", "examples": ["123"], "default": "0"},
            "default": {"type": "boolean", "description": "A property named default."},
            "when": {"type": "string", "format": "iso-week"},
        },
        "required": ["account"],
    },
)
CONVERSATION = [
    ChatMessage(role="system", content="You are an agent."),
    ChatMessage(role="assistant", content="Hello, how can I help?"),
    ChatMessage(role="system", content="Speak briefly."),
    ChatMessage(role="user", content="Check 123 and 456."),
    ChatMessage(
        role="assistant",
        content=None,
        tool_calls=[
            ToolCall(id="dup", name="lookup", arguments='{"account": "123"}'),
            ToolCall(id="dup", name="lookup", arguments='{"account": "456"}'),
            ToolCall(id="c3", name="lookup", arguments='{"account": "789"}'),
        ],
    ),
    # results arrive out of order; the duplicate id is answered twice, in call order
    ChatMessage(role="tool", tool_call_id="c3", content='{"owner": "C"}'),
    ChatMessage(role="tool", tool_call_id="dup", content='{"owner": "A"}'),
    ChatMessage(role="tool", tool_call_id="dup", content='{"owner": "B"}'),
]


def make(
    mk, rec, settings: ModelSettings | None = None, spec: str = "openai:gpt-4o", sleeps=None
) -> OpenAIClient:
    kwargs = {"sleep": sleeps} if sleeps is not None else {}
    return OpenAIClient(
        spec,
        settings or ModelSettings(),
        http_client=rec.client(),
        retry_policy=RetryPolicy(max_attempts=3),
        rng=random.Random(0),
        **kwargs,
    )


async def test_payload_shapes(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.openai_completion("Both found.")))
    client = make(mk, rec)
    await client.complete(ModelRequest(messages=CONVERSATION, tools=[LOOKUP], context=CTX))
    body = rec.bodies[0]
    msgs = body["messages"]
    assert msgs[0] == {"role": "system", "content": "You are an agent.\n\nSpeak briefly."}
    assert [m["role"] for m in msgs] == ["system", "assistant", "user", "assistant", "tool", "tool", "tool"]
    calls = msgs[3]["tool_calls"]
    assert msgs[3]["content"] is None  # tool calls only: null, not ""
    assert [c["id"] for c in calls] == ["dup", "dup__2", "c3"]
    assert calls[0] == {
        "id": "dup",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"account": "123"}'},
    }
    # results right after the calls, in call order, with the renamed duplicate id
    assert [(m["tool_call_id"], m["content"]) for m in msgs[4:]] == [
        ("dup", '{"owner": "A"}'),
        ("dup__2", '{"owner": "B"}'),
        ("c3", '{"owner": "C"}'),
    ]
    params = body["tools"][0]["function"]["parameters"]
    assert body["tools"][0]["type"] == "function"
    assert "$schema" not in params and "$id" not in params
    account = params["properties"]["account"]
    assert "examples" not in account and "default" not in account
    assert account["description"] == 'Default: "0".'
    assert "default" in params["properties"]  # a property named default is kept
    assert "format" not in params["properties"]["when"]
    assert params["properties"]["when"]["description"] == "Format: iso-week."
    assert "response_format" not in body and "temperature" not in body


async def test_settings_mapping_official_endpoint(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.openai_completion()))
    settings = ModelSettings(
        temperature=0.7,
        top_p=0.9,
        top_k=20,
        seed=7,
        max_tokens=300,
        reasoning_effort="low",
        extra_headers={"X-Title": "callbench"},
    )
    await make(mk, rec, settings).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    body = rec.bodies[0]
    assert (body["temperature"], body["top_p"]) == (0.7, 0.9)
    assert body["seed"] == request_seed(settings, ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body
    assert body["reasoning_effort"] == "low"
    assert body["top_k"] == 20  # extra_body is merged into the JSON body
    assert rec.requests[0].headers["X-Title"] == "callbench"
    assert rec.requests[0].headers["Authorization"] == f"Bearer {keys}"
    assert str(rec.requests[0].url) == "https://api.openai.com/v1/chat/completions"


async def test_compatible_server_without_key(monkeypatch, mk):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match=r"openai:llama3.*OPENAI_API_KEY"):
        OpenAIClient("openai:llama3", ModelSettings())
    rec = mk.Recorder(mk.json_response(mk.openai_completion(model="llama3")))
    client = make(
        mk, rec, ModelSettings(base_url="http://localhost:11434/v1", max_tokens=50), spec="openai:llama3"
    )
    response = await client.complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert str(rec.requests[0].url) == "http://localhost:11434/v1/chat/completions"
    assert rec.requests[0].headers["Authorization"] == "Bearer not-needed"
    assert rec.bodies[0]["max_tokens"] == 50 and "max_completion_tokens" not in rec.bodies[0]
    assert response.usage.cost_usd is None  # a self-hosted model has no known price


async def test_env_base_url_is_honoured(monkeypatch, mk):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://vllm.internal:8000/v1")
    rec = mk.Recorder(mk.json_response(mk.openai_completion()))
    await make(mk, rec, spec="openai:qwen").complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert rec.requests[0].url.host == "vllm.internal"


async def test_response_parsing_usage_and_cost(keys, mk):
    rec = mk.Recorder(
        mk.json_response(
            mk.openai_completion(
                None,
                [("call_a", "lookup", '{"account": "1"}'), ("call_b", "lookup", '{"account": "2"}')],
                prompt=1_000_000,
                completion=100_000,
                cached=400_000,
                finish="tool_calls",
            )
        )
    )
    response = await make(mk, rec).complete(
        ModelRequest(messages=CONVERSATION[:4], tools=[LOOKUP], context=CTX)
    )
    assert response.content is None
    assert [(c.id, c.arguments) for c in response.tool_calls] == [
        ("call_a", '{"account": "1"}'),
        ("call_b", '{"account": "2"}'),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.model == "gpt-4o-2024-08-06"
    u = response.usage
    assert (u.input_tokens, u.output_tokens, u.cached_input_tokens, u.calls) == (
        1_000_000,
        100_000,
        400_000,
        1,
    )
    # gpt-4o: 600k * 2.50 + 400k * 1.25 + 100k * 10.00 per million
    assert u.cost_usd == pytest.approx(1.5 + 0.5 + 1.0)


async def test_unknown_model_cost_is_unknown(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.openai_completion(model="gpt-99")))
    response = await make(mk, rec, spec="openai:gpt-99").complete(
        ModelRequest(messages=CONVERSATION[:4], context=CTX)
    )
    assert response.usage.cost_usd is None


SCHEMA_STRICT = {
    "type": "object",
    "properties": {"speech": {"type": "string"}, "done": {"type": "boolean"}},
    "required": ["speech", "done"],
    "additionalProperties": False,
}
SCHEMA_LOOSE = {
    "type": "object",
    "properties": {"speech": {"type": "string", "minLength": 1}},
    "required": ["speech"],
}


async def test_json_output_request_and_validation(keys, mk):
    good = mk.json_response(mk.openai_completion('{"speech": "Hi", "done": false}'))
    rec = mk.Recorder(good)
    req = ModelRequest(
        messages=CONVERSATION[:4],
        response_schema=SCHEMA_STRICT,
        response_schema_name="caller turn",
        context=RequestContext(role="caller"),
    )
    response = await make(mk, rec).complete(req)
    assert json.loads(response.content or "") == {"speech": "Hi", "done": False}
    fmt = rec.bodies[0]["response_format"]
    assert fmt == {
        "type": "json_schema",
        "json_schema": {"name": "caller_turn", "schema": SCHEMA_STRICT, "strict": True},
    }
    rec2 = mk.Recorder(mk.json_response(mk.openai_completion('{"speech": ""}')))
    with pytest.raises(ModelOutputError, match="schema at speech") as info:
        await make(mk, rec2).complete(req.model_copy(update={"response_schema": SCHEMA_LOOSE}))
    assert rec2.bodies[0]["response_format"]["json_schema"]["strict"] is False
    assert info.value.raw == '{"speech": ""}'
    assert info.value.usage is not None and info.value.usage.output_tokens == 20
    rec3 = mk.Recorder(mk.json_response(mk.openai_completion('{"speech": "Hi", "do')))
    with pytest.raises(ModelOutputError, match="not valid JSON") as info3:
        await make(mk, rec3).complete(req)
    assert info3.value.raw == '{"speech": "Hi", "do'
    assert len(rec3.requests) == 1  # model output errors are not retried by the adapter


async def test_retry_after_then_success(keys, mk, sleeps):
    rec = mk.Recorder(
        mk.json_response(
            {"error": {"message": "slow down", "type": "rate_limit"}}, 429, {"retry-after": "7"}
        ),
        mk.json_response({"error": {"message": "boom", "type": "server"}}, 503),
        mk.json_response(mk.openai_completion("ok")),
    )
    response = await make(mk, rec, sleeps=sleeps).complete(
        ModelRequest(messages=CONVERSATION[:4], context=CTX)
    )
    assert response.content == "ok"
    assert len(rec.requests) == 3
    assert sleeps.delays[0] >= 7.0  # Retry-After honoured
    assert 0.0 <= sleeps.delays[1] <= 2.0  # second retry: full jitter under base * 2
    assert response.usage.calls == 1


async def test_retries_exhausted_and_timeouts(keys, mk, sleeps):
    rec = mk.Recorder(httpx2.ReadTimeout("timed out"))
    with pytest.raises(InfrastructureError, match=r"after 3 attempts.*timed out") as info:
        await make(mk, rec, sleeps=sleeps).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert len(rec.requests) == 3 and len(sleeps.delays) == 2
    assert info.value.retryable is False
    rec2 = mk.Recorder(httpx2.ConnectError("refused"))
    with pytest.raises(InfrastructureError, match="connection error"):
        await make(mk, rec2, sleeps=sleeps).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert len(rec2.requests) == 3


async def test_auth_error_not_retried_and_key_redacted(keys, mk, sleeps):
    body = {"error": {"message": f"Incorrect API key provided: {keys}.", "type": "invalid_request_error"}}
    rec = mk.Recorder(mk.json_response(body, 401))
    with pytest.raises(InfrastructureError) as info:
        await make(mk, rec, sleeps=sleeps).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert len(rec.requests) == 1 and sleeps.delays == []
    assert info.value.status == 401 and info.value.retryable is False
    assert keys not in str(info.value)
    assert "[redacted]" in str(info.value) and "OPENAI_API_KEY" in str(info.value)


async def test_bad_request_not_retried(keys, mk, sleeps):
    rec = mk.Recorder(
        mk.json_response({"error": {"message": "Invalid schema", "type": "invalid_request_error"}}, 400)
    )
    with pytest.raises(InfrastructureError, match="HTTP 400") as info:
        await make(mk, rec, sleeps=sleeps).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert info.value.retryable is False and len(rec.requests) == 1


async def test_key_never_in_response(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.openai_completion("fine")))
    response = await make(mk, rec).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert keys not in response.model_dump_json()
    assert keys not in json.dumps(rec.bodies[0])


async def test_empty_content_is_none_and_refusal_is_speech(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.openai_completion("", [("c1", "lookup", "{}")])))
    response = await make(mk, rec).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert response.content is None and len(response.tool_calls) == 1
    data = mk.openai_completion(None)
    data["choices"][0]["message"]["refusal"] = "I can't help with that."
    rec2 = mk.Recorder(mk.json_response(data))
    response2 = await make(mk, rec2).complete(ModelRequest(messages=CONVERSATION[:4], context=CTX))
    assert response2.content == "I can't help with that."


def test_request_seed_differs_by_repeat_and_is_reproducible() -> None:
    """Regression: one fixed seed per run made the repeats of a scenario draw the same sample on a
    seeded OpenAI-compatible server, so repeats were copies and intervals too narrow."""
    settings = ModelSettings(seed=7)

    def seed(episode: str, turn: int = 1) -> int:
        ctx = RequestContext(role="candidate", episode_id=episode, turn=turn)
        return request_seed(settings, ModelRequest(messages=CONVERSATION[:2], context=ctx))

    assert seed("c--s--r0") == seed("c--s--r0")
    assert len({seed("c--s--r0"), seed("c--s--r1"), seed("c--s--r0", turn=2)}) == 3
    assert 0 <= seed("c--s--r0") < 2**31
    other = ModelRequest(
        messages=CONVERSATION[:2], context=RequestContext(role="candidate", episode_id="c--s--r0", turn=1)
    )
    assert request_seed(ModelSettings(seed=8), other) != seed("c--s--r0")
