"""The Anthropic adapter against recorded request payloads (mock transport, no network)."""

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
from callbench.models.remote.anthropic_client import AnthropicClient, anthropic_request_body
from callbench.models.remote.retry import RetryPolicy

CTX = RequestContext(role="candidate", episode_id="ep1")
TOOLS = [
    ToolSchema(
        name="lookup",
        description="Look up.",
        parameters={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"account": {"type": "string", "examples": ["1"]}},
            "required": ["account"],
        },
    ),
    ToolSchema(name="end_call", description="End the call.", parameters={"properties": {}}),
]
MESSAGES = [
    ChatMessage(role="system", content="Rule one."),
    ChatMessage(role="assistant", content="Hello, bank here."),
    ChatMessage(role="user", content="Check two accounts."),
    ChatMessage(role="system", content="Rule two."),
    ChatMessage(
        role="assistant",
        content="",
        tool_calls=[
            ToolCall(id="t1", name="lookup", arguments='{"account": "1"}'),
            ToolCall(id="t1", name="lookup", arguments='{"account": "2"}'),
        ],
    ),
    ChatMessage(role="tool", tool_call_id="t1", content='{"ok": 1}'),
    ChatMessage(role="tool", tool_call_id="t1", content='{"ok": 2}'),
    ChatMessage(role="user", content="Thanks"),
    ChatMessage(role="user", content="and goodbye"),
]


def make(
    mk, rec, settings: ModelSettings | None = None, spec: str = "anthropic:claude-sonnet-4-6", sleeps=None
) -> AnthropicClient:
    kwargs = {"sleep": sleeps} if sleeps is not None else {}
    return AnthropicClient(
        spec,
        settings or ModelSettings(),
        http_client=rec.client(),
        retry_policy=RetryPolicy(max_attempts=3),
        rng=random.Random(0),
        **kwargs,
    )


async def test_payload_shapes(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.anthropic_message([{"type": "text", "text": "Done."}])))
    await make(mk, rec).complete(ModelRequest(messages=MESSAGES, tools=TOOLS, context=CTX))
    body = rec.bodies[0]
    assert body["system"] == [
        {"type": "text", "text": "Rule one.\n\nRule two.", "cache_control": {"type": "ephemeral"}}
    ]
    msgs = body["messages"]
    # the agent speaks first: a user turn is put before it
    assert msgs[0] == {"role": "user", "content": [{"type": "text", "text": "[call connected]"}]}
    assert msgs[1] == {"role": "assistant", "content": [{"type": "text", "text": "Hello, bank here."}]}
    assert msgs[2]["role"] == "user"
    # only tool_use blocks, no empty text block; the duplicate id is renamed
    assert msgs[3] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"account": "1"}},
            {"type": "tool_use", "id": "t1__2", "name": "lookup", "input": {"account": "2"}},
        ],
    }
    # both results and the following caller texts in one user message, results first, in order
    assert msgs[4] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": '{"ok": 1}'},
            {"type": "tool_result", "tool_use_id": "t1__2", "content": '{"ok": 2}'},
            {"type": "text", "text": "Thanks"},
            {"type": "text", "text": "and goodbye", "cache_control": {"type": "ephemeral"}},
        ],
    }
    assert len(msgs) == 5
    tools = body["tools"]
    assert [t["name"] for t in tools] == ["lookup", "end_call"]
    assert "$schema" not in tools[0]["input_schema"]
    assert "examples" not in tools[0]["input_schema"]["properties"]["account"]
    assert tools[1]["input_schema"] == {"type": "object", "properties": {}}
    assert "cache_control" not in tools[0] and tools[1]["cache_control"] == {"type": "ephemeral"}
    assert body["max_tokens"] == 4096
    assert "tool_choice" not in body and "temperature" not in body
    assert rec.requests[0].headers["authorization"] == f"Bearer {keys}"


def test_the_tool_list_is_built_once_for_the_same_tools_and_never_changed() -> None:
    """Every request of a run carries the same tool objects: their entries are one shared list
    (encoded once: models/remote/prepared.py), which a request with a response schema (its
    answer tool added, the breakpoint moved to it) leaves as it was."""
    def body(**extra: object) -> dict[str, object]:
        request = ModelRequest(messages=MESSAGES[:3], tools=TOOLS, context=CTX, **extra)  # type: ignore[arg-type]
        return anthropic_request_body(request, "claude-x", ModelSettings())

    first, second = body()["tools"], body()["tools"]
    assert first is second
    snapshot = json.dumps(first)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    structured = body(response_schema=schema)["tools"]
    assert isinstance(structured, list) and structured is not first
    assert [t["name"] for t in structured][:2] == ["lookup", "end_call"] and len(structured) == 3
    assert [("cache_control" in t) for t in structured] == [False, False, True]
    assert json.dumps(first) == snapshot and first[-1]["cache_control"] == {"type": "ephemeral"}  # type: ignore[index]


async def test_settings_mapping(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.anthropic_message([{"type": "text", "text": "x"}])))
    settings = ModelSettings(
        temperature=0.7,
        top_p=0.9,
        top_k=20,
        seed=3,
        max_tokens=500,
        reasoning_effort="low",
        extra_headers={"anthropic-beta": "some-beta"},
    )
    await make(mk, rec, settings).complete(ModelRequest(messages=MESSAGES[:3], context=CTX))
    body = rec.bodies[0]
    assert (body["temperature"], body["top_p"], body["top_k"], body["max_tokens"]) == (0.7, 0.9, 20, 500)
    assert body["output_config"] == {"effort": "low"}
    assert "seed" not in body  # the Messages API has no seed
    assert rec.requests[0].headers["anthropic-beta"] == "some-beta"


async def test_trailing_assistant_gets_a_user_turn(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.anthropic_message([{"type": "text", "text": "x"}])))
    msgs = [
        ChatMessage(role="system", content="S"),
        ChatMessage(role="user", content=""),
        ChatMessage(role="assistant", content="Hi"),
    ]
    await make(mk, rec).complete(ModelRequest(messages=msgs, context=CTX))
    sent = rec.bodies[0]["messages"]
    assert sent[0] == {"role": "user", "content": [{"type": "text", "text": "[silence]"}]}
    assert sent[-1] == {"role": "user", "content": [{"type": "text", "text": "[silence]"}]}
    # the cache mark sits on the last real message, not on the added "[silence]" turn
    assert sent[-2]["content"][-1] == {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}


async def test_response_parsing_usage_and_cost(keys, mk):
    blocks = [
        {"type": "text", "text": "One moment."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"account": "1"}},
    ]
    rec = mk.Recorder(
        mk.json_response(
            mk.anthropic_message(
                blocks,
                input_tokens=100_000,
                output_tokens=10_000,
                read=800_000,
                written=100_000,
                stop="tool_use",
            )
        )
    )
    response = await make(mk, rec).complete(ModelRequest(messages=MESSAGES[:3], tools=TOOLS, context=CTX))
    assert response.content == "One moment."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("toolu_1", "lookup", {"account": "1"})
    ]
    assert response.finish_reason == "tool_use"
    u = response.usage
    assert (u.input_tokens, u.cached_input_tokens, u.cache_write_input_tokens, u.output_tokens) == (
        1_000_000,
        800_000,
        100_000,
        10_000,
    )
    # sonnet 4.6: 100k*3 + 800k*0.30 + 100k*3.75 + 10k*15, per million
    assert u.cost_usd == pytest.approx(0.30 + 0.24 + 0.375 + 0.15)


SCHEMA = {"type": "object", "properties": {"label": {"enum": ["met", "not_met"]}}, "required": ["label"]}


async def test_json_output_via_forced_tool(keys, mk):
    blocks = [{"type": "tool_use", "id": "toolu_9", "name": "judgement", "input": {"label": "met"}}]
    rec = mk.Recorder(mk.json_response(mk.anthropic_message(blocks, stop="tool_use")))
    req = ModelRequest(
        messages=MESSAGES[:3],
        response_schema=SCHEMA,
        response_schema_name="judgement",
        context=RequestContext(role="task_judge"),
    )
    response = await make(mk, rec).complete(req)
    assert json.loads(response.content or "") == {"label": "met"}
    assert response.tool_calls == []
    body = rec.bodies[0]
    assert body["tool_choice"] == {"type": "tool", "name": "judgement"}
    assert body["tools"][-1]["name"] == "judgement"
    assert body["tools"][-1]["input_schema"] == SCHEMA
    bad = [{"type": "tool_use", "id": "toolu_9", "name": "judgement", "input": {"label": "maybe"}}]
    rec2 = mk.Recorder(mk.json_response(mk.anthropic_message(bad)))
    with pytest.raises(ModelOutputError, match="label"):
        await make(mk, rec2).complete(req)


async def test_non_object_schema_is_wrapped(keys, mk):
    schema = {"type": "array", "items": {"type": "integer"}}
    blocks = [{"type": "tool_use", "id": "toolu_9", "name": "output", "input": {"value": [1, 2]}}]
    rec = mk.Recorder(mk.json_response(mk.anthropic_message(blocks)))
    req = ModelRequest(messages=MESSAGES[:3], response_schema=schema, context=RequestContext(role="caller"))
    response = await make(mk, rec).complete(req)
    assert json.loads(response.content or "") == [1, 2]
    assert rec.bodies[0]["tools"][0]["input_schema"] == {
        "type": "object",
        "properties": {"value": schema},
        "required": ["value"],
    }


async def test_overloaded_retried_with_retry_after_ms(keys, mk, sleeps):
    rec = mk.Recorder(
        mk.json_response(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            529,
            {"retry-after-ms": "2500"},
        ),
        mk.json_response(mk.anthropic_message([{"type": "text", "text": "ok"}])),
    )
    response = await make(mk, rec, sleeps=sleeps).complete(ModelRequest(messages=MESSAGES[:3], context=CTX))
    assert response.content == "ok" and len(rec.requests) == 2
    assert sleeps.delays[0] >= 2.5


async def test_auth_error_redacted(keys, mk, sleeps):
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {keys}"},
    }
    rec = mk.Recorder(mk.json_response(body, 401))
    with pytest.raises(InfrastructureError) as info:
        await make(mk, rec, sleeps=sleeps).complete(ModelRequest(messages=MESSAGES[:3], context=CTX))
    assert keys not in str(info.value) and "ANTHROPIC_API_KEY" in str(info.value)
    assert len(rec.requests) == 1


def test_missing_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match=r"anthropic:claude-x.*ANTHROPIC_API_KEY"):
        AnthropicClient("anthropic:claude-x", ModelSettings())


async def test_history_arguments_that_are_not_objects(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.anthropic_message([{"type": "text", "text": "x"}])))
    msgs = [
        ChatMessage(role="user", content="hi"),
        ChatMessage(
            role="assistant",
            tool_calls=[
                ToolCall(id="a", name="end_call", arguments=""),
                ToolCall(id="b", name="lookup", arguments='{"account": '),
                ToolCall(id="c", name="lookup", arguments="[1]"),
            ],
        ),
        ChatMessage(role="tool", tool_call_id="a", content=""),
        ChatMessage(role="tool", tool_call_id="b", content="error"),
        ChatMessage(role="tool", tool_call_id="c", content="error"),
    ]
    await make(mk, rec).complete(ModelRequest(messages=msgs, tools=TOOLS, context=CTX))
    sent = rec.bodies[0]["messages"]
    assert [b["input"] for b in sent[1]["content"]] == [
        {},
        {"_raw_arguments": '{"account": '},
        {"_raw_arguments": "[1]"},
    ]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "a"}  # empty result: no content


async def test_static_part_of_the_system_prompt_is_its_own_cache_breakpoint(keys, mk):
    rec = mk.Recorder(mk.json_response(mk.anthropic_message([{"type": "text", "text": "Done."}])))
    doc = "Rules.\nMore rules.\n## Call context\nToday is Monday."
    messages = [ChatMessage(role="system", content=doc), ChatMessage(role="user", content="Hello?")]
    request = ModelRequest(
        messages=messages, tools=TOOLS, context=CTX, static_system_chars=doc.index("Monday")
    )
    await make(mk, rec).complete(request)
    body = rec.bodies[0]
    # split at the line break before the first call-specific character
    mark = {"cache_control": {"type": "ephemeral"}}
    assert body["system"] == [
        {"type": "text", "text": "Rules.\nMore rules.\n## Call context\n", **mark},
        {"type": "text", "text": "Today is Monday.", **mark},
    ]
    breakpoints = json.dumps(body).count('"cache_control"')
    assert breakpoints == 4  # tools, two system blocks, the last message: the API's maximum


@pytest.mark.parametrize("static_chars", [0, 3, 10_000])
def test_system_prompt_stays_one_block_without_a_usable_split(static_chars: int) -> None:
    from callbench.models.remote.anthropic_client import system_blocks

    doc = "Rules.\nToday is Monday."
    # 0: unknown; 3: no line break before it; past the end: no call-specific part
    assert system_blocks(doc, static_chars) == [
        {"type": "text", "text": doc, "cache_control": {"type": "ephemeral"}}
    ]
