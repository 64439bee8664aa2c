"""Hostile providers against both HTTP transports (aiohttp, the default, and httpx2) through both
SDK adapters: raw-socket servers on loopback misbehave at every layer of HTTP/1.1 (RFC 9112
framing, RFC 9110 redirects and interim responses, content coding). Each must end as one fault
kind (``models/faults.py``), the same on both transports, with no secret (the API key, a
``base_url`` query value) in the message, and no traceback."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator

import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelRequest,
    ModelSettings,
    RequestContext,
)
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.client import RemoteClient
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.retry import classify_exception
from callbench.models.remote.transport import TRANSPORT_ENV
from fakes.raw_socket_server import raw_socket_server, read_request
from waiting import limit

KEY = "sk-canary-envkey-1111"
QUERY = "query-canary-6666"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
Behaviour = Callable[[socket.socket, int], None]


# The two dripping answers go on until the client gives up (a send then fails: the client gone), so
# the body or headers never end first however late a loaded machine fires the client's timeout.
DRIP_S = 0.1


def _drip(conn: socket.socket, _port: int) -> None:
    n = int(limit(120.0) / DRIP_S)
    conn.sendall(OK + f"Content-Length: {n + 1}\r\n\r\n".encode())
    for _ in range(n):  # one byte every 0.1 s: each read is quick, the whole is past timeout_s
        conn.sendall(b" ")
        time.sleep(DRIP_S)


def _endless_headers(conn: socket.socket, _port: int) -> None:
    conn.sendall(OK)
    for i in range(int(limit(120.0) / DRIP_S)):
        conn.sendall(f"X-Pad-{i}: a\r\n".encode())
        time.sleep(DRIP_S)


def _huge(conn: socket.socket, _port: int) -> None:
    size = 40 * 1024 * 1024
    conn.sendall(OK + f"Content-Length: {size}\r\n\r\n".encode())
    block = b"x" * (1 << 20)
    for _ in range(size >> 20):
        conn.sendall(block)


def _http10(conn: socket.socket, _port: int) -> None:
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{}")


def _trailers(conn: socket.socket, _port: int) -> None:
    conn.sendall(OK + b"Transfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n2\r\n{}\r\n0\r\nX-Sum: 1\r\n\r\n")


def _continue_then_ok(conn: socket.socket, _port: int) -> None:
    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" + OK + b"Content-Length: 2\r\n\r\n{}")


def _switching(conn: socket.socket, _port: int) -> None:
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\n\r\n\x81\x00")
    # the socket stays open until the client gives it up (closes its side), however late a loaded
    # machine lets it read the 101: the client must end the exchange itself, not see a close
    conn.settimeout(limit(60.0))
    while conn.recv(1024):
        pass


def _redirect_self(conn: socket.socket, port: int) -> None:
    conn.sendall(f"HTTP/1.1 301 Moved\r\nLocation: http://127.0.0.1:{port}/v1/loop\r\n"
                 "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())


def _gzip_bomb(conn: socket.socket, _port: int) -> None:
    conn.sendall(OK + f"Content-Encoding: gzip\r\nContent-Length: {len(BOMB)}\r\n\r\n".encode() + BOMB)


def _chunked_huge(conn: socket.socket, _port: int) -> None:  # no length declared: counted as read
    conn.sendall(OK + b"Transfer-Encoding: chunked\r\n\r\n")
    block = b"%x\r\n" % (1 << 20) + b"x" * (1 << 20) + b"\r\n"
    for _ in range(40):
        conn.sendall(block)
    conn.sendall(b"0\r\n\r\n")


def _gzip_ok(conn: socket.socket, _port: int) -> None:  # a small gzip body still inflates
    body = gzip.compress(b"{}")
    conn.sendall(OK + f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)


def _bad_header_value(conn: socket.socket, _port: int) -> None:
    conn.sendall(OK + b"X-Odd: caf\xc3\xa9 \xff\xfe\x01\r\nContent-Length: 2\r\n\r\n{}")


def _reset_after(conn: socket.socket, _port: int) -> None:
    conn.sendall(OK + b"Content-Length: 100\r\n\r\n{\"choices\": [")
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close


def _dup_length(conn: socket.socket, _port: int) -> None:
    conn.sendall(OK + b"Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}abc")


def _redirect_file(conn: socket.socket, _port: int) -> None:
    conn.sendall(b"HTTP/1.1 307 Moved\r\nLocation: file:///etc/passwd\r\nContent-Length: 0\r\n"
                 b"Connection: close\r\n\r\n")


def _echo_400(conn: socket.socket, _port: int) -> None:
    """A 400 whose error message quotes the request's URL and headers (key and query included)."""
    echoed = f"bad request to /v1?api-key={QUERY} with Authorization: Bearer {KEY}, x-api-key: {KEY}"
    body = json.dumps({"error": {"message": echoed, "type": "invalid_request_error"}}).encode()
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


def _coded(conn: socket.socket, coding: str, body: bytes) -> None:
    conn.sendall(OK + f"Content-Encoding: {coding}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def _bomb(inflated: int) -> bytes:
    """gzip of ``inflated`` zero bytes (about 1/1000 of it compressed)."""
    import io

    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as f:
        block = bytes(1 << 20)
        for _ in range(inflated >> 20):
            f.write(block)
    return out.getvalue()


BOMB = _bomb(256 * 1024 * 1024)  # 256 MiB inflated, about 256 KB sent

# name -> (behaviour, the kind both transports give; "missing": the body "{}" was read, and lacks
# the provider's completion (missing_choices / missing_content))
ATTACKS: dict[str, tuple[Behaviour, str]] = {
    "slow_drip": (_drip, "timeout"),
    "endless_headers": (_endless_headers, "timeout"),
    "huge_body": (_huge, "malformed_body"),
    "http10_close_delimited": (_http10, "missing"),
    "duplicate_content_length": (_dup_length, "reset"),
    "chunked_with_trailers": (_trailers, "missing"),
    "continue_then_ok": (_continue_then_ok, "missing"),
    "switching_protocols": (_switching, "reset"),
    "redirect_loop": (_redirect_self, "connection"),
    "gzip_bomb": (_gzip_bomb, "malformed_body"),
    "chunked_huge": (_chunked_huge, "malformed_body"),
    "gzip_small": (_gzip_ok, "missing"),
    "deflate_zlib_small": (lambda c, _p: _coded(c, "deflate", zlib.compress(b"{}")), "missing"),
    "deflate_raw_small": (lambda c, _p: _coded(c, "deflate", _raw_deflate(b"{}")), "missing"),
    "gzip_two_members": (lambda c, _p: _coded(c, "gzip", gzip.compress(b"{") + gzip.compress(b"}")),
                         "missing"),
    "gzip_not_gzip": (lambda c, _p: _coded(c, "gzip", b"abcde"), "connection"),
    "bad_header_value": (_bad_header_value, "missing"),
    "redirect_to_file_url": (_redirect_file, "connection"),
    "error_echoes_secrets": (_echo_400, "invalid_request|client_error"),  # openai | anthropic
    "reset_after_n_bytes": (_reset_after, "reset"),
}


@pytest.fixture
def attack_server(request: pytest.FixtureRequest) -> Iterator[int]:
    with raw_socket_server(ATTACKS[request.param][0]) as port:
        yield port


def _client(provider: str, port: int, timeout_s: float | None = None) -> RemoteClient:
    """``timeout_s``: 0.5 s where the attack is a slow answer; otherwise far above what any answer
    here needs (32 MiB on loopback), so that a loaded machine never turns another kind into a timeout."""
    settings = ModelSettings(base_url=f"http://127.0.0.1:{port}/v1?api-key={QUERY}", max_attempts=1,
                             timeout_s=timeout_s or limit(60.0))
    if provider == "openai":
        return OpenAIClient("openai:m", settings)
    return AnthropicClient("anthropic:m", settings)


async def _outcome(client: RemoteClient) -> tuple[str, str]:
    request = ModelRequest(messages=[ChatMessage(role="user", content="hi")],
                           context=RequestContext(role="candidate", episode_id="e1"))
    try:
        await client._send(request)
    except InfrastructureError as exc:  # the adapter's own check of the answer
        return exc.kind or "", str(exc)
    except Exception as exc:
        error = classify_exception(exc, provider=client.provider, redactor=client.redactor,  # type: ignore[attr-defined]
                                   role="candidate")
        assert error is not None, f"unclassified: {exc!r}"
        return error.kind or "", str(error)
    finally:
        await client.aclose()
    return "no fault", ""


@pytest.mark.parametrize("attack_server", sorted(ATTACKS), indirect=True)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_hostile_response_is_one_kind_on_both_transports(
        attack_server: int, provider: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    kinds = {}
    name = request.node.callspec.params["attack_server"]
    timeout_s = 0.5 if ATTACKS[name][1] == "timeout" else None
    for transport in ("aiohttp", "httpx2"):
        monkeypatch.setenv(TRANSPORT_ENV, transport)
        kind, message = asyncio.run(_outcome(_client(provider, attack_server, timeout_s)))
        assert KEY not in message and QUERY not in message, message
        kinds[transport] = f"{kind}: {message}"
    expected = ATTACKS[name][1]
    for transport, outcome in kinds.items():
        kind = outcome.split(":")[0]
        assert kind.startswith("missing_") if expected == "missing" else kind in expected.split("|"), (
            transport, kinds)
        if name in ("huge_body", "chunked_huge", "gzip_bomb"):  # stopped at the bound, not read whole
            assert "callbench's limit of 33554432 bytes" in outcome, (transport, outcome)
    assert kinds["aiohttp"].split(":")[0] == kinds["httpx2"].split(":")[0], kinds


@pytest.mark.parametrize("status", [301, 307, 308])
@pytest.mark.parametrize("transport", ["aiohttp", "httpx2"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_redirect_to_another_host_carries_no_secret(
        provider: str, transport: str, status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider that redirects to another host (127.0.0.2: another origin on loopback) must
    not hand it the API key (``Authorization`` for openai, ``x-api-key`` for anthropic) nor the
    base URL's query values: the other host receives nothing secret, whatever it answers."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv(TRANSPORT_ENV, transport)
    seen: list[bytes] = []
    other = socket.socket()
    other.bind(("127.0.0.2", 0))
    other.listen(4)
    other_port = other.getsockname()[1]

    def serve_other() -> None:
        try:
            conn, _ = other.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(limit(60.0))  # a safety net: the client may be slow to send
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            seen.append(data)
            conn.sendall(OK + b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")

    def redirect(conn: socket.socket, _port: int) -> None:
        conn.sendall(f"HTTP/1.1 {status} Moved\r\nLocation: http://127.0.0.2:{other_port}/v1/elsewhere\r\n"
                     "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())

    threading.Thread(target=serve_other, daemon=True).start()
    first = socket.socket()
    first.bind(("127.0.0.1", 0))
    first.listen(4)

    def serve_first() -> None:
        try:
            conn, _ = first.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(limit(60.0))  # a safety net: the client may be slow to send
            read_request(conn)
            redirect(conn, 0)

    threading.Thread(target=serve_first, daemon=True).start()
    try:
        kind, message = asyncio.run(_outcome(_client(provider, first.getsockname()[1])))
    finally:
        first.close()
        other.close()
    assert KEY not in message and QUERY not in message
    assert seen, f"the redirect was not followed: {kind}"
    assert KEY.encode() not in seen[0] and QUERY.encode() not in seen[0], seen[0].decode(errors="replace")


def test_a_shared_http_client_is_bounded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``http_client`` given to several adapters (``registry.create_client(http_client=)``)
    gets one bounding hook, not one per adapter."""
    import httpx2

    from callbench.models.remote.transport import bound_responses

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    http = httpx2.AsyncClient()
    for _ in range(3):
        bound_responses(http)
    OpenAIClient("openai:m", ModelSettings(base_url="http://127.0.0.1:9/v1"), http_client=http)
    assert len(http.event_hooks["response"]) == 1
