"""The lean request path shared by the SDK adapters.

A run sends about twenty candidate requests per episode with the same tools, and callers and
judges send the same response schema thousands of times. What does not change is computed once:

- :func:`tool_parameters`: a tool's JSON Schema parameters cleaned for a provider
  (``schemas.clean_tool_parameters``), once per ``ToolSchema`` object, i.e. once per agent in a
  run (``sim.episode.episode_constants`` builds an agent's tool list once and every request of
  every episode with that agent carries the same objects);
- :func:`cleaned_schema`: a response schema cleaned for a provider, once per distinct schema
  (keyed by its canonical JSON text);
- :func:`schema_validator`: a compiled JSON Schema (draft 2020-12) validator, once per schema.

:func:`post_json` (and :func:`send_unread`, for a streamed answer) sends a body that is
already plain JSON, skipping the per-request ``async_maybe_transform`` pass that typed ``create``
methods make over the whole message list. For a plain-key openai or anthropic client it also
skips the SDK's
per-request option and header building: the URL and headers the SDK's ``_build_request`` makes
are made once per client and the request goes out through the SDK's own ``httpx2`` client (its
connection pool and keep-alive), with the SDK's error classes; the body is :func:`encode_body`,
the SDK's own encoding, reusing the JSON text of the operating document and of the tool list
(:func:`shared_list`) across requests. Other clients go through the SDK's ``post`` (the
"undocumented endpoints" form: ``client.post(path, cast_to=httpx.Response, body=...)``).

:class:`JsonView` reads the answer's parsed JSON with attribute access, as the SDK's response
models are read (``completion.choices[0].message.tool_calls``), without building those models.

Returned schemas, validators and shared lists are shared: callers must not mutate them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import jsonschema

from callbench.models.base import ToolSchema
from callbench.models.remote.schemas import clean_schema, clean_tool_parameters
from callbench.models.remote.transport import aiohttp_errors

if TYPE_CHECKING:
    import httpx2

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
MAX_SCHEMAS = 512
"""Distinct response schemas (and validators) kept; least recently used ones are dropped."""

_lock = threading.Lock()
_tools: dict[tuple[int, str], tuple[weakref.ref[ToolSchema], dict[str, Any]]] = {}
_schemas: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_validators: OrderedDict[str, jsonschema.protocols.Validator] = OrderedDict()


def tool_parameters(tool: ToolSchema, provider: str) -> dict[str, Any]:
    """``clean_tool_parameters(tool.parameters, provider, tool=tool.name)``, computed once per
    tool object and provider (the entry is dropped when the tool object is collected). Raises as
    ``clean_tool_parameters`` does for parameters that are not an object schema."""
    key = (id(tool), provider)
    with _lock:
        hit = _tools.get(key)
        if hit is not None and hit[0]() is tool:
            return hit[1]
    cleaned = clean_tool_parameters(tool.parameters, provider, tool=tool.name)

    def forget(_: object, key: tuple[int, str] = key) -> None:
        with _lock:
            _tools.pop(key, None)

    with _lock:
        _tools[key] = (weakref.ref(tool, forget), cleaned)
    return cleaned


def _schema_key(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _remember(cache: OrderedDict[K, V], key: K, make: Callable[[], V], limit: int = MAX_SCHEMAS) -> V:
    with _lock:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = make()
    with _lock:
        cache[key] = value
        while len(cache) > limit:
            cache.popitem(last=False)
    return value


def cleaned_schema(schema: dict[str, Any], provider: str) -> dict[str, Any]:
    """``clean_schema(schema, provider)``, computed once per distinct schema and provider."""
    return _remember(_schemas, (provider, _schema_key(schema)), lambda: clean_schema(schema, provider))


def schema_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A ``Draft202012Validator`` for ``schema``, compiled once per distinct schema."""
    return _remember(_validators, _schema_key(schema), lambda: jsonschema.Draft202012Validator(schema))


async def post_json(client: Any, path: str, body: dict[str, Any], *, headers: dict[str, str] | None,
                    timeout: float | None, response_type: type) -> Any:
    """POST ``body`` (plain JSON values only) to ``path`` through an SDK client and return the
    transport's response object (``response_type``, e.g. ``httpx2.Response``) with its body read.
    An ``extra_body`` key is merged into the body, as the SDKs' ``create`` methods do.
    Non-2xx answers and transport failures raise the SDK's own errors (``APIStatusError``,
    ``APIConnectionError``, ``APITimeoutError``), exactly as ``create`` would.

    An openai client that authenticates with a plain key (no provider runtime, workload identity,
    key provider or custom auth) sends through :func:`_lean_post`: the request line and headers
    the SDK builds for ``(path, headers, timeout)`` are built by the SDK once and reused. Any other
    client goes through the SDK's ``post`` (the openai SDK's "undocumented endpoints" form)."""
    payload = dict(body)
    extra = payload.pop("extra_body", None)
    if extra:
        payload.update(extra)
    if _lean_capable_cached(client):
        return await within_deadline(timeout, _lean_post(client, path, payload, headers, timeout))
    options: dict[str, Any] = {"timeout": timeout}
    if headers:
        options["headers"] = headers
    return await within_deadline(
        timeout, client.post(path, cast_to=response_type, body=payload, options=options))


RAW_STREAM_HEADER = {"X-Stainless-Raw-Response": "stream"}
"""Asks the SDKs to return the HTTP response with its body unread (what their
``with_streaming_response`` does)."""


async def send_unread(client: Any, path: str, payload: dict[str, Any], *, headers: dict[str, str] | None,
                      timeout: httpx2.Timeout) -> httpx2.Response:
    """POST ``payload`` (plain JSON values, ``extra_body`` already merged) to ``path`` through an
    SDK client and return the ``httpx2.Response`` with its headers read and its body unread (for
    a streamed answer); the caller reads and closes it. Errors are raised as :func:`post_json`'s.
    A plain-key client (:func:`_lean_capable`) sends through :func:`_lean_post`, any other through
    the SDK's ``post`` with :data:`RAW_STREAM_HEADER`."""
    import httpx2

    if _lean_capable_cached(client):
        return await _lean_post(client, path, payload, headers, timeout, stream=True)
    options = {"timeout": timeout, "headers": {**(headers or {}), **RAW_STREAM_HEADER}}
    response: httpx2.Response = await client.post(path, cast_to=httpx2.Response, body=payload,
                                                  options=options)
    return response


async def within_deadline(timeout: float | None, request: Awaitable[T]) -> T:
    """Await ``request`` (one whole HTTP exchange: connect, headers and the body read to its end)
    for at most ``timeout`` seconds (None: no limit).

    The transport's own timeout (httpx) limits each read, not the exchange: a body sent one byte
    at a time just under it was waited for in full (a 2 s ``timeout_s`` took 30.2 s).
    Raises ``TimeoutError`` when the deadline passes (a ``timeout`` fault, retried:
    :func:`callbench.models.remote.retry.classify_exception`).

    The deadline is ``asyncio.timeout`` (Python 3.11+) around the exchange in the caller's own task,
    not ``asyncio.wait_for``, which ran every request in a task of its own (one
    task and its scheduling less per request)."""
    if timeout is None:
        return await request
    try:
        async with asyncio.timeout(timeout):
            return await request
    except TimeoutError:
        raise TimeoutError(f"no complete answer within timeout_s {timeout:g} s") from None


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""The openai SDK's body encoding (``openai._utils._json.openapi_dumps``) for plain JSON values."""
LONG_TEXT = 2048
"""Strings at least this long (operating documents, caller prompts) have their JSON text kept."""
MAX_TEXTS = 64
"""Long strings whose JSON text is kept (least recently used dropped): an episode's requests
repeat its operating document, so a few per concurrent episode are enough."""
_texts: OrderedDict[str, bytes] = OrderedDict()
_shared: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], list[Any]]] = OrderedDict()
_shared_text: dict[int, tuple[list[Any], bytes | None]] = {}  # a shared list's JSON, once encoded


def shared_list(tag: str, owners: tuple[Any, ...], make: Callable[[], list[Any]]) -> list[Any]:
    """One list object per ``tag`` and sequence of ``owners`` objects (e.g. a request's tool
    entries, owned by its ``ToolSchema`` objects), so that :func:`encode_body` encodes it once.
    The entry holds the owners (their ids are not reused while it is kept). The list is shared:
    callers must not mutate it."""
    key = (tag, *map(id, owners))
    with _lock:
        hit = _shared.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], owners, strict=True)):
            _shared.move_to_end(key)
            return hit[1]
    made = make()
    with _lock:
        _shared[key] = (owners, made)
        _shared_text[id(made)] = (made, None)
        while len(_shared) > MAX_SCHEMAS:
            _, (_, dropped) = _shared.popitem(last=False)
            _shared_text.pop(id(dropped), None)
    return made


def _holds_long_text(value: dict[Any, Any]) -> bool:
    return any(isinstance(v, str) and len(v) >= LONG_TEXT for v in value.values())


def _kept(value: Any) -> bytes | None:
    """The kept UTF-8 JSON of a long string or of a :func:`shared_list` list, else None."""
    if isinstance(value, str):
        if len(value) >= LONG_TEXT:
            return _remember(_texts, value, lambda: _ENCODER.encode(value).encode(), MAX_TEXTS)
    elif isinstance(value, list):
        hit = _shared_text.get(id(value))
        if hit is not None and hit[0] is value:
            if hit[1] is None:
                text = _ENCODER.encode(value).encode()
                with _lock:
                    _shared_text[id(value)] = (value, text)
                return text
            return hit[1]
    return None


def _pieces(value: Any, depth: int, out: list[bytes]) -> None:
    """Append ``_ENCODER.encode(value)``'s UTF-8 to ``out``, from kept pieces where there are some:
    long strings, shared lists, and the objects and arrays holding them near the top (a body, its
    messages). Runs of array items with nothing kept in them are encoded in one call."""
    kept = _kept(value)
    if kept is not None:
        out.append(kept)
    elif isinstance(value, list) and depth < 2:
        out.append(b"[")
        run: list[Any] = []
        first = True
        for item in value:
            if _splits(item, depth + 1):
                if run:
                    out.append((b"" if first else b",") + _ENCODER.encode(run)[1:-1].encode())
                    first, run = False, []
                if not first:
                    out.append(b",")
                _pieces(item, depth + 1, out)
                first = False
            else:
                run.append(item)
        if run:
            out.append((b"" if first else b",") + _ENCODER.encode(run)[1:-1].encode())
        out.append(b"]")
    elif _splits(value, depth):
        out.append(b"{")
        for n, (k, v) in enumerate(value.items()):
            out.append(f"{',' if n else ''}{_ENCODER.encode(k)}:".encode())
            _pieces(v, depth + 1, out)
        out.append(b"}")
    else:
        out.append(_ENCODER.encode(value).encode())


def _splits(value: Any, depth: int) -> bool:
    """Whether :func:`_pieces` encodes ``value`` piece by piece rather than in one call."""
    if isinstance(value, dict):
        return (depth == 0 or _holds_long_text(value)) and all(isinstance(k, str) for k in value)
    if isinstance(value, list):
        return depth < 2 or _kept(value) is not None
    return isinstance(value, str) and len(value) >= LONG_TEXT


def encode_body(payload: dict[str, Any]) -> bytes:
    """``payload`` as the openai SDK encodes a body (compact JSON, non-ASCII kept, NaN refused,
    UTF-8), byte for byte, reusing the UTF-8 JSON of long strings and of :func:`shared_list` lists
    in its top level (the same operating document and tools go into every request of a run).
    Raises ``ValueError`` for NaN or infinity, ``TypeError`` for a value JSON cannot hold."""
    out: list[bytes] = []
    _pieces(payload, 0, out)
    return b"".join(out)


_templates: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], tuple[Any, httpx2.Headers, Any]]] = (
    weakref.WeakKeyDictionary())


def _sdk_of(client: Any) -> str | None:
    """``openai`` or ``anthropic`` for an async client of that SDK (an SDK that is not imported
    yet has no clients), else None."""
    for name, cls in (("openai", "AsyncOpenAI"), ("anthropic", "AsyncAnthropic")):
        module = sys.modules.get(name)
        if module is not None and isinstance(client, getattr(module, cls, ())):
            return name
    return None


def _lean_capable(client: Any) -> bool:
    """True for an ``openai.AsyncOpenAI`` or ``anthropic.AsyncAnthropic`` over an
    ``httpx2.AsyncClient`` whose requests the SDK changes in no per-request way: plain key auth,
    nothing that rewrites or signs requests (openai: no provider runtime, workload identity, key
    provider or custom auth; anthropic: no credentials provider or token cache, no custom auth, no
    middleware, the base client's request hooks). The SDKs' OpenTelemetry spans are made only for
    their own methods' requests, never for ``post`` to a path, so there is none to skip."""
    import httpx2

    sdk = _sdk_of(client)
    if sdk is None or _sdk_parts(sdk) is None or not isinstance(getattr(client, "_client", None),
                                                                 httpx2.AsyncClient):
        return False
    if sdk == "openai":
        return all(getattr(client, name, None) is None for name in (
            "_provider_runtime", "_workload_identity_auth", "_api_key_provider", "custom_auth"))
    from anthropic._base_client import AsyncAPIClient

    kind = type(client)
    unsigned = ("credentials", "_token_cache", "custom_auth")
    return (all(getattr(client, name, None) is None for name in unsigned)
            and not getattr(client, "_middleware", ())
            and kind._prepare_options is AsyncAPIClient._prepare_options
            and kind._prepare_request is AsyncAPIClient._prepare_request)


_lean_flags: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _lean_capable_cached(client: Any) -> bool:
    """:func:`_lean_capable`, decided once per client object (an SDK client's auth is fixed when it
    is made; reading it costs several property lookups per request)."""
    try:
        flag = _lean_flags.get(client)
    except TypeError:  # not weak-referenceable: not an SDK client
        return _lean_capable(client)
    if flag is None:
        flag = _lean_flags[client] = _lean_capable(client)
    return flag


async def _lean_post(client: Any, path: str, payload: dict[str, Any], headers: dict[str, str] | None,
                     timeout: float | httpx2.Timeout | None, *, stream: bool = False) -> Any:
    """The SDK's ``request`` for one attempt (the client is made with ``max_retries=0``; callbench
    retries), with the URL and headers the SDK's ``_build_request`` made for the first request to
    ``(path, headers, timeout)``: sent by the SDK's own ``httpx2`` client, errors raised as the SDK
    raises them (timeout -> ``APITimeoutError``, transport error -> ``APIConnectionError``, both
    made by the SDK's own helpers where it has them; any other status than 2xx -> the SDK's
    ``_make_status_error_from_response``). ``stream``: the response is returned with its body
    unread, as the SDK's ``request`` returns a raw streamed response (an error status's body is
    read first, as the SDK reads it, for its message)."""
    import httpx2

    sdk = _sdk_of(client)
    parts = _sdk_parts(sdk) if sdk is not None else None
    assert sdk is not None and parts is not None
    final_options, get_platform, asyncify, request_errors, base_error = parts
    limits = tuple(timeout.as_dict().items()) if isinstance(timeout, httpx2.Timeout) else timeout
    key = (path, tuple(sorted((headers or {}).items())), limits)
    per_client = _templates.setdefault(client, {})
    template = per_client.get(key)
    if template is None:
        if client._platform is None:  # as the SDK's request() does, off the event loop
            client._platform = await asyncify(get_platform)()
        options: dict[str, Any] = {"timeout": timeout}
        if headers:
            options["headers"] = headers
        # no body: the anthropic SDK refuses bytes there, and the body is sent as content anyway
        built = client._build_request(final_options.construct(method="post", url=path, **options))
        template = (built.url,  # the headers normalised once, copied by each Request
                    httpx2.Headers([(k, v) for k, v in built.headers.multi_items()
                                    if k.lower() != "content-length"]),
                    built.extensions.get("timeout"))
        per_client[key] = template
    url, header_items, timeout_ext = template
    http: httpx2.AsyncClient = client._client
    content = encode_body(payload)
    extensions = {"timeout": timeout_ext} if timeout_ext is not None else None
    if http.cookies:  # cookies the server set: merged as the client merges them
        request = http.build_request("POST", url, headers=header_items, content=content,
                                     extensions=extensions)
    else:  # build_request's result when there is nothing to merge: the template already holds the
        # client's default headers, merged by the SDK's first build
        request = httpx2.Request("POST", url, headers=header_items, content=content, extensions=extensions)
    try:
        response = await http.send(request, stream=stream)
    except httpx2.TimeoutException as err:
        raise _transport_error(sdk, client, request, err, timed_out=True) from err
    except base_error:
        raise
    except (*request_errors, *aiohttp_errors()) as err:  # aiohttp's parse errors pass the adapter
        raise _transport_error(sdk, client, request, err, timed_out=False) from err
    if not response.is_success:  # the SDK's raise_for_status(): any status but 2xx
        if not response.is_closed:  # a streamed response: its body holds the error's message
            await response.aread()
        raise client._make_status_error_from_response(response) from None
    return response


def _transport_error(sdk: str, client: Any, request: Any, err: BaseException, *,
                     timed_out: bool) -> Exception:
    """The SDK's error for a send that failed (``timed_out``: ``APITimeoutError``, else
    ``APIConnectionError``), made as the SDK's own request path makes it: the anthropic SDK's
    helpers name the host and the limit or reason; the openai SDK's errors carry the request."""
    if sdk == "anthropic":  # its _attempt_request
        make = client._make_timeout_error if timed_out else client._make_connection_error
        made = make(request, err)
        error: Exception = client._transport_error(made, None)
        return error
    import openai

    return (openai.APITimeoutError if timed_out else openai.APIConnectionError)(request=request)


@functools.cache
def _sdk_parts(sdk: str) -> tuple[Any, Any, Any, tuple[type[BaseException], ...], type[BaseException]] | None:
    """The internals of SDK ``sdk`` (openai or anthropic) that :func:`_lean_post` uses:
    ``(FinalRequestOptions, get_platform, asyncify, the transport errors it maps to a connection
    error, the SDK's base error)``, or None when this SDK version lacks one (every request then
    goes through ``post``). The anthropic SDK maps every exception of a send that is not its own
    to a connection error."""
    needed = ("_build_request", "_make_status_error_from_response")
    try:
        if sdk == "openai":
            import openai
            from openai._base_client import get_platform
            from openai._httpx2 import request_exceptions
            from openai._models import FinalRequestOptions
            from openai._utils import asyncify

            if not all(hasattr(openai.AsyncOpenAI, n) for n in needed):  # pragma: no cover
                return None
            return FinalRequestOptions, get_platform, asyncify, request_exceptions(), openai.OpenAIError
        import anthropic
        from anthropic._base_client import get_platform as a_platform
        from anthropic._models import FinalRequestOptions as a_options
        from anthropic._utils import asyncify as a_asyncify
    except ImportError:  # pragma: no cover - another SDK layout
        return None
    helpers = (*needed, "_transport_error", "_make_timeout_error", "_make_connection_error")
    if not all(hasattr(anthropic.AsyncAnthropic, n) for n in helpers):  # pragma: no cover
        return None
    return a_options, a_platform, a_asyncify, (Exception,), anthropic.AnthropicError


class JsonView:
    """Attribute access over parsed JSON: ``view.key`` is the value of ``key`` (None when absent,
    as for an SDK model's optional field), objects and arrays wrapped lazily. For reading an
    answer with the same code that reads the SDK's models; ``[i]``, ``len`` and iteration work on
    arrays, and ``bool(view)`` is the truth of the wrapped value."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    @staticmethod
    def wrap(value: Any) -> Any:
        """``value`` itself for scalars and None, a view for an object or array."""
        return JsonView(value) if isinstance(value, (dict, list)) else value

    def __getattr__(self, name: str) -> Any:
        value = self._value
        return JsonView.wrap(value.get(name)) if isinstance(value, dict) else None

    def __getitem__(self, index: int) -> Any:
        return JsonView.wrap(self._value[index])

    def __len__(self) -> int:
        return len(self._value)

    def __iter__(self) -> Any:
        return (JsonView.wrap(v) for v in self._value)

    def __bool__(self) -> bool:
        return bool(self._value)
