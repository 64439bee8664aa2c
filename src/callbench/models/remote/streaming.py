"""Streamed answers (server-sent events) read into the body a non-streamed request would have got.

Both adapters ask for a stream for the roles whose first token is timed (``base.wants_stream``).
The stream is read through the SDK's own HTTP client (either transport, ``transport.py``) with
the same bounds as any body (``transport.bound_responses``) and the same deadline over the whole
exchange (``prepared.within_deadline``), and its events are assembled into exactly the JSON body
the provider returns without streaming, which then goes through the same checks
(``anomalies.py``) and the same parser. So a streamed and a non-streamed answer of the same server
give the same :class:`~callbench.models.base.ModelResponse`; only the timings differ
(``models/timing.py``: first byte, first content token, first token of speech).

Wire formats: OpenAI Chat Completions ``chat.completion.chunk`` events (``data: {...}`` lines,
``data: [DONE]`` at the end; ``stream_options.include_usage`` adds a last chunk with ``usage``
and no choices; deltas of ``content``, ``refusal`` and ``tool_calls[i]`` concatenated by index,
as the openai SDK's own stream accumulator does); Anthropic Messages events ``message_start``,
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``) /
``content_block_stop``, ``message_delta`` (stop reason, output tokens), ``message_stop``, ``ping``
and ``error``.

Faults in the middle of a stream are the provider's, never the candidate's: an event that is not
JSON (``malformed_body``), not UTF-8 (``not_utf8``), an error event (``error_body``), a stream
that ends before its terminator, or ends with no finish reason (OpenAI, per choice) or stop
reason (Anthropic) given (``reset``: the answer is incomplete, so nothing of it is used),
a transport failure while reading (classified as for any body: ``reset``, ``timeout``...). Each
raises a retryable :class:`~callbench.models.base.InfrastructureError`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from callbench.models.base import InfrastructureError
from callbench.models.remote.anomalies import _error_body, checked_body
from callbench.models.remote.sse import AiohttpSource, ChunkSource, IterSource, SseParser, aiohttp_source
from callbench.models.remote.transport import MAX_RESPONSE_BYTES, ResponseTooLarge, aiohttp_errors
from callbench.models.timing import mark_first_byte, mark_first_token, mark_streamed


def is_event_stream(content_type: str) -> bool:
    """True for a ``text/event-stream`` content type."""
    return content_type.split(";")[0].strip().lower() == "text/event-stream"


async def sse_events(
    chunks: AsyncIterator[bytes], who: str
) -> AsyncIterator[tuple[str, dict[str, Any] | None]]:
    """The events of a body read as ``chunks`` (an ``httpx2.Response``'s ``aiter_bytes()``), as
    ``(event name, data)``: data is the decoded JSON object, or None for ``[DONE]``. Marks the
    first byte of the body. Raises InfrastructureError ``not_utf8`` / ``malformed_body`` for an
    event's data that is not a UTF-8 JSON object (``anomalies.checked_body``). Leaving it after
    an event leaves the rest of ``chunks`` unread (:func:`post_streamed` drains it)."""
    async for event in stream_events(IterSource(chunks), who, lambda: False):
        yield event


async def stream_events(
    source: ChunkSource, who: str, lazy: Callable[[], bool], wake_on: tuple[bytes, ...] = ()
) -> AsyncIterator[tuple[str, dict[str, Any] | None]]:
    """:func:`sse_events` over a :class:`~callbench.models.remote.sse.ChunkSource`; each read is
    lazy when ``lazy()`` says so (the caller has marked every timing it takes from the stream), and
    returns soon after bytes holding one of ``wake_on`` (the caller's end and error events) arrive.
    An event is decoded only when it is taken from the iterator: nothing after the end event the
    caller stops at is decoded."""
    parser = SseParser()
    first = True
    while True:
        chunk = await source.next(lazy(), wake_on)
        if not chunk:
            break
        if first:
            mark_first_byte()
            first = False
        for name, data in parser.feed(chunk):
            yield _event(name, data, who)
    for name, data in parser.close():
        yield _event(name, data, who)


def _source(source: ChunkSource | AsyncIterator[bytes]) -> ChunkSource:
    if isinstance(source, (IterSource, AiohttpSource)):
        return source
    return IterSource(cast("AsyncIterator[bytes]", source))


def _event(name: str, data: bytes, who: str) -> tuple[str, dict[str, Any] | None]:
    try:  # the usual event: a UTF-8 JSON object, decoded as checked_body would decode it
        value = json.loads(data.decode("utf-8"))
    except ValueError:  # not UTF-8 or not JSON (both ValueErrors): checked_body names the fault
        value = None
    if isinstance(value, dict):
        return name, value
    if data.strip() == b"[DONE]":
        return name, None
    return name, checked_body(data, "application/json", f"{who} (stream event)")


NO_REASON_REMEDY = "a server that never sends one needs `stream: off` in this role's settings"
"""Said with a stream ended without its finish (stop) reason: the check cannot tell a reply cut
short from a server that leaves the reason out, and a plain (not streamed) answer has no such gap."""


def _cut(who: str, what: str) -> InfrastructureError:
    return InfrastructureError(f"{who}: reset: the stream stopped before its end ({what}); the answer is "
                               "incomplete and nothing of it was used", retryable=True, kind="reset")


def _copy(value: Any) -> Any:
    """A copy of a decoded JSON value that shares no object or list with it."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _concat(target: dict[str, Any], delta: dict[str, Any]) -> None:
    """Merge ``delta`` into ``target`` as the openai SDK's accumulator does: strings
    concatenated (``index`` and ``type`` replaced), objects merged, other values replaced."""
    for key, value in delta.items():
        if value is None:
            continue
        old = target.get(key)
        if key in ("index", "type") or old is None:
            target[key] = _copy(value)
        elif isinstance(old, str) and isinstance(value, str):
            target[key] = old + value
        elif isinstance(old, dict) and isinstance(value, dict):
            _concat(old, value)
        else:
            target[key] = value


class _Marked:
    """Which timings a streamed answer has marked (only the first of each counts): ``token``, a
    content token; ``speech``, a token of speech (after which the rest is read lazily)."""

    token = False
    speech = False


OPENAI_WAKE = (b"[DONE]", b'"error"', b"event: error")
"""Bytes a lazy read of an OpenAI stream must take at once: its end (``data: [DONE]``) and an error
event (``{"error": ...}``, or an ``error`` event name as some compatible servers send). A quoted
``"error"`` is a JSON key or value of an event: the word in a delta's text arrives escaped
(``\\"error\\"``), so it does not wake the reader, nor does a tool argument's."""
ANTHROPIC_WAKE = (b"message_stop", b'"error"', b"event: error")
"""The same for an Anthropic stream: ``message_stop`` and ``event: error``."""

_OPENAI_FIELDS = ("id", "model", "created", "system_fingerprint", "usage", "timings")
"""Top-level fields of a chunk kept in the body (the last non-null value of each)."""


async def openai_stream_body(source: ChunkSource | AsyncIterator[bytes], who: str) -> dict[str, Any]:
    """The ``chat.completion`` body a non-streamed request would have got, from the body's bytes
    (``source``: a :class:`~callbench.models.remote.sse.ChunkSource` or an async iterator of chunks;
    read up to ``data: [DONE]``, lazily once speech has begun). Marks the first content token (a
    ``content``, ``refusal`` or tool-call delta) and the first token of speech (non-blank ``content``). Raises
    InfrastructureError (see the module docstring)."""
    mark_streamed()
    body: dict[str, Any] = {"object": "chat.completion"}
    choices: dict[int, dict[str, Any]] = {}
    done = False
    m = _Marked()
    where = f"{who} (stream event)"
    async for _, data in stream_events(_source(source), who, lambda: m.speech, OPENAI_WAKE):
        if data is None:
            done = True
            break
        if "error" in data or data.get("type") == "error":
            _error_body(data, where)
        for key in _OPENAI_FIELDS:
            value = data.get(key)
            if value is not None:
                body[key] = value
        for item in data.get("choices") or []:
            if not isinstance(item, dict):
                continue
            index = item.get("index", 0)
            if not isinstance(index, int):
                index = 0
            choice = choices.get(index)
            if choice is None:
                choice = choices[index] = {"index": index, "message": {"role": "assistant"},
                                           "finish_reason": None}
            if item.get("finish_reason") is not None:
                choice["finish_reason"] = item["finish_reason"]
            delta = item.get("delta")
            if not isinstance(delta, dict):
                continue
            message = choice["message"]
            for name in ("content", "refusal"):
                text = delta.get(name)
                if isinstance(text, str) and text:
                    if not m.speech and name == "content" and text.strip():
                        mark_first_token(speech=True)
                        m.token = m.speech = True
                    elif not m.token:
                        mark_first_token(speech=False)
                        m.token = True
                    message[name] = message.get(name, "") + text
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                if not m.token:
                    mark_first_token(speech=False)
                    m.token = True
                slots: dict[int, dict[str, Any]] = message.setdefault("_calls", {})
                for pos, call in enumerate(calls):
                    if isinstance(call, dict):
                        slot = call.get("index", pos) if isinstance(call.get("index", pos), int) else pos
                        _concat(slots.setdefault(slot, {}), {k: v for k, v in call.items() if k != "index"})
    if not done:
        raise _cut(who, "no data: [DONE]")
    unfinished = [i for i in sorted(choices) if choices[i]["finish_reason"] is None]
    if unfinished:
        # the API ends every choice with a finish reason; a server that stops a reply early when
        # another request waits (llama-cpp-python's interrupt_requests) sends data: [DONE] without one
        raise _cut(who, f"data: [DONE] before choice {unfinished[0]} had a finish_reason; {NO_REASON_REMEDY}")
    out = []
    for index in sorted(choices):
        choice = choices[index]
        message = choice["message"]
        slots = message.pop("_calls", {})
        if slots:
            message["tool_calls"] = [{"type": "function", **slots[k]} for k in sorted(slots)]
        message.setdefault("content", None)
        out.append(choice)
    body["choices"] = out
    return body


async def anthropic_stream_body(source: ChunkSource | AsyncIterator[bytes], who: str) -> dict[str, Any]:
    """The ``message`` body a non-streamed request would have got, from the events of the body's
    bytes (``source`` as for :func:`openai_stream_body`; read up to ``message_stop``, lazily once
    speech has begun). Marks the first content token (a text or tool-input
    delta, or a tool_use block's start) and the first token of speech (non-blank text). Raises
    InfrastructureError (see the module docstring)."""
    mark_streamed()
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    stopped = False
    m = _Marked()
    async for name, data in stream_events(_source(source), who, lambda: m.speech, ANTHROPIC_WAKE):
        if data is None:
            continue
        kind = data.get("type") or name
        if kind == "error" or name == "error":
            _error_body({"type": "error", "error": data.get("error") or data}, f"{who} (stream event)")
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message = dict(data["message"])
            message["content"] = []
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            block = dict(data["content_block"])
            blocks[int(data.get("index", len(blocks)))] = block
            if block.get("type") == "tool_use":
                mark_first_token(speech=False)
                m.token = True
            elif block.get("type") == "text" and block.get("text"):
                said = bool(str(block["text"]).strip())
                mark_first_token(speech=said)
                m.token, m.speech = True, m.speech or said
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            index = int(data.get("index", 0))
            delta = data["delta"]
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                text = delta["text"]
                if not m.speech and text.strip():
                    mark_first_token(speech=True)
                    m.token = m.speech = True
                elif not m.token:
                    mark_first_token(speech=False)
                    m.token = True
                block["text"] = str(block.get("text") or "") + text
            elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                if not m.token:
                    mark_first_token(speech=False)
                    m.token = True
                partial[index] = partial.get(index, "") + delta["partial_json"]
        elif kind == "message_delta":
            if message is None:
                raise _cut(who, "message_delta before message_start")
            for key, value in (data.get("delta") or {}).items():
                message[key] = value
            if isinstance(data.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **data["usage"]}
        elif kind == "message_stop":
            stopped = True
            break
    if message is None or not stopped:
        raise _cut(who, "no message_stop" if message is not None else "no message_start")
    if message.get("stop_reason") is None:  # the API's message_delta always gives one first
        raise _cut(who, f"message_stop before a stop_reason; {NO_REASON_REMEDY}")
    for index, text in partial.items():
        tool = blocks.get(index)
        if tool is None or tool.get("type") != "tool_use":
            continue
        try:
            tool["input"] = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as e:
            raise InfrastructureError(f"{who}: malformed_body: a tool_use block's streamed input is not "
                                      f"JSON ({e.msg})", retryable=True, kind="malformed_body") from None
    message["content"] = [blocks[k] for k in sorted(blocks)]
    return message


async def post_streamed(client: Any, path: str, body: dict[str, Any], *, headers: dict[str, str] | None,
                        timeout: float, who: str, read: Any) -> tuple[dict[str, Any] | None, Any, bytes]:
    """POST ``body`` (which asks for a stream) through the SDK ``client`` and read the answer
    within ``timeout`` seconds for the whole exchange; after the stream's end event the rest of
    the body is read and ignored (:func:`drain`), so that the connection can be reused. Returns
    ``(assembled body, response, b"")`` for an event stream (``read`` is
    :func:`openai_stream_body` or :func:`anthropic_stream_body`, given the body's chunks), or
    ``(None, response, raw body)`` when the server answered
    without streaming (it ignored ``stream``: the caller reads the body as a plain answer). Errors
    are the SDK's own (``APIStatusError``...) as for a plain request."""
    import httpx2

    from callbench.models.remote.prepared import send_unread, within_deadline

    payload = dict(body)
    extra = payload.pop("extra_body", None)
    if extra:
        payload.update(extra)
    # no timeout per read: the deadline over the whole exchange (the same ``timeout``) is reached
    # no later than any read's, and both transports re-arm a read timer for every chunk, i.e.
    # for every streamed delta (aiohttp a loop timer, httpx2 a cancel scope with one)
    timeout_limits = httpx2.Timeout(timeout, read=None)

    sdk = sys.modules[type(client).__module__.split(".")[0]]  # openai or anthropic

    async def exchange() -> tuple[dict[str, Any] | None, Any, bytes]:
        response = await send_unread(client, path, payload, headers=headers, timeout=timeout_limits)
        source: Any = None
        try:
            if is_event_stream(response.headers.get("content-type", "")):
                # the aiohttp reader itself where the default transport is in use: read lazily once
                # speech has begun (sse.py says why); otherwise httpx2's chunks, one at a time
                limit = getattr(response.stream, "limit", MAX_RESPONSE_BYTES)
                source = aiohttp_source(response, limit, ResponseTooLarge) or IterSource(
                    response.aiter_bytes())
                assembled = await read(source, who)
                await source.drain()
                return assembled, response, b""
            return None, response, await response.aread()
        except httpx2.TimeoutException as err:  # raised as the SDK raises it for a body it reads
            raise sdk.APITimeoutError(request=response.request) from err
        except (httpx2.HTTPError, *aiohttp_errors()) as err:  # type: ignore[misc]
            raise sdk.APIConnectionError(request=response.request) from err
        finally:
            if isinstance(source, IterSource):
                await source.aclose()
            await response.aclose()

    result: tuple[dict[str, Any] | None, Any, bytes] = await within_deadline(timeout, exchange())
    return result
