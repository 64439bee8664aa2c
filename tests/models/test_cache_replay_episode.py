"""A whole episode recorded through the cache and replayed in replay-only mode is byte-identical,
even though the model behind it answers differently on every call."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelRequest, ModelResponse
from callbench.models.cache import CachedClient, ResponseCache
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode

STARTER = Path(__file__).resolve().parents[2] / "src" / "callbench" / "examples" / "starter"


class Noisy:
    """Wraps a scripted model and adds run-to-run noise (latency, speed) like a real provider."""

    def __init__(self, inner, rng: random.Random | None) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.settings = inner.settings
        self.rng = rng
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.rng is None:
            raise AssertionError("the model was called during a replay-only run")
        self.calls += 1
        response = await self.inner.complete(request)
        usage = response.usage.model_copy(
            update={"latency_s": self.rng.random(), "tokens_per_second": self.rng.uniform(10, 90)}
        )
        return response.model_copy(update={"usage": usage})

    async def aclose(self) -> None:
        pass


async def test_replay_only_reproduces_trace_bytes(tmp_path: Path):
    if not STARTER.is_dir():
        pytest.skip("starter bundle not present")
    bundle = load_bundle(STARTER)
    agent = next(iter(bundle.agents.values()))
    scenario = agent.scenarios[0]

    async def episode(mode: str, rng: random.Random | None) -> tuple[str, int]:
        cache = ResponseCache(tmp_path / "cache.sqlite", mode)
        cand = Noisy(create_scripted("scripted:reference", None, bundle), rng)
        caller = Noisy(create_scripted("scripted:plan", None, bundle), rng)
        trace = await run_episode(
            agent,
            scenario,
            candidate=CachedClient(cand, cache),
            caller=CachedClient(caller, cache),
            bundle_name=bundle.meta.name,
            bundle_version=bundle.meta.version,
            bundle_hash=bundle.content_hash,
            episode_id=f"x--{scenario.id}--r0",
            run_seed=11,
            repeat=0,
        )
        cache.close()
        return trace.canonical_json(), cand.calls + caller.calls

    first, calls = await episode("read_write", random.Random(1))
    assert calls > 2
    replayed, replay_calls = await episode("replay_only", None)
    assert replay_calls == 0
    assert replayed == first
    fresh, _ = await episode("off", random.Random(2))
    assert fresh != first  # without the cache the noise shows: the equality above is not vacuous
