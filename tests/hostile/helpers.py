"""Helpers of the hostile-model tests: the starter bundle's path, a model client that answers from a
list of replies (responses, raw text or exceptions) for feeding arbitrary output to any role, and a
candidate that replays the reference path with one tool's arguments rewritten."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from callbench.bundle.models import Bundle
from callbench.models.base import (
    ModelClient,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Usage,
)
from callbench.models.scripted.models import create_scripted

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIO = "bank_unblock_sons_card_refusal"


class Replies:
    """Answers the n-th request with ``replies[n]`` (the last one repeated): a ModelResponse is
    returned, a string becomes the response's content, an exception is raised."""

    def __init__(self, replies: list[Any], spec: str = "scripted:hostile") -> None:
        self.replies = replies
        self.spec = spec
        self.settings = ModelSettings()
        self.n = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        reply = self.replies[min(self.n, len(self.replies) - 1)]
        self.n += 1
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ModelResponse):
            return reply
        return ModelResponse(content=reply, usage=Usage(calls=1, input_tokens=1, output_tokens=1))

    async def aclose(self) -> None:
        return None


def output_error(message: str, raw: str | None) -> ModelOutputError:
    return ModelOutputError(message, raw=raw, usage=Usage(calls=1))


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
