"""Streamed answers equal the plain answers of the same fake, for every content shape, on both
providers and both transports; faults in the middle of a stream are the provider's; an endpoint
that does not stream is negotiated down; timings are measured per attempt; concurrent requests
are not queued behind each other."""

from __future__ import annotations

import asyncio
import json
import statistics
from typing import Any

import pytest

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
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.transport import TRANSPORT_ENV
from fakes.streaming_wire import LatencyProfile, WireServer
from waiting import limit, scale

TOOLS = [
    ToolSchema(
        name="lookup",
        description="Look up.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    ),
    ToolSchema(name="book", description="Book.", parameters={"type": "object", "properties": {}}),
]
SPEECH = "Namaste! Aapka booking number 4 2 1 hai. Kuch aur?"


def _openai(content: str | None, calls: list[tuple[str, dict[str, Any]]], refusal: str | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ]
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 31, "completion_tokens": 17, "total_tokens": 48},
    }


def _anthropic(content: str | None, calls: list[tuple[str, dict[str, Any]]], stop: str | None = None) -> dict:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a} for i, (n, a) in enumerate(calls)
    ]
    return {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "model": "fake",
        "content": blocks,
        "stop_reason": stop or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": 31, "output_tokens": 17},
    }


CALL = ("lookup", {"q": "booking ४२१"})
SHAPES: dict[str, tuple[dict, dict]] = {
    "speech": (_openai(SPEECH, []), _anthropic(SPEECH, [])),
    "tools": (_openai(None, [CALL]), _anthropic(None, [CALL])),
    "both": (_openai("One moment.", [CALL]), _anthropic("One moment.", [CALL])),
    "several_tools": (_openai(None, [CALL, ("book", {})]), _anthropic(None, [CALL, ("book", {})])),
    "calls_in_text": (
        _openai('{"name": "lookup", "arguments": {"q": "x"}}', []),
        _anthropic('{"name": "lookup", "arguments": {"q": "x"}}', []),
    ),
    "refusal": (
        _openai(None, [], refusal="I can't help with that."),
        _anthropic("I can't help with that.", [], stop="refusal"),
    ),
}


def _request(role: str = "candidate") -> ModelRequest:
    return ModelRequest(
        messages=[ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="hello")],
        tools=TOOLS,
        context=RequestContext(role=role, episode_id="e1"),
    )  # type: ignore[arg-type]


def _client(dialect: str, server: WireServer, stream: str, **extra: Any) -> Any:
    # no request here is meant to time out: the limit is far above what a loaded machine needs
    # (a timeout would be a retry, and the counts of attempts and requests would be off)
    settings = ModelSettings(
        base_url=server.root if dialect == "anthropic" else server.url,
        timeout_s=limit(120.0),
        max_attempts=3,
        retry_base_delay_s=0.0,
        stream=stream,
        **extra,
    )  # type: ignore[arg-type]
    cls = AnthropicClient if dialect == "anthropic" else OpenAIClient
    return cls(f"{dialect}:fake", settings)


async def _answer(dialect: str, shape: str, stream: str, **extra: Any) -> Any:
    openai_answer, anthropic_answer = SHAPES[shape]
    with WireServer(openai_answer, anthropic_answer) as server:
        client = _client(dialect, server, stream, **extra)
        try:
            return await client.complete(_request()), server.streamed
        except ModelOutputError as err:
            return (type(err).__name__, err.kind, err.raw), server.streamed
        finally:
            await client.aclose()


@pytest.fixture(params=["aiohttp", "httpx2"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TRANSPORT_ENV, request.param)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    return str(request.param)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_streamed_answer_equals_the_plain_answer(dialect: str, shape: str, transport: str) -> None:
    extra = {"parse_content_tool_calls": True} if shape == "calls_in_text" else {}
    streamed, sent_a = await _answer(dialect, shape, "on", **extra)
    plain, sent_b = await _answer(dialect, shape, "off", **extra)
    assert sent_a == [True] and sent_b == [False]
    fields = ("content", "tool_calls", "finish_reason", "model")
    assert {f: getattr(streamed, f) for f in fields} == {f: getattr(plain, f) for f in fields}
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (31, 17)
    assert (plain.usage.input_tokens, plain.usage.output_tokens) == (31, 17)
    assert streamed.timing.streamed and not plain.timing.streamed
    if shape in ("speech", "both", "refusal"):
        assert streamed.content
    if shape == "calls_in_text" and dialect == "openai":  # anthropic has no calls-in-text reading
        assert [c.name for c in streamed.tool_calls] == ["lookup"]


async def test_calls_in_text_without_parsing_is_the_same_output_error_streamed_or_not(transport: str) -> None:
    streamed, _ = await _answer("openai", "calls_in_text", "on")
    plain, _ = await _answer("openai", "calls_in_text", "off")
    assert streamed == plain and streamed[1] == "tool_call_in_content"


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("cut", "reset"),
        ("error_event", "error_body"),
        ("not_json", "malformed_body"),
        ("not_utf8", "not_utf8"),
    ],
)
async def test_a_fault_mid_stream_is_the_providers_and_retried(
    dialect: str, fault: str, kind: str, transport: str
) -> None:
    with WireServer(*SHAPES["speech"], fault=fault, fault_times=1) as server:
        client = _client(dialect, server, "on")
        with collect_faults() as ledger:
            response = await client.complete(_request())
        await client.aclose()
    assert response.content == SPEECH  # the whole answer of the retry, never the cut one
    assert ledger.roles["candidate"].faults == {kind: 1}
    assert [a.fault for a in response.timing.attempts] == [kind, None]
    assert response.timing.attempts[1].sent_s >= response.timing.attempts[0].finished_s


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_stream_ended_before_its_finish_reason_is_cut_and_retried(
    dialect: str, transport: str
) -> None:
    """The end event with no finish (stop) reason before it: llama-cpp-python's server ends a
    streamed reply so when another request waits (its ``interrupt_requests``). The answer is
    incomplete: nothing of it is used, the provider is charged a reset and the retry's answer is
    the one kept."""
    with WireServer(*SHAPES["speech"], fault="done_early", fault_times=1) as server:
        client = _client(dialect, server, "on")
        with collect_faults() as ledger:
            response = await client.complete(_request())
        await client.aclose()
    assert response.content == SPEECH
    assert ledger.roles["candidate"].faults == {"reset": 1}
    assert [a.fault for a in response.timing.attempts] == ["reset", None]
    # a server that never gives the reason: the error says how to run without streaming
    with WireServer(*SHAPES["speech"], fault="done_early", fault_times=99) as server:
        client = _client(dialect, server, "on")
        with pytest.raises(InfrastructureError, match="needs `stream: off` in this role's settings"):
            await client.complete(_request())
        await client.aclose()
        plain = _client(dialect, server, "off")
        assert (await plain.complete(_request())).content == SPEECH
        await plain.aclose()


async def test_a_fault_on_every_attempt_is_an_infrastructure_error(transport: str) -> None:
    with WireServer(*SHAPES["speech"], fault="cut", fault_times=99) as server:
        client = _client("openai", server, "on")
        with pytest.raises(InfrastructureError) as info:
            await client.complete(_request())
        await client.aclose()
    assert info.value.kind == "reset" and "3 attempts" in str(info.value)


async def test_only_the_candidate_streams_by_default(transport: str) -> None:
    with WireServer(*SHAPES["speech"]) as server:
        client = _client("openai", server, "auto")
        await client.complete(_request("candidate"))
        caller = await client.complete(_request("caller"))
        await client.aclose()
    assert server.streamed == [True, False]
    assert caller.timing is not None and not caller.timing.streamed


async def test_time_to_first_token_is_measured(transport: str) -> None:
    profile = LatencyProfile(ttft_s=0.25, sigma=0.3, token_s=0.01, seed=5)
    with WireServer(*SHAPES["speech"], profile=profile) as server:
        client = _client("openai", server, "on")
        answers = await asyncio.gather(*(client.complete(_request()) for _ in range(12)))
        await client.aclose()
    drawn = sorted(server.drawn.values())
    measured = sorted(a.timing.first_speech_s for a in answers)
    # never earlier than the fake's own delay (it sleeps after reading the request), and of its
    # order: the slack is loose so that a loaded machine's scheduling cannot fail it; the accuracy
    # on an idle machine is a benchmark's to measure (benchmarks/latency_bench.py), not a unit test's
    assert all(m - d > -0.005 for m, d in zip(measured, drawn, strict=True)), (measured, drawn)
    assert statistics.median(measured) < statistics.median(drawn) + 1.5 * scale(), (measured, drawn)
    assert all(a.timing.first_token_s < a.timing.waited_s for a in answers)


async def test_concurrent_requests_are_not_queued_behind_each_other(transport: str) -> None:
    """The fake holds every answer until all 12 requests have arrived: a client that sent a request
    only after the previous answer (a pool of one connection, a lock) could never get there, and
    would have called the waiting the model's latency. Event-based, so no load can fail it."""
    with WireServer(*SHAPES["speech"], hold_until=12, hold_s=limit(60)) as server:
        client = _client("openai", server, "on")
        answers = await asyncio.gather(*(client.complete(_request()) for _ in range(12)))
        await client.aclose()
    assert server.held_all == [True] * 12
    assert [a.content for a in answers] == [SPEECH] * 12


async def test_an_endpoint_that_does_not_stream_is_negotiated_down(transport: str) -> None:
    import fakes.streaming_wire as wire

    with WireServer(*SHAPES["speech"]) as server:
        original = wire.write_answer

        def plain(h: Any, dialect: str, answer: Any, **kw: Any) -> float:
            return original(h, dialect, answer, **{**kw, "stream": False})

        wire.write_answer = plain  # type: ignore[assignment]
        try:
            client = _client("openai", server, "on")
            first = await client.complete(_request())
            second = await client.complete(_request())
            await client.aclose()
        finally:
            wire.write_answer = original  # type: ignore[assignment]
    assert server.streamed == [True, False]  # asked once, then never again
    assert first.content == second.content == SPEECH
    assert not first.timing.streamed and not second.timing.streamed
    assert first.timing.first_token_s == first.timing.waited_s  # latency = completion time
    assert any("not streamed" in line for line in client.capabilities.learnt)
