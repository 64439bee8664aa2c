"""Shared pieces of the hostile-model tests: the starter bundle and a candidate that replays the
reference path with one tool call's arguments rewritten."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from callbench.bundle.loader import load_bundle
from callbench.bundle.models import Bundle
from callbench.models.base import ModelClient, ModelRequest, ModelResponse
from callbench.models.scripted.models import create_scripted

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIO = "bank_unblock_sons_card_refusal"


@pytest.fixture(scope="session")
def starter() -> Bundle:
    return load_bundle(STARTER)


class RewritingCandidate:
    """``scripted:reference`` whose calls to ``tool`` get their raw arguments from ``rewrite``
    (given the reference's arguments as a dict, returns the raw JSON text to send)."""

    def __init__(self, bundle: Bundle, tool: str, rewrite: Callable[[dict[str, Any]], str]) -> None:
        self.inner = create_scripted("scripted:reference", None, bundle)
        self.spec = self.inner.spec
        self.settings = self.inner.settings
        self.tool = tool
        self.rewrite = rewrite

    async def complete(self, request: ModelRequest) -> ModelResponse:
        resp = await self.inner.complete(request)
        calls = [
            c.model_copy(update={"arguments": self.rewrite(json.loads(c.arguments))})
            if c.name == self.tool else c
            for c in resp.tool_calls
        ]
        return resp.model_copy(update={"tool_calls": calls})

    async def aclose(self) -> None:
        await self.inner.aclose()


def rewriting(bundle: Bundle, tool: str, rewrite: Callable[[dict[str, Any]], str]) -> ModelClient:
    return RewritingCandidate(bundle, tool, rewrite)  # type: ignore[return-value]
