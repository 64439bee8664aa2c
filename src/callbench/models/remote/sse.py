"""Reading a server-sent event stream: the bytes of a body as they arrive, and its events.

Two sources of a body's bytes, with one interface (:class:`ChunkSource`):

- :class:`IterSource`: any async iterator of chunks (an ``httpx2.Response``'s ``aiter_bytes()``):
  what either SDK transport gives;
- :class:`AiohttpSource`: the aiohttp ``StreamReader`` under the SDK's aiohttp transport, read
  directly (:func:`aiohttp_source` finds it, or gives None). Its :meth:`~ChunkSource.next` can be
  *lazy*: instead of waking the reading task for every chunk, it waits for the body's end, or for
  bytes the reader must see at once (``wake_on``: the stream's end or error event), and takes
  everything that arrived in one read.

Why lazy: against a streaming provider, the reader's thread goes idle between deltas (tens of
milliseconds apart), and each wake-up of a task to read one delta costs on the order of 0.1 ms of
CPU on a 2-core virtual machine (``benchmarks/latency_bench.py``; docs/latency.md, "Harness
CPU"), most of it below Python. The timings that matter are taken before the laziness starts:
the streamed readers (``streaming.py``) read eagerly until the first token of speech has been
marked and only then ask for the rest lazily. The rest's end is seen at once when the body
ends with the stream (what providers do). Every :data:`POLL_S` seconds a timer (a plain
callback: no task is woken) moves what has arrived out of aiohttp's buffer, so that its flow
control never stops the socket, and looks in it for ``wake_on``: when a server keeps the body
open after its end event, or sends an error event and keeps it open, the reading task is woken
at that look, at most :data:`POLL_S` seconds later; so it is past the byte limit.

:class:`SseParser` splits bytes into events (the event-stream format of the HTML Living
Standard, section 9.2.6 "Interpreting an event stream": ``field: value`` lines, a blank line
dispatches, ``:`` starts a comment); decoding an event's data is left to the caller, so that
nothing after a stream's end event is ever decoded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

POLL_S = 0.2
"""The longest a lazy read waits before it looks at what has arrived, in seconds."""
DRAIN_BYTES = 64 * 1024
"""The most bytes read (and ignored) after a stream's end event: a provider sends only the
body's last chunk there (a few bytes)."""
DRAIN_S = 0.5
"""The longest wait, in seconds, for the body's end after the stream's end event."""


class ChunkSource(Protocol):
    """The bytes of one response body as they arrive."""

    async def next(self, lazy: bool = False, wake_on: tuple[bytes, ...] = ()) -> bytes:
        """The next bytes (never empty), or ``b""`` at the body's end; ``lazy``: the caller needs
        no timing from these bytes (the source may wait and return several chunks at once, but
        returns soon after bytes holding one of ``wake_on`` arrive)."""
        ...

    async def drain(self) -> bool:
        """Read and ignore the rest of the body (see :func:`drain`); True when it was read to its
        end (the connection can then be reused)."""
        ...


class IterSource:
    """A :class:`ChunkSource` over an async iterator of ``bytes`` (lazy reads are eager here)."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self.chunks = chunks

    async def next(self, lazy: bool = False, wake_on: tuple[bytes, ...] = ()) -> bytes:
        async for chunk in self.chunks:
            if chunk:
                return chunk
        return b""

    async def drain(self) -> bool:
        return await drain(self.chunks)

    async def aclose(self) -> None:
        close = getattr(self.chunks, "aclose", None)
        if close is not None:
            await close()


class AiohttpSource:
    """A :class:`ChunkSource` over an aiohttp ``StreamReader`` (``content``), raising
    ``too_large(n)`` (an exception) past ``limit`` bytes. Errors are aiohttp's own
    (``aiohttp.ClientPayloadError`` for a body cut short...), as its reader raises them."""

    def __init__(self, content: Any, limit: int, too_large: Any) -> None:
        self.content, self.limit, self.too_large = content, limit, too_large
        self.received = 0
        self._held: list[bytes] = []  # bytes taken out of the reader by a look, not yet returned
        self._tail = b""  # the last bytes read: a wake_on split over two reads is still found
        self.marked = False
        """A ``wake_on`` has arrived: every read after it is eager (the event may still be
        incomplete, e.g. ``data: [DONE]`` before its blank line, and nothing more would wake a
        lazy read; a stream has only a few bytes left after its end event)."""

    def _count(self, data: bytes) -> bytes:
        self.received += len(data)
        if self.received > self.limit:
            raise self.too_large(f"the response body is over callbench's limit of {self.limit} bytes")
        return data

    def _scan(self, data: bytes, wake_on: tuple[bytes, ...]) -> bool:
        """Look for ``wake_on`` in ``data`` after the bytes read before it (all reads, in order);
        True when one is found (and :attr:`marked` is set)."""
        seen = self._tail + data
        keep = max((len(m) for m in wake_on), default=1) - 1
        self._tail = seen[-keep:] if keep else b""
        if any(m in seen for m in wake_on):
            self.marked = True
            return True
        return False

    def _look(self, wake_on: tuple[bytes, ...]) -> bool:
        """Move what has arrived into :attr:`_held`; True when the reading task must take it now:
        it holds one of ``wake_on``, or the body is past the limit. Raises the reader's
        exception, if any (``read_nowait``)."""
        data = self.content.read_nowait(-1)
        if not data:
            return False
        self._held.append(data)
        self.received += len(data)
        found = self._scan(data, wake_on)
        return found or self.received > self.limit

    def _take(self, wake_on: tuple[bytes, ...]) -> bytes:
        """What the looks moved into :attr:`_held` and what has arrived since, in one piece (the
        looks counted theirs already). Raises the reader's exception, or past the limit."""
        rest = self.content.read_nowait(-1)
        self._scan(rest, wake_on)
        data = b"".join([*self._held, rest])
        self._held = []
        self._count(rest)
        return data

    async def next(self, lazy: bool = False, wake_on: tuple[bytes, ...] = ()) -> bytes:
        content = self.content
        if not lazy or self.marked:
            data = await content.readany()
            self._scan(data, wake_on)
            return self._count(data)
        while True:
            if not content.is_eof() and not self._look(wake_on):
                await self._wait_eof(wake_on)
            data = self._take(wake_on)
            if data or content.is_eof():
                return data

    async def _wait_eof(self, wake_on: tuple[bytes, ...]) -> None:
        """Wait for the body's end, or for a look (every :data:`POLL_S` seconds, a timer's plain
        callback) to find something the task must take now (:meth:`_look`); the look wakes the task
        through the same cancellation as a timeout, which happens at most once here."""
        loop = asyncio.get_running_loop()
        woken = asyncio.timeout(None)
        handle: list[asyncio.TimerHandle] = []

        def look() -> None:
            try:
                due = not self.content.is_eof() and self._look(wake_on)
            except Exception:  # the reader's exception: the task's read raises it
                due = True
            if due:
                woken.reschedule(loop.time())
            else:
                handle[0] = loop.call_later(POLL_S, look)

        handle.append(loop.call_later(POLL_S, look))
        try:
            async with woken:
                await self.content.wait_eof()
        except TimeoutError:
            pass
        finally:
            handle[0].cancel()

    async def drain(self) -> bool:
        content = self.content

        async def chunks() -> AsyncIterator[bytes]:
            while True:
                data = await content.readany()
                if not data:
                    return
                yield data

        return await drain(chunks())


def aiohttp_source(response: Any, limit: int, too_large: Any) -> AiohttpSource | None:
    """An :class:`AiohttpSource` for the body of ``response`` (an ``httpx2.Response`` from the
    SDK's aiohttp transport, headers read, body not), or None when the body is not a plain
    aiohttp body: another transport, or a content coding (the aiohttp transport leaves decoding
    to httpx2, so its bytes would be coded). The adapter keeps its aiohttp response in a private
    attribute (``openai._vendor.httpx_aiohttp.transport.AiohttpResponseStream``, the same adapter in
    the anthropic SDK): when a release moves it, this gives None and the body is read through
    httpx2 as before."""
    codings = response.headers.get("content-encoding", "").strip().lower()
    if codings not in ("", "identity"):
        return None
    stream = response.stream
    for _ in range(4):  # callbench's bound, then httpx2's elapsed-time wrapper, then the adapter's
        aio = getattr(stream, "_aiohttp_response", None)
        if aio is not None:
            content = getattr(aio, "content", None)
            needed = ("readany", "read_nowait", "wait_eof", "is_eof")
            if content is None or not all(callable(getattr(content, n, None)) for n in needed):
                return None
            return AiohttpSource(content, limit, too_large)
        stream = getattr(stream, "inner", None) or getattr(stream, "_stream", None)
        if stream is None:
            return None
    return None


class SseParser:
    """Split an event stream's bytes into events: :meth:`feed` each chunk as it arrives, then
    :meth:`close`. Events are ``(event name, data)``: the name ("" when none was given) and the
    joined ``data:`` lines, still bytes."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []  # the start of a line whose end has not arrived
        self.event = ""
        self.data_lines: list[bytes] = []

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        """The events that ``chunk`` completes, in order."""
        if b"\n" not in chunk:
            # kept and joined once its line ends: appending to one buffer and splitting it again
            # for every chunk is quadratic in the length of a long event
            self.pending.append(chunk)
            return []
        if self.pending:
            self.pending.append(chunk)
            chunk = b"".join(self.pending)
            self.pending = []
        *lines, rest = chunk.split(b"\n")
        if rest:
            self.pending.append(rest)
        out: list[tuple[str, bytes]] = []
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:  # the end of an event (a blank line dispatches it)
                if self.data_lines:
                    out.append((self.event, b"\n".join(self.data_lines)))
                self.event, self.data_lines = "", []
                continue
            if line.startswith(b":"):
                continue  # a comment (keep-alive)
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"data":
                self.data_lines.append(value)
            elif name == b"event":
                self.event = value.decode("utf-8", errors="replace")
        return out

    def close(self) -> list[tuple[str, bytes]]:
        """The last event, when the body ended without its blank line."""
        tail = b"".join(self.pending).rstrip(b"\r")
        self.pending = []
        if tail.startswith(b"data:"):
            self.data_lines.append(tail[5:].lstrip(b" "))
        if not self.data_lines:
            return []
        event, data = self.event, b"\n".join(self.data_lines)
        self.event, self.data_lines = "", []
        return [(event, data)]


async def drain(chunks: AsyncIterator[bytes], limit: int = DRAIN_BYTES, wait_s: float = DRAIN_S) -> bool:
    """Read the rest of a body whose answer is complete, ignoring it, so that the transport puts
    the connection back in its pool: httpx2 (h11) and aiohttp both close a connection whose
    response is closed before its body's end (httpx2: every streamed request opened a new
    connection; aiohttp: when the body's last chunk had not arrived with the end event). Gives up
    after ``limit`` bytes or ``wait_s`` seconds, or on any transport fault (the connection is then
    closed, not reused: the answer stands). Returns True when the body was read to its end."""
    read = 0
    try:
        async with asyncio.timeout(wait_s):
            async for chunk in chunks:
                read += len(chunk)
                if read > limit:
                    return False
    except Exception:  # a timeout or a transport fault after a complete answer
        return False
    return True
