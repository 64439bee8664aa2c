"""The HTTP transport under the openai and anthropic SDKs, and how its failures are named.

Both SDKs send through an ``httpx2.AsyncClient``. By default it uses httpcore2 and h11, pure
Python: about 0.5 ms of CPU per request on this project's 2-core benchmark machine went to that
transport (``benchmarks/scale_bench.py``). Both SDKs also ship, as a documented
option ("With aiohttp" in their READMEs; extra ``aiohttp``), ``DefaultAioHttpClient``: the same
``httpx2.AsyncClient`` interface over aiohttp, whose HTTP parser is compiled. callbench uses it
when aiohttp is installed (a dependency of the package), except for a ``base_url`` with
credentials in it (``user:password@host``: aiohttp refuses them beside the SDK's ``Authorization``
header), and when ``CALLBENCH_HTTP_TRANSPORT=httpx2`` asks for the SDK's default transport.

The two transports raise different exceptions for the same fault: the adapter maps every
``aiohttp.ClientConnectionError`` to ``httpx2.ConnectTimeout`` (so a refused connection would read
as a timeout) and lets parse errors (a status line that is not HTTP, a bad chunk) through as
``aiohttp.ClientResponseError``. :func:`aiohttp_fault_kind` names the fault from the aiohttp
exception itself, as httpx2 names it (``tests/models/test_transport_faults.py`` checks both
transports against the same raw-socket faults).
"""

from __future__ import annotations

import functools
import os
import sys
import zlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

TRANSPORT_ENV = "CALLBENCH_HTTP_TRANSPORT"
TRANSPORTS = ("aiohttp", "httpx2")


def transport_choice() -> str:
    """The transport ``CALLBENCH_HTTP_TRANSPORT`` asks for: ``aiohttp`` (the default) or
    ``httpx2``. Raises ValueError naming the variable for any other value."""
    value = os.environ.get(TRANSPORT_ENV, "").strip().lower() or "aiohttp"
    if value not in TRANSPORTS:
        raise ValueError(f"{TRANSPORT_ENV}={value!r}: use one of {', '.join(TRANSPORTS)}")
    return value


def _aiohttp_usable() -> bool:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


def sdk_http_client(sdk: ModuleType, base_url: str | None, timeout_s: float) -> Any | None:
    """An ``httpx2.AsyncClient`` over aiohttp from ``sdk`` (the imported ``openai`` or
    ``anthropic`` module: its ``DefaultAioHttpClient``, with the SDK's own default limits and
    redirects, and ``timeout_s`` seconds as its timeout), or None for the SDK's default transport:
    when ``CALLBENCH_HTTP_TRANSPORT=httpx2``, when aiohttp or the SDK's adapter is missing, or when
    ``base_url`` carries userinfo. Raises ValueError for a bad ``CALLBENCH_HTTP_TRANSPORT``.

    The aiohttp session is opened on the first request, in the running event loop, and closed by
    the SDK client's ``close()`` (``RemoteClient.aclose``)."""
    if transport_choice() != "aiohttp" or not _aiohttp_usable():
        return None
    if base_url is not None and "@" in urlsplit(base_url).netloc:
        return None
    factory = getattr(sdk, "DefaultAioHttpClient", None)
    if factory is None:  # an SDK release without the adapter
        return None
    try:
        return factory(timeout=timeout_s)
    except RuntimeError:  # the SDK's stand-in when its adapter could not be imported
        return None


def aiohttp_errors() -> tuple[type[BaseException], ...]:
    """``(aiohttp.ClientError,)`` when aiohttp has been imported, else ``()`` (nothing of it
    can have been raised, and importing it costs time)."""
    module = sys.modules.get("aiohttp")
    error = getattr(module, "ClientError", None) if module is not None else None
    return (error,) if isinstance(error, type) else ()


def aiohttp_fault_kind(exc: BaseException) -> str | None:
    """The fault kind (``models/faults.py``) of the first aiohttp exception in ``exc``'s cause
    chain (``exc`` included; at most 6 links), named as httpx2 names the same fault, or None when
    there is none:

    - a timeout (``aiohttp.ServerTimeoutError`` and its subclasses, any ``TimeoutError``):
      ``timeout``;
    - no connection made (``aiohttp.ClientConnectorError``: refused, unreachable, DNS; an
      ``InvalidURL``): ``connection``;
    - the server closed or broke the exchange after the request was sent
      (``ServerDisconnectedError``, ``ClientPayloadError``: a body cut short or a bad chunk,
      ``ClientResponseError`` raised while parsing: a status line or header that is not HTTP,
      ``ClientOSError``: a reset): ``reset``, as httpx2's ``RemoteProtocolError`` / ``ReadError``;
    - any other ``aiohttp.ClientError``: ``connection``."""
    module = sys.modules.get("aiohttp")
    if module is None:
        return None
    for seen in cause_chain(exc):
        if isinstance(seen, module.ClientError):
            if isinstance(seen, (TimeoutError, module.ServerTimeoutError)):
                return "timeout"
            if isinstance(seen, (module.ClientConnectorError, module.InvalidURL)):
                return "connection"
            if isinstance(seen, (module.ServerDisconnectedError, module.ClientPayloadError,
                                 module.ClientResponseError, module.ClientOSError)):
                return "reset"
            return "connection"
    return None


def cause_chain(exc: BaseException, links: int = 6) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling (``__cause__``, else
    ``__context__``), at most ``links`` of them: where the transports' own exceptions sit under
    the SDKs' wrappers."""
    seen: BaseException | None = exc
    for _ in range(links):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""The most bytes of one response body callbench reads, before and after its content coding is
undone: a chat completion is kilobytes; without a bound, a 200 with a huge body or a gzip bomb
(64 KB that inflates to gigabytes) would be read whole into memory on both transports."""

_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class ResponseTooLarge(Exception):
    """A response body over :data:`MAX_RESPONSE_BYTES` (declared, received or inflated)."""


def bound_responses(http: Any, limit: int = MAX_RESPONSE_BYTES) -> None:
    """Bound every response body of ``http`` (an ``httpx2.AsyncClient``: the SDK's own or the
    aiohttp adapter, whose aiohttp session leaves the content coding to httpx2) to ``limit``
    bytes, by a response event hook (run before the body is read): a ``Content-Length`` over the
    limit raises :class:`ResponseTooLarge` at once; otherwise the body stream is replaced by one
    that raises it past ``limit`` bytes, and a single ``gzip``/``deflate`` coding (RFC 9110
    section 8.4.1) is undone there with the same bound on the inflated bytes (the header is then
    removed so that httpx2 does not decode again). Other codings are left to httpx2, which
    decodes only those (``identity`` for the rest), with the received bytes bounded. A client
    already bounded is left as it is."""
    async def hook(response: Any) -> None:
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > limit:
            raise ResponseTooLarge(f"the response body is {int(declared)} bytes, over callbench's "
                                   f"limit of {limit} bytes")
        codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        wbits = _CODINGS.get(codings[0]) if len(codings) == 1 else None
        if wbits is not None:
            del response.headers["content-encoding"]
        response.stream = _bounded_stream_class()(response.stream, limit, wbits, response.request)

    hook.callbench_bound = True  # type: ignore[attr-defined]
    hooks = dict(http.event_hooks)
    if any(getattr(h, "callbench_bound", False) for h in hooks.get("response", [])):
        return  # a client given to several adapters (``http_client=``): bounded once
    hooks["response"] = [*hooks.get("response", []), hook]
    http.event_hooks = hooks


@functools.cache
def _bounded_stream_class() -> type:
    """:class:`_BoundedStream` as an ``httpx2.AsyncByteStream`` (httpx2 reads only those
    asynchronously), made on first use so that importing this module does not import httpx2."""
    import httpx2

    return type("BoundedStream", (_BoundedStream, httpx2.AsyncByteStream), {})


class _BoundedStream:
    """An ``httpx2.AsyncByteStream`` over ``inner`` that raises :class:`ResponseTooLarge` past
    ``limit`` bytes received, and with ``wbits`` set inflates (zlib) with the same bound on the
    output; a body that does not inflate raises ``httpx2.DecodingError`` as httpx2's own decoder
    does."""

    def __init__(self, inner: Any, limit: int, wbits: int | None, request: Any) -> None:
        self.inner, self.limit, self.wbits, self.request = inner, limit, wbits, request

    async def __aiter__(self) -> Any:
        import httpx2

        received = produced = 0
        wbits = self.wbits
        inflater = zlib.decompressobj(wbits) if wbits is not None else None
        async for chunk in self.inner:
            received += len(chunk)
            if received > self.limit:
                raise ResponseTooLarge(f"the response body is over callbench's limit of {self.limit} bytes")
            if inflater is None:
                yield chunk
                continue
            data = chunk
            while data:
                try:
                    try:
                        out = inflater.decompress(data, self.limit - produced + 1)
                    except zlib.error:
                        if wbits != zlib.MAX_WBITS or produced or data is not chunk:
                            raise
                        # "deflate" sent raw, without its zlib wrapper (RFC 9110 section 8.4.1.2
                        # says zlib; servers send both, and httpx2's decoder reads both)
                        wbits = -zlib.MAX_WBITS
                        inflater = zlib.decompressobj(wbits)
                        out = inflater.decompress(data, self.limit - produced + 1)
                except zlib.error as err:
                    raise httpx2.DecodingError(f"the body does not inflate: {err}",
                                               request=self.request) from None
                produced += len(out)
                if produced > self.limit:
                    raise ResponseTooLarge(f"the response body inflates past callbench's limit of "
                                           f"{self.limit} bytes")
                if out:
                    yield out
                if inflater.eof and inflater.unused_data:  # another gzip member follows
                    data = inflater.unused_data
                    inflater = zlib.decompressobj(wbits or zlib.MAX_WBITS)
                else:
                    data = inflater.unconsumed_tail

    async def aclose(self) -> None:
        await self.inner.aclose()
