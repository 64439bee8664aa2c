"""The bounded prompt cache of ``serve-local``, with stand-in states."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from callbench.models.local.server_cache import BoundedRAMCache, install_bounded_cache, state_bytes

VOCAB = 1000


@dataclass
class FakeState:
    """The fields of ``llama_cpp.LlamaState`` the cache reads."""

    scores: np.ndarray
    input_ids: np.ndarray
    llama_state_size: int


def state(rows: int, kv: int = 1000) -> FakeState:
    return FakeState(scores=np.ones((rows, VOCAB), dtype=np.float32),
                     input_ids=np.zeros(64, dtype=np.intc), llama_state_size=kv)


def test_scores_kept_as_their_last_row_and_counted() -> None:
    cache = BoundedRAMCache(capacity_bytes=1 << 20)
    s = state(rows=300)
    s.scores[-1, :] = 7.0
    cache[[1, 2, 3]] = s
    kept = cache[[1, 2, 3, 4]]
    assert kept.scores.shape == (1, VOCAB)
    assert float(kept.scores[0, 0]) == 7.0
    assert cache.cache_size == 1000 + VOCAB * 4 + 64 * 4 == state_bytes(kept)


def test_every_byte_counts_toward_the_bound() -> None:
    # each state: 1000 + 4000 + 256 bytes once compacted; the bound holds three
    one = 1000 + VOCAB * 4 + 64 * 4
    cache = BoundedRAMCache(capacity_bytes=3 * one)
    for i in range(10):
        cache[[i, i, i]] = state(rows=512)
        assert cache.cache_size <= 3 * one
    assert sorted(k[0] for k in cache.cache_state) == [7, 8, 9]


def test_longest_prefix_wins_and_recent_use_protects_from_eviction() -> None:
    one = 1000 + VOCAB * 4 + 64 * 4
    cache = BoundedRAMCache(capacity_bytes=2 * one)
    cache[[1, 2]] = state(1, kv=1000)
    cache[[1, 2, 3, 4]] = state(1, kv=1000)
    assert cache[[1, 2, 3, 9]] is cache.cache_state[(1, 2, 3, 4)]
    # both share two tokens with (1, 2, 9): the first in recency order, (1, 2), is used, so the
    # least recently used entry is now (1, 2, 3, 4) and the next insertion evicts it
    assert cache[[1, 2, 9]] is cache.cache_state[(1, 2)]
    cache[[5]] = state(1)
    assert list(cache.cache_state) == [(1, 2), (5,)]
    with pytest.raises(KeyError):
        cache[[8, 8]]
    assert [8] not in cache


def test_a_state_over_the_bound_is_not_kept() -> None:
    cache = BoundedRAMCache(capacity_bytes=100)
    cache[[1]] = state(1)
    assert cache.cache_size == 0 and [1] not in cache
    with pytest.raises(ValueError, match="capacity_bytes"):
        BoundedRAMCache(capacity_bytes=-1)


def test_install_replaces_the_servers_ram_cache_class() -> None:
    class Module:
        LlamaRAMCache: object = object

    install_bounded_cache(Module)
    assert Module.LlamaRAMCache is BoundedRAMCache
