"""Shared fixtures for the provider tests: a recording mock transport for the SDKs (they use
``httpx2``), canned provider responses, and a fake API key that must never leak."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from callbench.models.local import weights
from callbench.models.local.weights import WeightsVariant

SECRET = "sk-test-SECRET-0123456789abcdef"


class Recorder:
    """Answers each request with the next canned item (the last one repeats) and keeps requests.

    An item is an ``httpx2.Response``, an exception to raise, or a callable taking the request.
    """

    def __init__(self, *items: Any) -> None:
        self.items = list(items)
        self.requests: list[httpx2.Request] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        item = self.items.pop(0) if len(self.items) > 1 else self.items[0]
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            return item(request)
        return item

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def openai_completion(
    content: str | None = "Hello.",
    tool_calls: list[tuple[str, str, str]] | None = None,
    *,
    prompt: int = 100,
    completion: int = 20,
    cached: int = 0,
    model: str = "gpt-4o-2024-08-06",
    finish: str = "stop",
) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in tool_calls or []
    ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "tool_calls": calls or None,
                },
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def anthropic_message(
    blocks: list[dict[str, Any]],
    *,
    input_tokens: int = 100,
    output_tokens: int = 20,
    read: int = 0,
    written: int = 0,
    model: str = "claude-sonnet-4-5-20250929",
    stop: str = "end_turn",
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        },
    }


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, json=data, headers=headers or {})


class Sleeps:
    """An injectable ``sleep`` that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    """Both provider keys set to SECRET; base URL variables cleared."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return SECRET


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


class Helpers:
    """Everything above, for tests (``--import-mode=importlib`` cannot import conftest)."""

    SECRET = SECRET
    Recorder = Recorder
    openai_completion = staticmethod(openai_completion)
    anthropic_message = staticmethod(anthropic_message)
    json_response = staticmethod(json_response)


@pytest.fixture
def mk() -> type[Helpers]:
    return Helpers


CHUNKS = {1: b"GGUF-first-", 2: b"second-", 10: b"tenth"}  # numeric order, not lexicographic


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WeightsVariant:
    site = tmp_path / "site"
    for n, data in CHUNKS.items():
        pkg = site / f"cbfake_part{n}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise RuntimeError('part packages must not be imported')\n")
        (pkg / "data" / f"part{n}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    joined = b"".join(CHUNKS[n] for n in sorted(CHUNKS))
    variant = WeightsVariant(
        name="fake",
        description="Fake model",
        packages=tuple(f"cbfake_part{n}" for n in CHUNKS),
        distributions=tuple(f"cbfake-part{n}==1.0" for n in CHUNKS),
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
    )
    monkeypatch.setitem(weights.VARIANTS, "fake", variant)
    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return variant
