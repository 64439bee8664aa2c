"""The response cache: SQLite, keyed by the SHA-256 of the canonical request.

Modes: ``off`` (no cache), ``read_write`` (answer from the cache when present, else call the
model and store the answer), ``replay_only`` (answer only from the cache; a miss raises a
non-retryable :class:`InfrastructureError` naming the key, and the network is never used).

The key hashes canonical JSON (sorted keys, no whitespace) of: the model spec; the messages,
tools, response schema and its name; the settings that shape the output (everything except
``base_url``, ``extra_headers`` and ``timeout_s``, which say where and how to reach the endpoint
and may hold secrets); and the *sample slot*: ``(episode_id, attempt, n)`` where ``n`` counts
earlier identical requests of that episode and attempt in this process. The slot keeps repeats
apart (repeat 2 of a scenario must not reuse repeat 1's sampled answers), keeps a re-asked caller
turn from getting the rejected answer back, and is deterministic because an episode sends its
requests one after another. So a run repeated in replay-only mode asks for exactly the keys the
first run stored and gets every response back as stored (the full ModelResponse JSON, usage
included). ``cached`` is set True on a response served from the cache.

A :class:`ModelOutputError` is cached as well (its message, raw text, usage and kind), so a replay
meets the same unusable answers and takes the same retry path. A reply is cached as what it is and
charged again the same way (docs/decisions.md "Hostile model output"): every check that turns a
reply into an output error (JSON limits, schemas, tool arguments) runs after the cache, on the
cached text, so a replayed reply fails exactly as it did the first time and is charged to the same
role, and no reply can crash an episode, so resume never meets the same crash again. Text is stored
through :func:`~callbench.models.output_limits.safe_response` (a lone surrogate as its escape's
text) and the model's own call gets the same text back, so the first run and a replay agree. A row
that cannot be read back is a miss (``read_write`` asks the model again and replaces it).

Concurrency: one connection per cache, WAL journal, a busy timeout for other processes, and an
asyncio lock around each statement; inserts are single ``INSERT OR IGNORE`` transactions, so
two episodes storing the same key keep the first answer.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import sqlite3
from collections import defaultdict
from enum import StrEnum
from pathlib import Path
from typing import Any

from callbench.models.base import (
    InfrastructureError,
    ModelClient,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Usage,
    identity_settings,
)
from callbench.models.output_limits import safe_error_text, safe_response, safe_text

NON_KEY_SETTINGS = frozenset({"base_url", "extra_headers", "timeout_s", "max_attempts", "retry_base_delay_s",
                              "stream"})
SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    kind TEXT NOT NULL,          -- 'response' or 'model_output_error'
    payload TEXT NOT NULL,       -- ModelResponse JSON, or the error's message/raw/usage JSON
    created TEXT NOT NULL
)
"""


class CacheMode(StrEnum):
    OFF = "off"
    READ_WRITE = "read_write"
    REPLAY_ONLY = "replay_only"


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept (the form that is hashed)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_fingerprint(spec: str, settings: ModelSettings, request: ModelRequest) -> str:
    """SHA-256 (hex) of the canonical request without its sample slot."""
    material: dict[str, Any] = {
        "spec": spec,
        "settings": identity_settings(settings, NON_KEY_SETTINGS),
        "messages": [m.model_dump(mode="json") for m in request.messages],
        "tools": [t.model_dump(mode="json") for t in request.tools],
        "response_schema": request.response_schema,
        "response_schema_name": request.response_schema_name,
    }
    if request.max_output_tokens is not None:  # only when set: older fingerprints stay valid
        material["max_output_tokens"] = request.max_output_tokens
    return hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()


def slot_key(fingerprint: str, episode_id: str, attempt: int, n: int) -> str:
    """The cache key: SHA-256 (hex) of the fingerprint and its sample slot."""
    slot = canonical_json({"request": fingerprint, "episode": episode_id, "attempt": attempt, "n": n})
    return hashlib.sha256(slot.encode("utf-8")).hexdigest()


class ResponseCache:
    """A SQLite response cache at ``path`` in ``mode`` (a CacheMode or its string value).

    Raises ValueError for an unknown mode. The parent folder is created.
    """

    def __init__(self, path: Path | str, mode: CacheMode | str = CacheMode.READ_WRITE) -> None:
        try:
            self.mode = CacheMode(mode)
        except ValueError:
            raise ValueError(f"cache mode {mode!r}: expected one of off, read_write, replay_only") from None
        self.path = Path(path)
        self._lock = asyncio.Lock()
        self._counts: dict[tuple[str, str, int], int] = defaultdict(int)
        self._conn: sqlite3.Connection | None = None
        if self.mode is not CacheMode.OFF:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(SCHEMA)
            self._conn = conn

    def next_key(self, spec: str, settings: ModelSettings, request: ModelRequest) -> str:
        """The key for this request's next sample slot (advances the slot counter)."""
        fp = request_fingerprint(spec, settings, request)
        slot = (fp, request.context.episode_id, request.context.attempt)
        n = self._counts[slot]
        self._counts[slot] = n + 1
        return slot_key(fp, request.context.episode_id, request.context.attempt, n)

    async def get(self, key: str) -> tuple[str, str] | None:
        """``(kind, payload)`` stored under ``key``, or None."""
        if self._conn is None:
            return None
        async with self._lock:
            row = self._conn.execute("SELECT kind, payload FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], row[1])

    async def put(self, key: str, spec: str, kind: str, payload: str, *, replace: bool = False) -> None:
        """Store ``payload`` under ``key`` unless a row is already there (first answer wins), or
        in its place with ``replace`` (a row that could not be read back)."""
        if self._conn is None:
            return
        created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        verb = "REPLACE" if replace else "IGNORE"
        async with self._lock:
            self._conn.execute(
                f"INSERT OR {verb} INTO responses (key, spec, kind, payload, created) VALUES (?, ?, ?, ?, ?)",
                (key, spec, kind, payload, created))

    def count(self) -> int:
        """Number of stored rows (0 when off)."""
        if self._conn is None:
            return 0
        return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _decode(kind: str, payload: str) -> ModelResponse | ModelOutputError | None:
    """A stored row as the response or output error it records (the error's ``kind`` kept; rows
    stored before it was: ``invalid_output``), or None when the row does not read back."""
    try:
        if kind == "model_output_error":
            data = json.loads(payload)
            usage = Usage.model_validate(data["usage"]) if data.get("usage") else None
            return ModelOutputError(str(data["message"]), raw=data.get("raw"), usage=usage,
                                    kind=str(data.get("kind") or "invalid_output"))
        if kind == "response":
            return ModelResponse.model_validate_json(payload)
    except (ValueError, KeyError, TypeError):
        return None
    return None


class CachedClient:
    """A ModelClient that consults ``cache`` before ``inner``. Attributes of ``inner`` (such as
    ``embedded_smoke_test_model``) show through."""

    def __init__(self, inner: ModelClient, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.spec = inner.spec
        self.settings = inner.settings

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Serve from the cache, or call ``inner`` and store (read_write), or raise
        InfrastructureError(retryable=False) on a replay_only miss."""
        if self.cache.mode is CacheMode.OFF:
            return await self.inner.complete(request)
        key = self.cache.next_key(self.spec, self.settings, request)
        hit = await self.cache.get(key)
        if hit is not None:
            stored = _decode(*hit)
            if isinstance(stored, ModelOutputError):
                raise stored
            if stored is not None:
                return stored.model_copy(update={"cached": True})
        if self.cache.mode is CacheMode.REPLAY_ONLY:
            ctx = request.context
            raise InfrastructureError(
                f"replay-only cache miss for {self.spec} ({ctx.role}, episode {ctx.episode_id or '-'}, "
                f"turn {ctx.turn}, attempt {ctx.attempt}): key {key} is not in {self.cache.path}",
                retryable=False)
        replace = hit is not None  # a row that did not read back is replaced
        try:
            response = safe_response(await self.inner.complete(request))
        except ModelOutputError as err:
            safe = ModelOutputError(safe_text(str(err)), raw=safe_error_text(err.raw), usage=err.usage,
                                    kind=err.kind)
            payload = canonical_json({"message": str(safe), "raw": safe.raw, "kind": safe.kind,
                                      "usage": err.usage.model_dump(mode="json") if err.usage else None})
            await self.cache.put(key, self.spec, "model_output_error", payload, replace=replace)
            raise safe from None
        await self.cache.put(key, self.spec, "response", response.model_dump_json(), replace=replace)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
