"""The response cache: keys, modes, exact replay, concurrency, no secrets stored."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    RequestContext,
    Usage,
)
from callbench.models.cache import CachedClient, ResponseCache, request_fingerprint
from callbench.models.registry import create_client


def req(text: str = "hi", episode: str = "ep1", attempt: int = 0, schema: dict | None = None) -> ModelRequest:
    return ModelRequest(
        messages=[ChatMessage(role="system", content="S"), ChatMessage(role="user", content=text)],
        response_schema=schema,
        context=RequestContext(role="caller", episode_id=episode, attempt=attempt),
    )


class Counting:
    """A fake inner client: answers 'reply <n>' and counts calls."""

    spec = "openai:fake"
    embedded_smoke_test_model = False

    def __init__(self, fail_output: bool = False) -> None:
        self.settings = ModelSettings(temperature=0.5)
        self.calls = 0
        self.fail_output = fail_output

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        n = self.calls
        await asyncio.sleep(0)
        if self.fail_output:
            raise ModelOutputError(f"bad {n}", raw="{oops", usage=Usage(output_tokens=n))
        return ModelResponse(
            content=f"reply {n}", usage=Usage(input_tokens=10, output_tokens=n, cost_usd=0.5, latency_s=0.25)
        )

    async def aclose(self) -> None:
        pass


def test_fingerprint_covers_output_settings_only():
    base = ModelSettings(temperature=0.1)
    fp = request_fingerprint("openai:a", base, req())
    assert fp == request_fingerprint(
        "openai:a",
        base.model_copy(update={"base_url": "http://x", "extra_headers": {"X-Title": "t"}, "timeout_s": 5.0}),
        req(),
    )
    assert fp != request_fingerprint("openai:a", ModelSettings(temperature=0.2), req())
    assert fp != request_fingerprint("openai:b", base, req())
    assert fp != request_fingerprint("openai:a", base, req("other"))
    assert fp != request_fingerprint("openai:a", base, req(schema={"type": "object"}))
    # context is not part of the fingerprint (it selects the sample slot instead)
    assert fp == request_fingerprint("openai:a", base, req(episode="ep2"))


async def test_read_write_then_replay_only(tmp_path: Path):
    path = tmp_path / "cache.sqlite"
    inner = Counting()
    client = CachedClient(inner, ResponseCache(path, "read_write"))
    first = [
        await client.complete(req()),
        await client.complete(req()),  # same request twice: two slots
        await client.complete(req(episode="ep2")),
        await client.complete(req(attempt=1)),
    ]
    assert [r.content for r in first] == ["reply 1", "reply 2", "reply 3", "reply 4"]
    assert inner.calls == 4 and client.cache.count() == 4

    replay_inner = Counting()
    replay = CachedClient(replay_inner, ResponseCache(path, "replay_only"))
    again = [
        await replay.complete(req()),
        await replay.complete(req()),
        await replay.complete(req(episode="ep2")),
        await replay.complete(req(attempt=1)),
    ]
    assert replay_inner.calls == 0
    for a, b in zip(first, again, strict=True):
        assert b.cached is True
        assert a.model_dump() == b.model_copy(update={"cached": False}).model_dump()  # usage included
    with pytest.raises(
        InfrastructureError, match=r"replay-only cache miss for openai:fake .*key [0-9a-f]{64}"
    ) as info:
        await replay.complete(req())  # a third identical request has no stored slot
    assert info.value.retryable is False
    assert replay_inner.calls == 0


async def test_off_mode_passes_through(tmp_path: Path):
    inner = Counting()
    client = CachedClient(inner, ResponseCache(tmp_path / "c.sqlite", "off"))
    assert (await client.complete(req())).content == "reply 1"
    assert (await client.complete(req())).content == "reply 2"
    assert not (tmp_path / "c.sqlite").exists()
    with pytest.raises(ValueError, match="cache mode 'sometimes'"):
        ResponseCache(tmp_path / "c.sqlite", "sometimes")


async def test_model_output_errors_replay(tmp_path: Path):
    path = tmp_path / "cache.sqlite"
    client = CachedClient(Counting(fail_output=True), ResponseCache(path))
    with pytest.raises(ModelOutputError, match="bad 1"):
        await client.complete(req())
    replay = CachedClient(Counting(), ResponseCache(path, "replay_only"))
    with pytest.raises(ModelOutputError, match="bad 1") as info:
        await replay.complete(req())
    assert info.value.raw == "{oops" and info.value.usage == Usage(output_tokens=1)


async def test_concurrent_episodes(tmp_path: Path):
    inner = Counting()
    client = CachedClient(inner, ResponseCache(tmp_path / "cache.sqlite"))
    out = await asyncio.gather(*(client.complete(req(episode=f"ep{i % 5}")) for i in range(40)))
    assert inner.calls == 40 and client.cache.count() == 40
    assert len({r.content for r in out}) == 40
    replay = CachedClient(Counting(), ResponseCache(tmp_path / "cache.sqlite", "replay_only"))
    again = [await replay.complete(req(episode=f"ep{i}")) for i in range(5)]
    assert all(r.cached for r in again)


async def test_real_adapter_replays_exactly_and_stores_no_key(tmp_path: Path, keys, mk):
    rec = mk.Recorder(
        mk.json_response(mk.openai_completion("Hello there.", prompt=50, completion=7, cached=10))
    )
    cache = ResponseCache(tmp_path / "cache.sqlite")
    settings = ModelSettings(extra_headers={"X-Api-Key": "env:OPENAI_API_KEY"}, seed=1)
    client = create_client("openai:gpt-4o", settings, cache=cache, http_client=rec.client())
    client.inner._rng = random.Random(0)  # type: ignore[attr-defined]
    first = await client.complete(req())
    assert len(rec.requests) == 1
    assert rec.requests[0].headers["X-Api-Key"] == keys
    replay = create_client(
        "openai:gpt-4o",
        settings,
        cache=ResponseCache(tmp_path / "cache.sqlite", "replay_only"),
        http_client=mk.Recorder(RuntimeError("network used")).client(),
    )
    second = await replay.complete(req())
    assert second.model_copy(update={"cached": False}) == first
    assert second.usage.cost_usd == first.usage.cost_usd and first.usage.cost_usd is not None
    rows = sqlite3.connect(tmp_path / "cache.sqlite").execute("SELECT * FROM responses").fetchall()
    assert rows and all(keys not in "|".join(map(str, row)) for row in rows)
    assert keys not in first.model_dump_json()
