"""Once speech has begun, a streamed answer is read lazily on the default (aiohttp) transport: the
reading task is woken by the body's end (or a poll), not by every delta, and the answer, its
timings before speech, its faults and its bounds are those of reading every delta."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.models.test_streaming import _anthropic, _client, _openai, _request

import fakes.streaming_wire as wire
from callbench.models.remote import sse
from callbench.models.remote.sse import AiohttpSource, IterSource, aiohttp_source
from callbench.models.remote.transport import TRANSPORT_ENV, ResponseTooLarge
from fakes.streaming_wire import LatencyProfile, WireServer

LONG = " ".join(f"word{i}" for i in range(60))  # 60 words, about 110 deltas of 4 characters


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")


class _Counted:
    """Counts the reads of every source made while it is installed: (lazy, bytes) per read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[tuple[bool, int]] = []
        counted = self

        for cls in (AiohttpSource, IterSource):
            real = cls.next

            async def next(self: Any, lazy: bool = False, wake_on: tuple[bytes, ...] = (),
                           _real: Any = real) -> bytes:
                data: bytes = await _real(self, lazy, wake_on)
                counted.reads.append((lazy, len(data)))
                return data

            monkeypatch.setattr(cls, "next", next)


async def _streamed(dialect: str, text: str, profile: LatencyProfile | None = None) -> Any:
    """One streamed request for ``text`` to a fresh fake; the answer."""
    with WireServer(_openai(text, []), _anthropic(text, []), profile=profile) as fake:
        client = _client(dialect, fake, "on")
        try:
            return await client.complete(_request())
        finally:
            await client.aclose()


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_after_speech_the_rest_is_one_read_at_the_body_end(
    dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no poll within the test: the only thing that can wake the lazy read is the body's end
    monkeypatch.setattr(sse, "POLL_S", 600.0)
    monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    counted = _Counted(monkeypatch)
    answer = await _streamed(dialect, LONG, LatencyProfile(token_s=0.005))
    assert answer.content == LONG
    lazy = [n for is_lazy, n in counted.reads if is_lazy]
    eager = [n for is_lazy, n in counted.reads if not is_lazy]
    # the rest of the answer (over 100 deltas, its end event included) in one read; before it, the
    # reads up to the first token of speech (the start event and the first text delta)
    assert len(lazy) == 1 and lazy[0] > 100 * 40, counted.reads
    assert 1 <= len(eager) <= 3, counted.reads
    # speech marked live at the first delta; the answer finished when its last delta arrived, over
    # 100 deltas of at least 5 ms later (the server sleeps between them)
    (attempt,) = answer.timing.attempts
    assert attempt.first_speech_s is not None and attempt.first_token_s == attempt.first_speech_s
    assert attempt.finished_s - attempt.first_speech_s >= 0.5


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_the_other_transport_reads_every_delta(dialect: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the comparison that gives the lazy read its point: httpx2 wakes the reader once per delta
    monkeypatch.setenv(TRANSPORT_ENV, "httpx2")
    counted = _Counted(monkeypatch)
    answer = await _streamed(dialect, LONG, LatencyProfile(token_s=0.005))
    assert answer.content == LONG
    assert len(counted.reads) > 100, len(counted.reads)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_body_above_the_readers_buffer_is_read_whole(
    dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp stops reading the socket while more than 128 KiB wait in its buffer: the lazy read's
    # poll takes them, so a long answer is read whole (and before the 5 s timeout)
    monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    monkeypatch.setattr(wire, "PIECE", 8192)
    text = "".join(f"{i:07d} " for i in range(60_000))  # 480,000 characters, 59 deltas
    answer = await _streamed(dialect, text)
    assert answer.content == text
    assert [a.fault for a in answer.timing.attempts] == [None]


class _Reader:
    """The parts of an aiohttp ``StreamReader`` a source uses, fed by the test."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.eof = list(chunks), False

    async def readany(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def read_nowait(self, n: int = -1) -> bytes:
        data, self.chunks = b"".join(self.chunks), []
        self.eof = True
        return data

    async def wait_eof(self) -> None:
        await asyncio.sleep(0)

    def is_eof(self) -> bool:
        return self.eof


async def test_the_byte_limit_holds_on_both_kinds_of_read() -> None:
    eager = AiohttpSource(_Reader([b"x" * 6, b"y" * 6]), 10, ResponseTooLarge)
    assert await eager.next() == b"x" * 6
    with pytest.raises(ResponseTooLarge, match="over callbench's limit of 10 bytes"):
        await eager.next()
    lazy = AiohttpSource(_Reader([b"x" * 6, b"y" * 6]), 10, ResponseTooLarge)
    with pytest.raises(ResponseTooLarge, match="limit of 10 bytes"):
        await lazy.next(lazy=True)
    within = AiohttpSource(_Reader([b"x" * 4, b"y" * 6]), 10, ResponseTooLarge)
    assert await within.next(lazy=True) == b"x" * 4 + b"y" * 6
    assert await within.next(lazy=True) == b""


class _Response:
    def __init__(self, headers: dict[str, str], stream: Any) -> None:
        self.headers, self.stream = headers, stream


class _Adapter:
    def __init__(self, content: Any) -> None:
        self._aiohttp_response = type("R", (), {"content": content})()


def test_a_coded_body_or_another_transport_is_read_through_httpx2() -> None:
    reader = _Reader([])
    bounded = type("B", (), {"inner": type("S", (), {"_stream": _Adapter(reader)})()})()
    found = aiohttp_source(_Response({}, bounded), 99, ResponseTooLarge)
    assert isinstance(found, AiohttpSource) and found.content is reader and found.limit == 99
    assert aiohttp_source(_Response({"content-encoding": "identity"}, bounded), 9, ResponseTooLarge)
    # the aiohttp transport leaves decoding to httpx2: a gzip body's raw bytes are not the events
    assert aiohttp_source(_Response({"content-encoding": "gzip"}, bounded), 9, ResponseTooLarge) is None
    assert aiohttp_source(_Response({}, object()), 9, ResponseTooLarge) is None  # httpx2's own stream
    broken = type("B", (), {"inner": _Adapter(object())})()  # a reader without the methods used
    assert aiohttp_source(_Response({}, broken), 9, ResponseTooLarge) is None


class _Protocol:
    """The flow-control calls an aiohttp ``StreamReader`` makes on its protocol, recorded."""

    def __init__(self) -> None:
        self.connected, self.paused = True, 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self, resume_parser: bool = True) -> None:
        pass


def _stream_reader() -> Any:
    import aiohttp

    return aiohttp.StreamReader(_Protocol(), 2**16, loop=asyncio.get_running_loop())  # type: ignore[arg-type]


async def _returned(read: asyncio.Task[bytes]) -> bool:
    """Whether ``read`` has returned once the loop has run the callbacks due now."""
    for _ in range(5):
        await asyncio.sleep(0)
    return read.done()


async def test_a_lazy_read_wakes_for_an_end_event_in_a_body_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a server that keeps the body open after its end event: the look (a timer) finds the event,
    # even split over two chunks, and wakes the read; until then the read waits, however many looks
    monkeypatch.setattr(sse, "POLL_S", 0.001)
    content = _stream_reader()
    source = AiohttpSource(content, 10_000, ResponseTooLarge)
    read = asyncio.create_task(source.next(lazy=True, wake_on=(b"[DONE]", b"error")))
    content.feed_data(b'data: {"a": 1}\n\n')
    await asyncio.sleep(0.02)  # several looks: nothing to wake for
    assert not read.done()
    content.feed_data(b"data: [DO")
    await asyncio.sleep(0.02)
    assert not read.done()
    content.feed_data(b"NE]\n\n")
    assert await asyncio.wait_for(read, 5) == b'data: {"a": 1}\n\ndata: [DONE]\n\n'
    assert not content.is_eof() and source.received == 30


async def test_a_lazy_read_is_one_read_for_many_chunks_and_its_looks_wake_no_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "POLL_S", 0.001)
    content = _stream_reader()
    source = AiohttpSource(content, 10_000, ResponseTooLarge)
    read = asyncio.create_task(source.next(lazy=True, wake_on=(b"[DONE]",)))
    for i in range(30):
        content.feed_data(b"x" * 10)
        await asyncio.sleep(0.001 if i % 3 else 0.005)  # looks between most chunks
    assert not await _returned(read)
    content.feed_eof()
    assert await asyncio.wait_for(read, 5) == b"x" * 300
    assert await source.next(lazy=True) == b""


async def test_a_lazy_read_takes_an_error_at_once_and_stops_past_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "POLL_S", 0.001)
    content = _stream_reader()
    read = asyncio.create_task(AiohttpSource(content, 10_000, ResponseTooLarge).next(lazy=True))
    content.feed_data(b"data: 1\n\n")
    await asyncio.sleep(0.005)
    content.set_exception(ConnectionResetError("reset by peer"))
    with pytest.raises(ConnectionResetError, match="reset by peer"):
        await asyncio.wait_for(read, 5)
    # past the byte limit, a look wakes the read (no end in sight) and the read raises
    content = _stream_reader()
    read = asyncio.create_task(AiohttpSource(content, 100, ResponseTooLarge).next(lazy=True))
    content.feed_data(b"y" * 60)
    await asyncio.sleep(0.005)
    content.feed_data(b"y" * 60)
    with pytest.raises(ResponseTooLarge, match="limit of 100 bytes"):
        await asyncio.wait_for(read, 5)


_DELTA = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\n'
_START = [b'event: message_start\ndata: {"type":"message_start",'
          b'"message":{"role":"assistant","content":[]}}\n\n',
          b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
          b'"delta":{"type":"text_delta","text":"Hi"}}\n\n']


@pytest.mark.parametrize(("dialect", "chunks"), [
    ("openai", [_DELTA + b"data: [DO", b"NE]\n\n"]),  # split between the eager read and a lazy one
    ("openai", [_DELTA, b"data: [DONE]", b"\n\n"]),  # the end event's blank line comes later
    ("openai", [_DELTA, b'data: {"err', b'or": {"message": "Overloaded"}}\n\n']),
    ("anthropic", [*_START, b'event: message_delta\ndata: {"type":"message_delta",'
                   b'"delta":{"stop_reason":"end_turn"}}\n\n',
                   b'event: message_stop\ndata: {"type":"message_st', b'op"}\n\n']),
    ("anthropic", [*_START, b"event: err",
                   b'or\ndata: {"type":"error","error":{"message":"Overloaded"}}\n\n']),
])
async def test_an_end_or_error_event_in_odd_pieces_is_read_from_a_body_left_open(
    dialect: str, chunks: list[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from callbench.models.base import InfrastructureError
    from callbench.models.remote.streaming import anthropic_stream_body, openai_stream_body

    monkeypatch.setattr(sse, "POLL_S", 0.001)
    content = _stream_reader()
    body = openai_stream_body if dialect == "openai" else anthropic_stream_body
    read = asyncio.create_task(body(AiohttpSource(content, 10_000, ResponseTooLarge), "fake"))
    for chunk in chunks:
        content.feed_data(chunk)
        await asyncio.sleep(0.01)  # looks between the pieces
    # the server keeps the body open: only the events can end the read (the wait bounds a hang)
    if b"Overloaded" in chunks[-1]:
        with pytest.raises(InfrastructureError, match="Overloaded"):
            await asyncio.wait_for(read, 10)
        return
    answer = await asyncio.wait_for(read, 10)
    text = (answer["choices"][0]["message"]["content"] if dialect == "openai"
            else answer["content"][0]["text"])
    assert text == "Hi" and not content.is_eof()
