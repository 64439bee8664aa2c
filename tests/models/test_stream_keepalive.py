"""A streamed request leaves its connection reusable: the body is read to its end after the
stream's end event (``data: [DONE]``, ``message_stop``), so the next request goes over the same
connection (against a real provider, a new connection would put a TLS handshake inside the
measured time to first token). What follows the end event is ignored, and a server that keeps
the body open after it does not hold the answer back. A stream that stalls is ended by the
deadline over the whole exchange."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.models.test_streaming import SHAPES, SPEECH, _client, _request

from callbench.models.base import InfrastructureError, ModelSettings
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.streaming import sse_events
from callbench.models.remote.transport import TRANSPORT_ENV
from fakes.streaming_wire import WireServer
from waiting import limit

REQUESTS = 6
STALL_S = limit(600.0)
"""How long a stalled stream stays silent (it ends sooner when the fake server is closed)."""
STALL_BOUND_S = limit(20.0)
"""A request against a 1 s deadline ends within this however loaded the machine, and well before
the stall would end by itself."""


@pytest.fixture(params=["aiohttp", "httpx2"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TRANSPORT_ENV, request.param)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    return str(request.param)


async def _sequential(
    dialect: str, stream: str, shape: str = "speech", **server: Any
) -> tuple[WireServer, list[Any]]:
    with WireServer(*SHAPES[shape], **server) as fake:
        client = _client(dialect, fake, stream)
        try:
            answers = [await client.complete(_request()) for _ in range(REQUESTS)]
        finally:
            await client.aclose()
    return fake, answers


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("shape", ["speech", "both"])
async def test_streamed_requests_reuse_one_connection(dialect: str, shape: str, transport: str) -> None:
    fake, answers = await _sequential(dialect, "on", shape)
    assert fake.streamed == [True] * REQUESTS
    assert all(a.timing.streamed for a in answers)
    assert fake.connections == 1


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_plain_requests_reuse_one_connection(dialect: str, transport: str) -> None:
    fake, answers = await _sequential(dialect, "off")
    assert fake.streamed == [False] * REQUESTS and fake.connections == 1
    assert [a.content for a in answers] == [SPEECH] * REQUESTS


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_bytes_after_the_end_event_are_ignored(dialect: str, transport: str) -> None:
    # not an event at all, then an error event: neither may change or fail the finished answer
    junk = b"\xff\xfe not json\n\ndata: {\"error\": {\"message\": \"late\"}}\n\nevent: error\ndata: {}\n\n"
    fake, answers = await _sequential(dialect, "on", trailing=junk)
    assert [a.content for a in answers] == [SPEECH] * REQUESTS
    assert [len(a.timing.attempts) for a in answers] == [1] * REQUESTS
    assert fake.connections == 1


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_body_left_open_after_the_end_event_does_not_hold_the_answer(
    dialect: str, transport: str
) -> None:
    # the server sends its last chunk 30 s after the end event: the answer is complete without it,
    # so the request returns on its first attempt, and the connection is given up (a fresh one for
    # the next request) rather than waited for (a client that waited would reuse it: one connection)
    with WireServer(*SHAPES["speech"], trailing_s=30.0) as fake:
        client = _client(dialect, fake, "on")
        try:
            first = await client.complete(_request())
            second = await client.complete(_request())
        finally:
            await client.aclose()
        connections = fake.connections
    assert first.content == second.content == SPEECH
    assert [len(first.timing.attempts), len(second.timing.attempts)] == [1, 1]
    assert connections == 2


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_stream_that_stalls_is_a_timeout_within_the_deadline(dialect: str, transport: str) -> None:
    # streamed requests have no timeout per read (the transports re-arm one for every delta):
    # the deadline over the whole exchange ends a stream that stops sending. The stall lasts until
    # the server is closed (at most STALL_S), so only the deadline can end the request; the bound on
    # the time taken leaves a loaded machine room to fire the 1 s deadline late
    with WireServer(*SHAPES["speech"], fault="stall", fault_times=99, stall_s=STALL_S) as fake:
        settings = ModelSettings(base_url=fake.root if dialect == "anthropic" else fake.url, timeout_s=1.0,
                                 max_attempts=1, stream="on")  # type: ignore[arg-type]
        client = (AnthropicClient if dialect == "anthropic" else OpenAIClient)(f"{dialect}:fake", settings)
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            with pytest.raises(InfrastructureError) as info:
                await client.complete(_request())
        finally:
            await client.aclose()
        took = loop.time() - began
    assert info.value.kind == "timeout", info.value
    assert 1.0 <= took < STALL_BOUND_S < STALL_S, took


async def _events(chunks: list[bytes]) -> list[tuple[str, Any]]:
    async def source() -> Any:
        for chunk in chunks:
            yield chunk

    return [e async for e in sse_events(source(), "test")]


async def test_events_are_the_same_however_the_body_is_cut() -> None:
    long_text = "क" * 40_000 + "x"  # 120 KB of UTF-8: one event over many chunks
    body = (
        b": keep-alive\r\n\r\n"
        b"event: one\r\ndata: " + json.dumps({"t": long_text}, ensure_ascii=False).encode() + b"\r\n\r\n"
        b'data: {"a":\ndata: 1}\n\n'
        b"data: [DONE]\n\n"
        b'data: {"last": true}'  # a last event without its blank line
    )
    expected = [("one", {"t": long_text}), ("", {"a": 1}), ("", None), ("", {"last": True})]
    for size in (1, 7, 1024, 64 * 1024, len(body)):
        cut = [body[i : i + size] for i in range(0, len(body), size)]
        assert await _events(cut) == expected, size
