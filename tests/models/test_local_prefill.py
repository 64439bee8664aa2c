"""Reading a long local prompt in reported chunks, with a fake llama instance
that records what it is asked to read and holds a KV cache like llama-cpp-python's ``Llama``."""

from __future__ import annotations

from typing import Any

from callbench.models import activity
from callbench.models.local.client import prefill


class FakeCtx:
    def __init__(self, llm: FakeLlama, can_drop: bool) -> None:
        self.llm, self.can_drop = llm, can_drop

    def kv_cache_seq_rm(self, seq: int, start: int, end: int) -> bool:
        if self.can_drop:
            del self.llm.held[start:]
        return self.can_drop


class FakeLlama:
    """``_input_ids`` = tokens held in the cache; ``eval`` appends after ``n_tokens``."""

    def __init__(self, held: list[int], can_drop: bool = True) -> None:
        self.held = list(held)
        self.n_tokens = len(held)
        self._ctx = FakeCtx(self, can_drop)
        self.reads: list[list[int]] = []

    @property
    def _input_ids(self) -> list[int]:
        return self.held[: self.n_tokens]

    def eval(self, tokens: list[int]) -> None:
        del self.held[self.n_tokens:]
        self.reads.append(list(tokens))
        self.held += tokens
        self.n_tokens += len(tokens)


def _listen() -> tuple[list[Any], Any]:
    seen: list[Any] = []
    return seen, activity.listening(seen.append)


def test_a_long_prompt_is_read_in_reported_chunks_leaving_the_last_token() -> None:
    tokens = list(range(1000))
    llm = FakeLlama([])
    seen, ctx = _listen()
    with ctx:
        read = prefill(llm, tokens, "local reading the caller prompt", chunk=256, minimum=512)
    assert read == 999 and [len(r) for r in llm.reads] == [256, 256, 256, 231]
    assert llm._input_ids == tokens[:-1]  # generation then reads only the last token
    assert [a.done for a in seen] == [0, 256, 512, 768, 999] and {a.total for a in seen} == {1000}
    assert seen[-1].describe().startswith("local reading the caller prompt: 999/1,000 tokens")


def test_only_the_part_after_the_cached_prefix_is_read() -> None:
    held = [*range(600), -1, -2]  # the last call's prompt: 600 shared tokens, then another end
    tokens = list(range(1400))
    llm = FakeLlama(held)
    read = prefill(llm, tokens, "x", chunk=256, minimum=512)
    assert read == 799 and llm.reads[0][0] == 600
    assert llm._input_ids == tokens[:-1]


def test_short_remainders_and_caches_that_cannot_drop_are_left_to_generation() -> None:
    llm = FakeLlama(list(range(900)))
    assert prefill(llm, list(range(1000)), "x", chunk=256, minimum=512) == 0 and llm.reads == []
    stuck = FakeLlama([5] * 10, can_drop=False)
    assert prefill(stuck, list(range(2000)), "x", chunk=256, minimum=512) == 0 and stuck.reads == []


def test_nothing_is_reported_without_a_listener_and_a_listener_sees_the_end() -> None:
    activity.report("nobody listens", 1, 2)  # no error, no effect
    seen, ctx = _listen()
    with ctx:
        activity.report("loading", None, None)
        activity.clear()
    assert [a.describe() if a else None for a in seen] == ["loading", None]
