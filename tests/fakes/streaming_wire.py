"""Streaming on loopback: both providers' event-stream wire formats, seeded latency, a small server.

:func:`openai_chunks` and :func:`anthropic_events` turn a complete answer body (what the server
returns without streaming) into the events the provider streams for it (OpenAI
``chat.completion.chunk`` lines ending with ``data: [DONE]``, usage in a last chunk when
``stream_options.include_usage`` is asked; Anthropic ``message_start`` ... ``message_stop``).
:class:`LatencyProfile` draws, from a seed and the request number, the time to first token
(log-normal around a median), the time between tokens and the extra time before a tool call.
:func:`write_answer` writes an answer streamed (chunked transfer coding, one flush per event,
sleeping the drawn delays) or whole after the same total delay.

:class:`WireServer` answers every request with one fixed answer per dialect, streamed when the
request asks for it, with an optional mid-stream fault on the first ``fault_times`` requests
(``cut``: the stream stops before its end; ``done_early``: its end event comes with no finish or
stop reason before it; ``error_event``; ``not_json``; ``not_utf8``;
``stall``: nothing more for ``stall_s`` seconds or until the server is closed). Each
request's drawn delays are kept in :attr:`WireServer.drawn` (request number -> first token s);
:attr:`WireServer.connections` counts the TCP connections it accepted (keep-alive: one for many
requests when the client reuses its connection). ``trailing`` (bytes) is sent after the stream's
end event, before the body's last chunk: what a server that keeps sending after it looks like.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PIECE = 4
"""Characters of text (or of tool-call arguments) per streamed delta."""


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)] or []


def openai_chunks(answer: dict[str, Any], *, usage: bool) -> Iterator[tuple[str, Any]]:
    """``(kind, data)`` events for a ``chat.completion`` body: kind ``text``, ``tool`` or ``meta``
    (for delays), data the chunk object, or None for ``[DONE]``."""
    head = {"id": answer["id"], "object": "chat.completion.chunk", "created": 0, "model": answer["model"]}
    choice = answer["choices"][0]
    message = choice["message"]
    yield "meta", {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    for name in ("content", "refusal"):
        for piece in _pieces(message.get(name) or ""):
            yield "text", {**head, "choices": [{"index": 0, "delta": {name: piece}, "finish_reason": None}]}
    for i, call in enumerate(message.get("tool_calls") or []):
        first = {
            "index": i,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        yield (
            "tool",
            {**head, "choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]},
        )
        for piece in _pieces(call["function"]["arguments"]):
            delta = {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}
            yield "text", {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield "meta", {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    if usage:
        yield "meta", {**head, "choices": [], "usage": answer["usage"]}
    yield "meta", None


def anthropic_events(answer: dict[str, Any]) -> Iterator[tuple[str, tuple[str, Any]]]:
    """``(kind, (event name, data))`` events for a Messages API ``message`` body."""
    start = {k: v for k, v in answer.items() if k not in ("content", "stop_reason", "usage")}
    usage = answer["usage"]
    yield (
        "meta",
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **start,
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
                },
            },
        ),
    )
    yield "meta", ("ping", {"type": "ping"})
    for i, block in enumerate(answer["content"]):
        if block["type"] == "text":
            yield (
                "meta",
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
            )
            for piece in _pieces(block["text"]):
                yield (
                    "text",
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    ),
                )
        else:
            yield (
                "tool",
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                ),
            )
            for piece in _pieces(json.dumps(block["input"], ensure_ascii=False)):
                yield (
                    "text",
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    ),
                )
        yield "meta", ("content_block_stop", {"type": "content_block_stop", "index": i})
    yield (
        "meta",
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        ),
    )
    yield "meta", ("message_stop", {"type": "message_stop"})


@dataclass(frozen=True)
class LatencyProfile:
    """Seeded delays in seconds: time to first token log-normal with median ``ttft_s`` and shape
    ``sigma``; ``token_s`` between streamed deltas; ``tool_s`` more before each tool call."""

    ttft_s: float = 0.0
    sigma: float = 0.0
    token_s: float = 0.0
    tool_s: float = 0.0
    seed: int = 0

    def first_token(self, n: int) -> float:
        """The time to first token of request ``n`` (a pure function of seed and ``n``)."""
        if self.ttft_s <= 0:
            return 0.0
        rng = random.Random(f"{self.seed}:{n}")
        return self.ttft_s * math.exp(self.sigma * rng.gauss(0.0, 1.0))


def _chunk(h: BaseHTTPRequestHandler, data: bytes) -> None:
    h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    h.wfile.flush()


def write_answer(
    h: BaseHTTPRequestHandler,
    dialect: str,
    answer: dict[str, Any],
    *,
    stream: bool,
    usage: bool,
    profile: LatencyProfile,
    n: int,
    fault: str | None = None,
    trailing: bytes = b"",
    trailing_s: float = 0.0,
    stall_s: float = 60.0,
    closed: threading.Event | None = None,
) -> float:
    """Write ``answer`` (a complete body of ``dialect``) to ``h``, streamed or whole; returns the
    drawn time to first token. ``fault`` breaks the stream after its first content event (a
    ``stall`` sends nothing more for ``stall_s`` seconds, or until ``closed`` is set);
    ``trailing`` is written after the end event, ``trailing_s`` seconds later, before the body's
    last chunk."""
    ttft = profile.first_token(n)
    events = list(openai_chunks(answer, usage=usage) if dialect == "openai" else anthropic_events(answer))
    if not stream:
        tools = sum(1 for kind, _ in events if kind == "tool")
        tokens = sum(1 for kind, _ in events if kind == "text")
        time.sleep(ttft + tokens * profile.token_s + tools * profile.tool_s)
        data = json.dumps(answer, ensure_ascii=False).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        return ttft
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    first = True
    for kind, data in events:
        if kind != "meta":
            delay = (ttft if first else profile.token_s) + (profile.tool_s if kind == "tool" else 0.0)
            time.sleep(delay)
            if fault is not None and not first:
                _fault(h, dialect, fault, stall_s, closed or threading.Event())
                return ttft
            first = False
        if dialect == "openai":
            line = (
                b"data: [DONE]\n\n"
                if data is None
                else (b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n")
            )
        else:
            name, payload = data
            line = (
                f"event: {name}\ndata: ".encode() + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"
            )
        _chunk(h, line)
    if trailing or trailing_s:
        time.sleep(trailing_s)
        if trailing:
            _chunk(h, trailing)
    _chunk(h, b"")
    return ttft


def _fault(
    h: BaseHTTPRequestHandler, dialect: str, fault: str, stall_s: float, closed: threading.Event
) -> None:
    if fault == "error_event":
        error = {"type": "overloaded_error", "message": "Overloaded"}
        line = (
            b"event: error\ndata: " + json.dumps({"type": "error", "error": error}).encode()
            if dialect == "anthropic"
            else b"data: " + json.dumps({"error": error}).encode()
        )
        _chunk(h, line + b"\n\n")
    elif fault == "not_json":
        _chunk(h, b'data: {"choices": [\n\n')
    elif fault == "not_utf8":
        _chunk(h, b'data: {"x": "\xff\xfe"}\n\n')
    elif fault == "done_early":  # llama-cpp-python's interrupt_requests: the end, no finish reason
        _chunk(h, b"data: [DONE]\n\n" if dialect == "openai" else
               b'event: message_stop\ndata: {"type": "message_stop"}\n\n')
    elif fault == "stall" and closed.wait(stall_s):  # nothing more: the client's deadline must end it
        return  # the server is closing: the client is gone, nothing is left to send
    # the chunked body ends cleanly; with "cut" nothing else came: no terminator event
    _chunk(h, b"")


class WireServer:
    """See the module docstring. Use as a context manager; :attr:`url` (OpenAI) and :attr:`root`
    (Anthropic) are its base URLs."""

    def __init__(
        self,
        openai_answer: dict[str, Any],
        anthropic_answer: dict[str, Any],
        *,
        profile: LatencyProfile | None = None,
        fault: str | None = None,
        fault_times: int = 1,
        hold_until: int = 0,
        hold_s: float = 60.0,
        trailing: bytes = b"",
        trailing_s: float = 0.0,
        stall_s: float = 60.0,
    ) -> None:
        self.trailing, self.trailing_s = trailing, trailing_s
        # a stall lasts stall_s or until the server is closed, whichever comes first
        self.stall_s, self.closed = stall_s, threading.Event()
        self.connections = 0
        self.answers = {"openai": openai_answer, "anthropic": anthropic_answer}
        # hold every answer until ``hold_until`` requests have arrived (at most ``hold_s``): a client
        # that queued its requests behind each other never gets there, whatever the machine's load
        self.hold_until, self.hold_s = hold_until, hold_s
        self.arrived = threading.Condition()
        self.held_all: list[bool] = []  # per request: whether all hold_until requests had arrived
        self.profile = profile or LatencyProfile()
        self.fault, self.fault_times = fault, fault_times
        self.drawn: dict[int, float] = {}
        self.streamed: list[bool] = []
        self._n = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    def __enter__(self) -> WireServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:  # once per accepted connection
                with server._lock:
                    server.connections += 1
                super().setup()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                dialect = "anthropic" if self.path.rstrip("/").endswith("/messages") else "openai"
                with server._lock:
                    n = server._n
                    server._n += 1
                    server.streamed.append(bool(body.get("stream")))
                if server.hold_until:
                    with server.arrived:
                        server.arrived.notify_all()
                        held = server.arrived.wait_for(lambda: server._n >= server.hold_until, server.hold_s)
                    server.held_all.append(held)
                fault = server.fault if n < server.fault_times else None
                usage = (
                    bool((body.get("stream_options") or {}).get("include_usage")) or dialect == "anthropic"
                )
                server.drawn[n] = write_answer(
                    self,
                    dialect,
                    server.answers[dialect],
                    stream=bool(body.get("stream")),
                    usage=usage,
                    profile=server.profile,
                    n=n,
                    fault=fault,
                    trailing=server.trailing,
                    trailing_s=server.trailing_s,
                    stall_s=server.stall_s,
                    closed=server.closed,
                )

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def root(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"
