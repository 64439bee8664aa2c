"""The OpenAI adapter against a loopback fake of llama-cpp-python's server:
structured-output and tool-call-message negotiation remembered per client, explicit tool_choice,
request-validation errors not retried as outages, tool calls returned as text, timings."""

from __future__ import annotations

import json
import random

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
)
from callbench.models.faults import collect_faults
from callbench.models.remote.negotiation import request_problem
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.retry import RetryPolicy
from fakes.llama_like_server import LlamaLikeServer

SCHEMA = {
    "type": "object",
    "properties": {"speech": {"type": "string"}, "done": {"type": "boolean"}},
    "required": ["speech", "done"],
    "additionalProperties": False,
}
LOOKUP = ToolSchema(
    name="lookup_order",
    description="Look up an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)
ASK = [
    ChatMessage(role="system", content="You are a shop agent."),
    ChatMessage(role="user", content="Where is my order A123?"),
]
AFTER_CALL = [
    *ASK,
    ChatMessage(
        role="assistant",
        content=None,
        tool_calls=[ToolCall(id="c1", name="lookup_order", arguments='{"order_id": "A123"}')],
    ),
    ChatMessage(role="tool", tool_call_id="c1", content='{"status": "shipped"}'),
]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def client(url: str, **settings: object) -> OpenAIClient:
    async def no_sleep(_s: float) -> None:
        return None

    return OpenAIClient(
        "openai:local-0.5b",
        ModelSettings(base_url=url, **settings),
        retry_policy=RetryPolicy(max_attempts=3),
        rng=random.Random(0),
        sleep=no_sleep,
    )


def caller_request() -> ModelRequest:
    return ModelRequest(
        messages=ASK,
        response_schema=SCHEMA,
        response_schema_name="caller_turn",
        context=RequestContext(role="caller"),
    )


def candidate_request(messages: list[ChatMessage] = ASK) -> ModelRequest:
    return ModelRequest(messages=messages, tools=[LOOKUP], context=RequestContext(role="candidate"))


async def test_json_schema_rejected_then_json_object_with_schema_remembered() -> None:
    with LlamaLikeServer() as server:
        c = client(server.url)
        with collect_faults() as ledger:
            first = await c.complete(caller_request())
            second = await c.complete(caller_request())
        await c.aclose()
    assert json.loads(first.content or "")["done"] in (True, False)
    assert second.content == first.content
    # one rejection, learnt once: json_schema, json_object, json_object
    assert server.statuses() == [500, 200, 200]
    formats = [e.body["response_format"] for e in server.log]
    assert formats[0]["type"] == "json_schema"
    assert formats[1] == {"type": "json_object", "schema": SCHEMA} == formats[2]
    system = server.log[1].body["messages"][0]["content"]
    assert system.startswith("You are a shop agent.") and json.dumps(SCHEMA) in system
    assert c.capabilities.structured == "json_object"
    assert "Input should be 'text' or 'json_object'" in c.capabilities.learnt[0]
    counts = ledger.roles["caller"]
    assert (counts.requests, counts.retries, counts.faults) == (3, 0, {"invalid_request": 1})


async def test_validation_error_with_nothing_left_to_try_fails_at_once_quoting_the_server() -> None:
    with LlamaLikeServer() as server:
        c = client(server.url, structured_output="json_schema")
        with pytest.raises(InfrastructureError) as info:
            await c.complete(caller_request())
        await c.aclose()
    assert server.statuses() == [500]  # not retried as an outage
    err = info.value
    assert (err.kind, err.status, err.retryable) == ("invalid_request", 500, False)
    assert "response_format.type: Input should be 'text' or 'json_object'" in str(err)


async def test_schema_in_the_prompt_only_is_validated_and_unfenced() -> None:
    with LlamaLikeServer() as server:
        c = client(server.url, structured_output="prompt")
        reply = await c.complete(caller_request())
        await c.aclose()
    body = server.log[0].body
    assert "response_format" not in body and server.statuses() == [200]
    assert not reply.content.startswith("```")  # type: ignore[union-attr]
    assert set(json.loads(reply.content or "")) == {"speech", "done"}


async def test_null_content_rejected_then_empty_string_remembered() -> None:
    with LlamaLikeServer() as server:
        c = client(server.url)
        await c.complete(candidate_request(AFTER_CALL))
        await c.complete(candidate_request(AFTER_CALL))
        await c.aclose()
    assert server.statuses() == [500, 200, 200]
    sent = [e.body["messages"][2] for e in server.log]
    assert [m["content"] for m in sent] == [None, "", ""]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert c.capabilities.content == "empty"


async def test_tool_choice_is_sent_explicitly_and_can_be_omitted() -> None:
    with LlamaLikeServer() as server:
        auto = client(server.url)
        called = await auto.complete(candidate_request())
        omitted = client(server.url, tool_choice="omit")
        spoken = await omitted.complete(candidate_request())
        await auto.aclose()
        await omitted.aclose()
    assert server.log[0].body["tool_choice"] == "auto"
    assert [(t.name, json.loads(t.arguments)) for t in called.tool_calls] == [
        ("lookup_order", {"order_id": ""})
    ]
    assert "tool_choice" not in server.log[1].body
    assert spoken.tool_calls == [] and spoken.content == "Hello, how can I help you today?"


async def test_tool_call_as_text_is_an_output_error_unless_parsing_is_on() -> None:
    with LlamaLikeServer(calls_as="content") as server:
        strict = client(server.url)
        with collect_faults() as ledger, pytest.raises(ModelOutputError) as info:
            await strict.complete(candidate_request())
        parsing = client(server.url, parse_content_tool_calls=True)
        parsed = await parsing.complete(candidate_request())
        await strict.aclose()
        await parsing.aclose()
    assert info.value.kind == "tool_call_in_content"
    assert str(info.value).startswith("tool_call_in_content:") and "lookup_order" in str(info.value)
    assert info.value.raw is not None and '"name": "lookup_order"' in info.value.raw
    assert info.value.usage is not None and info.value.usage.output_tokens == 30
    assert ledger.roles["candidate"].faults == {"tool_call_in_content": 1}
    assert parsed.content is None
    assert [(t.name, t.arguments) for t in parsed.tool_calls] == [("lookup_order", '{"order_id": ""}')]


async def test_generation_speed_leaves_the_prompt_read_out_when_reported() -> None:
    with LlamaLikeServer(timings=True) as server:
        c = client(server.url)
        reply = await c.complete(candidate_request([*AFTER_CALL[:1], ChatMessage(role="user", content="Hi")]))
        await c.aclose()
    assert reply.usage.tokens_per_second == pytest.approx(30 / 1.5)  # predicted_ms, not the 12 s prompt read


def test_request_problem_tells_validation_errors_from_outages() -> None:
    fastapi = json.dumps(
        {
            "detail": [
                {"loc": ["body", "tool_choice"], "msg": "Input should be 'auto'", "type": "literal_error"}
            ]
        }
    )
    p = request_problem(422, fastapi)
    assert (
        p is not None and p.messages == ["tool_choice: Input should be 'auto'"] and p.mentions("tool_choice")
    )
    openai_400 = json.dumps(
        {
            "error": {
                "message": "Invalid parameter: 'response_format' of type 'json_schema' "
                "is not supported with this model.",
                "type": "invalid_request_error",
                "param": "response_format",
            }
        }
    )
    p2 = request_problem(400, openai_400)
    assert p2 is not None and p2.mentions("response_format")
    outage = json.dumps({"error": {"message": "The server had an error", "type": "server_error"}})
    assert request_problem(500, outage) is None
    assert request_problem(503, "<html>Bad gateway</html>") is None
    assert request_problem(429, openai_400) is None  # a rate limit is never a validation error


def test_new_settings_at_their_defaults_leave_candidate_ids_and_cache_keys_unchanged() -> None:
    import hashlib

    from callbench.models.base import OMITTED_AT_DEFAULT, OPERATIONAL_SETTINGS
    from callbench.models.cache import request_fingerprint
    from callbench.runs.plan import candidate_slug

    settings = ModelSettings(temperature=0.5)
    before = settings.model_dump(mode="json", exclude=set(OPERATIONAL_SETTINGS) | set(OMITTED_AT_DEFAULT))
    digest = hashlib.sha256(json.dumps(["openai:m", before], sort_keys=True).encode()).hexdigest()[:8]
    assert candidate_slug("openai:m", settings) == f"openai_m-{digest}"
    changed = ModelSettings(temperature=0.5, tool_choice="required")
    assert candidate_slug("openai:m", changed) != candidate_slug("openai:m", settings)
    req = caller_request()
    assert request_fingerprint("openai:m", settings, req) != request_fingerprint(
        "openai:m", ModelSettings(temperature=0.5, structured_output="prompt"), req
    )
