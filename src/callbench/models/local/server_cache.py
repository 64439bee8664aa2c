"""A RAM prompt cache for ``callbench serve-local`` whose bound counts every byte it holds.

Cause of the growth we measured (``serve-local`` at 7.6 GiB resident after 24 minutes of two
concurrent episodes): llama-cpp-python 0.3.36's ``LlamaRAMCache`` evicts when the sum of its
states' ``llama_state_size`` (the llama.cpp context state: mostly the KV cache of the prompt)
passes its capacity, but each ``LlamaState`` that ``Llama.save_state`` makes also holds
``scores`` (a copy of ``Llama._scores``: one float32 row of the vocabulary per evaluated token,
up to ``n_batch`` rows with ``logits_all`` off: 512 x 151,936 x 4 B = 311 MB for Qwen2.5) and
``input_ids`` (``n_ctx`` int32). Those are not counted, so a cache sized 2 GiB that counted about
60 MB per 5,000-token state of the 0.5B model really held about 370 MB per state, and grew
towards 12 GB before its first eviction (``llama_cpp/llama_cache.py``, ``llama.py``
``save_state``/``load_state``).

:class:`BoundedRAMCache` fixes both halves:

- a state's ``scores`` are kept as their last row only. ``Llama.load_state`` sets
  ``_requires_eval`` and ``Llama.generate`` then re-decodes at least the last prompt token before
  sampling, so restored scores are never read for sampling (0.3.36); one row still broadcasts
  into ``load_state``'s ``self.scores[:n_tokens, :] = state.scores`` assignment;
- eviction (least recently used first) counts ``len(llama_state) + scores.nbytes +
  input_ids.nbytes`` of every state, so resident memory stays within the model, its context and
  the cache's ``capacity_bytes``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

DEFAULT_CACHE_BYTES = 1 << 30
"""``serve-local``'s default cache bound (1 GiB): eight prompt states of 9,000 tokens of the 0.5B
model (about 110 MB of KV each), i.e. four roles of two concurrent episodes."""


def state_bytes(state: Any) -> int:
    """Bytes a ``llama_cpp.LlamaState`` holds: llama.cpp state, scores and input ids."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class BoundedRAMCache:
    """A prompt cache with ``LlamaRAMCache``'s interface (``Llama.set_cache``; lookup by longest
    common token prefix, least recently used evicted first) whose ``cache_size`` is every byte its
    states hold, and which keeps each state's scores as one row (see the module docstring).

    ``capacity_bytes``: the bound in bytes (>= 0); a single state larger than it is not kept.
    Thread-safe (the server may run requests in worker threads)."""

    def __init__(self, capacity_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.cache_state: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._sizes: dict[tuple[int, ...], int] = {}
        self._lock = threading.Lock()

    @property
    def cache_size(self) -> int:
        """Bytes held by every cached state (:func:`state_bytes`)."""
        with self._lock:
            return sum(self._sizes.values())

    def _longest(self, key: tuple[int, ...]) -> tuple[int, ...] | None:
        best, best_len = None, 0
        for k in self.cache_state:
            n = common_prefix(k, key)
            if n > best_len:
                best, best_len = k, n
        return best

    def __getitem__(self, key: Sequence[int]) -> Any:
        with self._lock:
            found = self._longest(tuple(key))
            if found is None:
                raise KeyError("Key not found")
            self.cache_state.move_to_end(found)
            return self.cache_state[found]

    def __contains__(self, key: Sequence[int]) -> bool:
        with self._lock:
            return self._longest(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], value: Any) -> None:
        scores = getattr(value, "scores", None)
        if scores is not None and scores.ndim == 2 and scores.shape[0] > 1:
            value.scores = scores[-1:, :].copy()
        k = tuple(key)
        size = state_bytes(value)
        with self._lock:
            self.cache_state.pop(k, None)
            self._sizes.pop(k, None)
            if size > self.capacity_bytes:
                return
            self.cache_state[k] = value
            self._sizes[k] = size
            total = sum(self._sizes.values())
            while total > self.capacity_bytes and self.cache_state:
                old, _ = self.cache_state.popitem(last=False)
                total -= self._sizes.pop(old)


def install_bounded_cache(llama_cpp: Any) -> None:
    """Make llama-cpp-python's server build :class:`BoundedRAMCache` for ``cache_type: ram``: its
    ``server/model.py`` (0.3.36) calls ``llama_cpp.LlamaRAMCache(capacity_bytes=...)`` when it
    loads a model. For a ``serve-local`` process only."""
    llama_cpp.LlamaRAMCache = BoundedRAMCache
