"""JSON over HTTP for deployed adapters, with faults classified like a model provider's.

Every request is counted in the episode's fault ledger for the ``candidate`` role
(:mod:`callbench.models.faults`); every failure raises
:class:`~callbench.models.base.InfrastructureError` with the ledger's kinds: ``rate_limit`` (429),
``server_error`` (5xx, 408, 409), ``auth`` (401/403), ``not_found`` (404), ``client_error``
(other 4xx), ``timeout``, ``connection``, ``malformed_body`` (a body that is not JSON). An
infrastructure error skips the episode (a resume runs it again); it is never charged to the agent.
Error messages name the adapter and the request path, never a header or a query value.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from callbench.models.base import InfrastructureError
from callbench.models.faults import note_fault, note_request, note_retry
from callbench.models.remote.secrets import Redactor

MAX_REPLY_BYTES = 4 * 1024 * 1024


def status_kind(status: int) -> str:
    """The fault kind of an HTTP error status (module docstring)."""
    if status == 429:
        return "rate_limit"
    if status >= 500 or status in (408, 409):
        return "server_error"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    return "client_error"


def _where(adapter: str, url: str) -> str:
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{adapter}: {parts.scheme}://{parts.hostname}{port}{parts.path}"


async def request_json(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    adapter: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 60.0,
    attempts: int = 1,
    redactor: Redactor | None = None,
) -> Any:
    """Send ``body`` as JSON and return the decoded JSON reply (None for an empty 2xx body).
    ``attempts`` > 1 retries rate limits, 5xx, timeouts and connection failures with a short
    backoff (only for requests that change nothing on a retry, such as opening a session).
    Raises InfrastructureError (module docstring) with ``role="candidate"``; its message passes
    through ``redactor`` (an agent's error body may echo a header or the webhook URL)."""
    where = _where(adapter, url)
    last: InfrastructureError | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            wait_s = (min(2.0, 0.1 * 2**attempt) if last is None or last.retry_after_s is None
                      else min(last.retry_after_s, 10.0))
            note_retry("candidate", None if last is None else last.kind, wait_s)
            await asyncio.sleep(wait_s)
        note_request("candidate")
        try:
            last = None
            async with session.request(
                method, url, json=body, headers=headers or {}, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as resp:
                raw = await resp.content.read(MAX_REPLY_BYTES + 1)
                if resp.status >= 400:
                    kind = status_kind(resp.status)
                    retry_after = resp.headers.get("Retry-After")
                    last = InfrastructureError(
                        f"{where}: HTTP {resp.status} {_short(raw)}",
                        status=resp.status,
                        kind=kind,
                        role="candidate",
                        retryable=kind in ("rate_limit", "server_error"),
                        retry_after_s=float(retry_after) if retry_after and retry_after.isdigit() else None,
                    )
                elif len(raw) > MAX_REPLY_BYTES:
                    last = InfrastructureError(
                        f"{where}: reply over {MAX_REPLY_BYTES} bytes",
                        kind="malformed_body",
                        role="candidate",
                        retryable=False,
                    )
                else:
                    if not raw.strip():
                        return None
                    try:
                        return json.loads(raw)
                    except (ValueError, UnicodeDecodeError):
                        last = InfrastructureError(
                            f"{where}: reply is not JSON: {_short(raw)}",
                            kind="malformed_body",
                            role="candidate",
                            retryable=False,
                        )
        except TimeoutError:
            last = InfrastructureError(
                f"{where}: no reply within {timeout_s:g} s", kind="timeout", role="candidate"
            )
        except aiohttp.ClientError as e:
            last = InfrastructureError(f"{where}: {type(e).__name__}", kind="connection", role="candidate")
        note_fault("candidate", last.kind)
        if not last.retryable:
            break
    assert last is not None
    if redactor is not None:
        last.args = (redactor.clean(str(last)),)
    raise last


def _short(raw: bytes) -> str:
    text = raw[:200].decode("utf-8", "replace").replace("\n", " ")
    return text + ("..." if len(raw) > 200 else "")
