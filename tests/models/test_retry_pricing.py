"""Backoff, Retry-After parsing, error classification, pricing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from callbench.models.base import InfrastructureError, ModelOutputError, Usage
from callbench.models.pricing import call_cost, default_price_table, load_price_table
from callbench.models.remote.retry import RetryPolicy, backoff_delay, call_with_retries, parse_retry_after


def test_parse_retry_after_forms():
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    assert parse_retry_after({"retry-after": "Tue, 14 Nov 2023 22:13:50 GMT"}, now=now) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": "Tue, 14 Nov 2023 22:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


def test_backoff_full_jitter_is_bounded_and_seeded():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=10.0)
    a = [backoff_delay(i, policy, random.Random(5)) for i in range(8)]
    b = [backoff_delay(i, policy, random.Random(5)) for i in range(8)]
    assert a == b
    for i, d in enumerate(a):
        assert 0.0 <= d <= min(10.0, 2.0**i)
    assert backoff_delay(0, policy, random.Random(1), retry_after_s=30.0) == 30.0


async def test_call_with_retries_paths():
    delays: list[float] = []

    async def sleep(s: float) -> None:
        delays.append(s)

    outcomes: list[object] = [
        InfrastructureError("429", status=429, retry_after_s=4.0),
        InfrastructureError("503", status=503),
        "ok",
    ]

    async def flaky() -> str:
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return str(item)

    policy = RetryPolicy(max_attempts=5)
    assert await call_with_retries(flaky, policy=policy, rng=random.Random(0), sleep=sleep) == "ok"
    assert len(delays) == 2 and delays[0] >= 4.0

    async def auth() -> str:
        raise InfrastructureError("401", retryable=False, status=401)

    delays.clear()
    with pytest.raises(InfrastructureError, match="401"):
        await call_with_retries(auth, policy=policy, rng=random.Random(0), sleep=sleep)
    assert delays == []

    async def bad_output() -> str:
        raise ModelOutputError("nope")

    with pytest.raises(ModelOutputError):
        await call_with_retries(bad_output, policy=policy, rng=random.Random(0), sleep=sleep)

    async def wait_forever() -> str:
        raise InfrastructureError("429", status=429, retry_after_s=86_400.0)

    with pytest.raises(InfrastructureError, match="over the 600s limit") as info:
        await call_with_retries(wait_forever, policy=policy, rng=random.Random(0), sleep=sleep)
    assert info.value.retryable is False and delays == []


def test_price_table_pinned_and_lookup():
    table = default_price_table()
    assert table.pinned == "2026-11-29" and "openai.com" in table.source
    assert table.lookup("openai:gpt-4o-2024-08-06") == table.lookup("openai:gpt-4o")
    assert table.lookup("anthropic:claude-sonnet-4-5-20250929") == table.lookup("anthropic:claude-sonnet-4-5")
    assert table.lookup("openai:gpt-4o-audio-preview") is None
    assert table.lookup("openai:gpt-4o", custom_endpoint=True) is None


def test_call_cost():
    usage = Usage(input_tokens=2_000_000, cached_input_tokens=1_000_000, output_tokens=1_000_000)
    assert call_cost("openai:gpt-4o-mini", usage) == pytest.approx(0.15 + 0.075 + 0.60)
    assert call_cost("openai:unknown-model", usage) is None
    assert call_cost("local", usage) == 0.0
    assert call_cost("local:/x/model.gguf", usage) == 0.0
    assert call_cost("scripted:reference", usage) == 0.0
    # unknown stays unknown in sums (Usage.__add__)
    total = Usage(cost_usd=1.0) + Usage(cost_usd=None)
    assert total.cost_usd is None


def test_custom_price_file(tmp_path: Path):
    path = tmp_path / "prices.yaml"
    path.write_text(
        "pinned: '2026-01-01'\nsource: mine\nmodels: {}\n"
        "custom_endpoints:\n  openai:llama3: {input: 0.1, output: 0.2}\n"
    )
    table = load_price_table(path)
    assert call_cost(
        "openai:llama3", Usage(input_tokens=10_000_000), custom_endpoint=True, table=table
    ) == pytest.approx(1.0)
    path.write_text("pinned: x\nsource: y\nmodels:\n  openai:a: {input: -1, output: 1}\n")
    with pytest.raises(ValueError, match=r"prices.yaml: models.openai:a.input"):
        load_price_table(path)
