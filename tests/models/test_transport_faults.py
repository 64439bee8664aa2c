"""Both HTTP transports under the SDKs (aiohttp, the default, and httpx2) name every transport
fault alike (``models/remote/transport.py``): raw-socket servers on loopback misbehave below HTTP
(refuse, close, send what is not HTTP, cut a body, break a chunk, hang) and each failure must be
the same fault kind through the openai and the anthropic adapters on both transports."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator

import pytest

from callbench.models.base import ChatMessage, ModelRequest, ModelSettings, RequestContext
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.client import RemoteClient
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.retry import classify_exception
from callbench.models.remote.secrets import Redactor
from callbench.models.remote.transport import TRANSPORT_ENV, aiohttp_fault_kind, sdk_http_client
from fakes.raw_socket_server import raw_socket_server
from waiting import limit

JSON = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
Behaviour = Callable[[socket.socket], None]


def _hang(conn: socket.socket) -> None:
    """Answer nothing until the client gives up and closes: the server never closes first, however
    late a loaded machine fires the client's timeout."""
    conn.settimeout(limit(120.0))
    while conn.recv(1024):
        pass


BEHAVIOURS: dict[str, tuple[Behaviour, str]] = {
    "close_before_answer": (lambda c: None, "reset"),
    "not_http": (lambda c: c.sendall(b"NOT HTTP AT ALL\r\n\r\n"), "reset"),
    "bad_status_code": (lambda c: c.sendall(b"HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\n{}"), "reset"),
    "body_cut_short": (lambda c: c.sendall(JSON + b"Content-Length: 100\r\n\r\n{\"a\":"), "reset"),
    "bad_chunk": (lambda c: c.sendall(JSON + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"), "reset"),
    "headers_cut_short": (lambda c: c.sendall(JSON), "reset"),
    "bad_gzip": (lambda c: c.sendall(JSON + b"Content-Encoding: gzip\r\nContent-Length: 5\r\n\r\nabcde"),
                 "connection"),
    "hang": (_hang, "timeout"),
}


@pytest.fixture
def raw_server(request: pytest.FixtureRequest) -> Iterator[int]:
    """A loopback port whose server reads each request and answers it with the behaviour named by
    the test's ``behaviour`` parameter (``fakes/raw_socket_server.py``)."""
    behaviour = BEHAVIOURS[request.param][0]
    with raw_socket_server(lambda conn, _port: behaviour(conn)) as port:
        yield port


def _client(provider: str, port: int, timeout_s: float | None = None) -> RemoteClient:
    """``timeout_s``: 0.5 s where the fault is the timeout itself; otherwise far above what any
    answer here needs, so that a loaded machine never turns another fault into a timeout."""
    settings = ModelSettings(base_url=f"http://127.0.0.1:{port}", max_attempts=1,
                             timeout_s=timeout_s or limit(60.0))
    if provider == "openai":
        return OpenAIClient("openai:m", settings)
    return AnthropicClient("anthropic:m", settings)


async def _fault_kind(client: RemoteClient) -> str:
    request = ModelRequest(messages=[ChatMessage(role="user", content="hi")],
                           context=RequestContext(role="candidate", episode_id="e1"))
    try:
        await client._send(request)
    except Exception as exc:
        error = classify_exception(exc, provider=client.provider, redactor=Redactor(), role="candidate")
        assert error is not None, f"unclassified: {exc!r}"
        return error.kind or ""
    finally:
        await client.aclose()
    return "no fault"


@pytest.mark.parametrize("transport", ["aiohttp", "httpx2"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("raw_server", sorted(BEHAVIOURS), indirect=True)
def test_a_transport_fault_has_one_kind_on_both_transports(
        raw_server: int, provider: str, transport: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRANSPORT_ENV, transport)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    expected = BEHAVIOURS[request.node.callspec.params["raw_server"]][1]
    client = _client(provider, raw_server, 0.5 if expected == "timeout" else None)
    inner = client._client._client  # type: ignore[attr-defined]
    assert (type(inner).__name__ != "AsyncHttpxClientWrapper") == (transport == "aiohttp")
    assert asyncio.run(_fault_kind(client)) == expected


def test_a_refused_connection_is_a_connection_error_not_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp's adapter maps every ClientConnectionError to httpx2.ConnectTimeout: a refused
    connection must still be ``connection``, as on httpx2."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    for transport in ("aiohttp", "httpx2"):
        monkeypatch.setenv(TRANSPORT_ENV, transport)
        assert asyncio.run(_fault_kind(_client("openai", port))) == "connection", transport


def test_transport_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    client = sdk_http_client(openai, "http://127.0.0.1:9/v1", 5.0)
    assert type(client).__name__ == "_InstalledAioHttpClient"
    assert sdk_http_client(openai, None, 5.0) is not None  # the official endpoint too
    # credentials in the URL: aiohttp refuses them beside the Authorization header
    assert sdk_http_client(openai, "http://user:pw@127.0.0.1:9/v1", 5.0) is None
    monkeypatch.setenv(TRANSPORT_ENV, "HTTPX2")
    assert sdk_http_client(openai, "http://127.0.0.1:9/v1", 5.0) is None
    monkeypatch.setenv(TRANSPORT_ENV, "curl")
    with pytest.raises(ValueError, match=r"CALLBENCH_HTTP_TRANSPORT='curl': use one of aiohttp, httpx2"):
        sdk_http_client(openai, None, 5.0)


def test_aiohttp_fault_kind_reads_the_cause_chain() -> None:
    import aiohttp
    import httpx2

    def chained(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as err:
                raise httpx2.ConnectTimeout("mapped") from err
        except BaseException as outer:
            return outer

    assert aiohttp_fault_kind(chained(aiohttp.ServerDisconnectedError())) == "reset"
    assert aiohttp_fault_kind(chained(aiohttp.SocketTimeoutError())) == "timeout"
    assert aiohttp_fault_kind(chained(aiohttp.ClientPayloadError("cut"))) == "reset"
    assert aiohttp_fault_kind(chained(aiohttp.ClientConnectionError())) == "connection"
    assert aiohttp_fault_kind(httpx2.ConnectTimeout("plain")) is None
    assert aiohttp_fault_kind(ValueError("x")) is None
