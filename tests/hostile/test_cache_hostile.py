"""The cache never replays a reply into a crash: a hostile reply is cached as what it is and
charged the same way on every replay (read_write and replay_only), an output error keeps its kind,
and a row that does not read back is asked again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.hostile.helpers import SCENARIO, Replies

from callbench.bundle.models import Bundle
from callbench.models.base import ModelOutputError, ModelResponse, ToolCall, Usage
from callbench.models.cache import CachedClient, CacheMode, ResponseCache
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import EndReason, Trace

DEEP = "[" * 3000 + "]" * 3000
HOSTILE = [
    ModelResponse(content="Hello \ud800", usage=Usage(calls=1, output_tokens=3)),
    ModelResponse(content="Checking.", usage=Usage(calls=1, output_tokens=5), tool_calls=[
        ToolCall(id="a", name="verify_customer", arguments='{"identifier": "\\udfff"}'),
        ToolCall(id="b", name="verify_customer", arguments=f'{{"x": {DEEP}}}')]),
    "Goodbye.",
]


class Forbidden(Replies):
    async def complete(self, request: Any) -> ModelResponse:
        raise AssertionError("the model was asked although the cache holds the reply")


async def _episode(bundle: Bundle, candidate: Any, caller: Any = None) -> Trace:
    agent, scen = bundle.scenario(SCENARIO)
    return await run_episode(
        agent, scen, candidate=candidate, caller=caller or create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name, bundle_version=bundle.meta.version, bundle_hash=bundle.content_hash,
        episode_id="cache-r0", run_seed=5, repeat=0,
    )


def _cached(inner: Any, path: Path, mode: CacheMode) -> Any:
    return CachedClient(inner, ResponseCache(path, mode))


async def test_hostile_reply_replays_the_same_in_both_modes(starter: Bundle, tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    first = await _episode(starter, _cached(Replies(HOSTILE), db, CacheMode.READ_WRITE))
    assert [e.outcome for e in first.tool_events] == ["schema_error", "parse_error"]
    assert first.messages[1].content == "Hello \\ud800"
    again = await _episode(starter, _cached(Forbidden([]), db, CacheMode.READ_WRITE))
    replay = await _episode(starter, _cached(Forbidden([]), db, CacheMode.REPLAY_ONLY))
    assert again.sha256() == replay.sha256() == first.sha256()
    assert again.usage["candidate"] == first.usage["candidate"]  # charged the same, from the cache


async def test_output_error_keeps_its_kind(starter: Bundle, tmp_path: Path) -> None:
    """A caller's empty reply is the provider's fault (a skip, run again on resume), not a caller
    rejection: a replay from the cache must charge it the same way."""
    db = tmp_path / "cache.sqlite"
    empty = ModelOutputError("no content", raw=None, usage=Usage(calls=1), kind="empty_reply")
    cand = create_scripted("scripted:reference", None, starter)
    first = await _episode(starter, cand, _cached(Replies([empty]), db, CacheMode.READ_WRITE))
    replay = await _episode(starter, cand, _cached(Forbidden([]), db, CacheMode.REPLAY_ONLY))
    assert first.end_reason == replay.end_reason == EndReason.SKIPPED
    assert replay.skip_reason == first.skip_reason and "no content" in (first.skip_reason or "")


async def test_unreadable_row_is_asked_again(tmp_path: Path) -> None:
    from callbench.models.base import ModelRequest, RequestContext

    cache = ResponseCache(tmp_path / "c.sqlite", CacheMode.READ_WRITE)
    req = ModelRequest(messages=[], context=RequestContext(role="candidate", episode_id="e"))
    key = cache.next_key("scripted:hostile", Replies([]).settings, req)
    await cache.put(key, "scripted:hostile", "response", "{not json")
    cache._counts.clear()
    got = await CachedClient(Replies(["fresh"]), cache).complete(req)
    assert got.content == "fresh"
    cache._counts.clear()
    assert (await CachedClient(Forbidden([]), cache).complete(req)).content == "fresh"
