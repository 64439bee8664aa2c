"""Retries with exponential backoff and jitter, and the classification of provider errors.

Classification: a failure of the provider or the transport is an
:class:`InfrastructureError` (the episode is skipped with the reason, never charged to the
candidate); an answer that is unusable is a :class:`ModelOutputError` (recorded and graded for
candidates, retried by callers and judges). Rate limits (429), request timeouts (408), conflicts
(409), server errors (5xx, Anthropic's 529 "overloaded"), transport timeouts and connection errors
are retried; authentication (401/403) and other 4xx errors are infrastructure errors that are not
retried, since repeating the same request cannot succeed.

Backoff is "full jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015): the
n-th retry waits ``uniform(0, min(max_delay, base * 2**n))`` seconds, and at least the server's
``Retry-After`` (RFC 9110 section 10.2.3: delay-seconds or an HTTP-date; also ``retry-after-ms``,
which the OpenAI and Anthropic APIs send).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import random
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from callbench.models.base import InfrastructureError
from callbench.models.remote.secrets import Redactor
from callbench.models.remote.transport import ResponseTooLarge, aiohttp_fault_kind, cause_chain

if TYPE_CHECKING:
    import anthropic
    import openai

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})
AUTH_STATUS = frozenset({401, 403})

Sleep = Callable[[float], Awaitable[None]]


class RetryPolicy(BaseModel):
    """How often and how long to retry. ``max_attempts`` counts the first try."""

    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    max_retry_after_s: float = 600.0


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP-date).

    Returns None when absent or unparseable; negative values are clamped to 0.
    """
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = lowered.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / divisor
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    raw = lowered.get("retry-after")
    if raw:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    return None


def backoff_delay(retry_index: int, policy: RetryPolicy, rng: random.Random,
                  retry_after_s: float | None = None) -> float:
    """Seconds to wait before retry number ``retry_index`` (0-based): full jitter, and never less
    than ``retry_after_s`` when the server sent one."""
    cap = min(policy.max_delay_s, policy.base_delay_s * (2.0 ** retry_index))
    delay = rng.uniform(0.0, cap)
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return delay


def _status_message(exc: openai.APIStatusError | anthropic.APIStatusError) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return f"HTTP {exc.status_code}: {message}"


_RESET_ERRORS = ("RemoteProtocolError", "ReadError")


def _resets(exc: BaseException) -> bool:
    """True when ``exc`` (or its cause chain) is the connection closing in the middle of a
    response (``httpx2.RemoteProtocolError`` / ``ReadError``, ``ConnectionResetError``)."""
    return any(isinstance(seen, ConnectionResetError) or type(seen).__name__ in _RESET_ERRORS
               for seen in cause_chain(exc))


def _in_chain(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of class ``kind`` in ``exc``'s cause chain (``exc`` included), or None."""
    return next((seen for seen in cause_chain(exc) if isinstance(seen, kind)), None)


def status_kind(status: int) -> str:
    """The fault kind of an HTTP error status (``models/faults.py``)."""
    if status == 429:
        return "rate_limit"
    if status in AUTH_STATUS:
        return "auth"
    if status == 404:
        return "not_found"
    if status >= 500 or status in RETRYABLE_STATUS:
        return "server_error"
    return "client_error"


_SDKS = ("openai", "anthropic", "httpx2")


def _sdk_classes(*names: str) -> tuple[type[BaseException], ...]:
    """The classes called ``names`` in the SDKs (openai, anthropic) and their transport (httpx2)
    that this process has imported. An SDK not imported raised nothing, so its classes need not be
    loaded to classify (importing the SDKs costs about a second: ``callbench validate`` never needs
    them)."""
    found: list[Any] = []
    for sdk in _SDKS:
        module = sys.modules.get(sdk)
        if module is not None:
            found += [getattr(module, n) for n in names if isinstance(getattr(module, n, None), type)]
    return tuple(found)


def classify_exception(exc: BaseException, *, provider: str, redactor: Redactor,
                       role: str = "") -> InfrastructureError | None:
    """Map an SDK or transport exception to an :class:`InfrastructureError` with its fault
    ``kind``, or None when ``exc`` is not a provider failure (a programming error, which should
    propagate). A body that does not decode (``json.JSONDecodeError``, ``UnicodeDecodeError``
    raised while the SDK reads a response) is a provider anomaly too. An
    exception of the aiohttp transport is named by ``transport.aiohttp_fault_kind`` (the SDK
    adapter's own mapping calls a refused connection a timeout).

    The message names the provider and the role (when given) and never contains a registered
    secret.
    """
    who = f"{provider} {role}".strip()
    timeouts: tuple[type[BaseException], ...] = (
        asyncio.TimeoutError, TimeoutError, *_sdk_classes("APITimeoutError", "TimeoutException"))
    connections: tuple[type[BaseException], ...] = (
        ConnectionError, *_sdk_classes("APIConnectionError", "TransportError"))
    statuses = _sdk_classes("APIStatusError")
    too_large = _in_chain(exc, ResponseTooLarge)
    if too_large is not None:  # transport.bound_responses: a huge body or a gzip bomb
        return InfrastructureError(f"{who}: malformed_body: {too_large}", retryable=True,
                                   kind="malformed_body")
    kind = aiohttp_fault_kind(exc)  # the aiohttp transport's own exception names the fault
    if kind == "timeout" or (kind is None and isinstance(exc, timeouts)):
        return InfrastructureError(f"{who}: timeout: request timed out", retryable=True, kind="timeout")
    if kind is not None or isinstance(exc, connections):
        kind = kind or ("reset" if _resets(exc) else "connection")
        text = (f"{who}: reset: the connection closed in the middle of the response" if kind == "reset"
                else f"{who}: connection error: {exc}")
        return InfrastructureError(redactor.clean(text), retryable=True, kind=kind)
    if isinstance(exc, UnicodeDecodeError):
        return InfrastructureError(f"{who}: not_utf8: the response body is not UTF-8 ({exc.reason})",
                                   retryable=True, kind="not_utf8")
    if isinstance(exc, json.JSONDecodeError):
        return InfrastructureError(f"{who}: malformed_body: the response body is not JSON "
                                   f"({exc.msg} at line {exc.lineno} column {exc.colno})",
                                   retryable=True, kind="malformed_body")
    if isinstance(exc, statuses):
        failed: Any = exc  # an openai or anthropic APIStatusError
        status = failed.status_code
        if status < 200:  # a 1xx as the final answer (101 to a request that asked no upgrade,
            # RFC 9110 section 15.2): the exchange is broken, as httpx2 reports it (h11 closes)
            return InfrastructureError(f"{who}: reset: HTTP {status} where a final response was due",
                                       retryable=True, kind="reset")
        retry_after = parse_retry_after(dict(failed.response.headers))
        kind = status_kind(status)
        text = redactor.clean(f"{who}: {kind}: {_status_message(failed)}")
        if status in AUTH_STATUS:
            key_var = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
            return InfrastructureError(f"{text} (authentication failed: check {key_var})",
                                       retryable=False, status=status, kind=kind)
        retryable = status in RETRYABLE_STATUS or status >= 500
        return InfrastructureError(text, retryable=retryable, status=status, retry_after_s=retry_after,
                                   kind=kind)
    return None


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    rng: random.Random,
    sleep: Sleep = asyncio.sleep,
    what: str = "request",
    on_retry: Callable[[InfrastructureError, float], None] | None = None,
) -> T:
    """Await ``fn()``, retrying retryable :class:`InfrastructureError` s with backoff.

    Raises the last error unchanged when it is not retryable, or a non-retryable
    InfrastructureError saying how many attempts were made once ``policy.max_attempts`` run out
    (or the server asks to wait longer than ``policy.max_retry_after_s``).
    Other exceptions (including ModelOutputError) propagate at once. ``on_retry`` is called with
    each error that is retried and the seconds it will sleep before the retry. The error raised
    keeps the last error's ``kind`` and ``status``.
    """
    attempts = max(1, policy.max_attempts)
    for index in range(attempts):
        try:
            return await fn()
        except InfrastructureError as err:
            if not err.retryable:
                if what in str(err):
                    raise
                raise InfrastructureError(f"{what}: {err}", retryable=False, status=err.status,
                                          kind=err.kind, role=err.role) from None
            if err.retry_after_s is not None and err.retry_after_s > policy.max_retry_after_s:
                raise InfrastructureError(
                    f"{err} (server asked to retry after {err.retry_after_s:.0f}s, over the "
                    f"{policy.max_retry_after_s:.0f}s limit)", retryable=False, status=err.status,
                    kind=err.kind, role=err.role) from None
            if index == attempts - 1:
                raise InfrastructureError(f"{what} failed after {attempts} attempts: {err}",
                                          retryable=False, status=err.status, kind=err.kind,
                                          role=err.role) from None
            delay = backoff_delay(index, policy, rng, err.retry_after_s)
            if on_retry is not None:
                on_retry(err, delay)
            await sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
