"""Per-episode routing of webhook tool calls: each episode registers an :class:`EpisodeHook`
(found by the token in its URL, or by the platform ids its session reports), so concurrent
episodes never reach each other's backend. A hook stays known after its episode ends, so a tool
call that arrives late is recognised, recorded on the hook and answered with an error."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from callbench.trace import LateToolCall

MAX_RETIRED = 10_000
"""Ended episodes whose hooks are kept to recognise late calls (oldest forgotten first)."""


@dataclass(frozen=True)
class IncomingCall:
    """One tool call as it reached the webhook: the platform's call id (``""`` when it has
    none), the tool name and the arguments as raw JSON text (the backend parses it, recording
    malformed arguments as it does for a model's)."""

    call_id: str
    name: str
    raw_arguments: str


@dataclass(frozen=True)
class CallAnswer:
    """The backend's answer to one call: the ``result`` object and whether it ended the call."""

    result: Any
    ended_call: bool


Handler = Callable[[list[IncomingCall], str, float], list[CallAnswer]]
"""``handler(calls, route, arrived_monotonic)``: the episode's conversation answering calls."""


@dataclass
class EpisodeHook:
    """One episode's entry point. ``token`` (random, in the generic URL), ``handler`` (answers
    calls while the episode runs), ``ended`` (set when the episode ends), ``late`` (calls after
    that), ``platform_ids`` (call/chat/session ids routed here)."""

    episode_id: str
    handler: Handler
    token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    ended: bool = False
    late: list[LateToolCall] = field(default_factory=list)
    platform_ids: set[str] = field(default_factory=set)


class HookRegistry:
    """Hooks by token and by platform id (module docstring)."""

    def __init__(self) -> None:
        self.fallback: Callable[[list[str]], EpisodeHook | None] | None = None
        """Asked for a hook when no hook has any of a request's platform ids (``serve-backend``
        opens a new call there); None in a run, where such a request is refused."""
        self._by_token: dict[str, EpisodeHook] = {}
        self._by_platform: dict[str, EpisodeHook] = {}
        self._retired: OrderedDict[str, EpisodeHook] = OrderedDict()

    def register(self, hook: EpisodeHook) -> None:
        self._by_token[hook.token] = hook

    def bind(self, hook: EpisodeHook, platform_id: str) -> None:
        """Route requests carrying ``platform_id`` to ``hook``. Raises ValueError when the id
        already routes to another live episode (two episodes must never share a backend)."""
        other = self._by_platform.get(platform_id)
        if other is not None and other is not hook and not other.ended:
            raise ValueError(f"platform id {platform_id!r} already belongs to episode {other.episode_id}")
        hook.platform_ids.add(platform_id)
        self._by_platform[platform_id] = hook

    def by_token(self, token: str) -> EpisodeHook | None:
        return self._by_token.get(token)

    def by_platform(self, ids: list[str]) -> EpisodeHook | None:
        """The hook of the first of ``ids`` that is known (live or retired), else the
        :attr:`fallback`'s, or None."""
        for i in ids:
            hook = self._by_platform.get(i)
            if hook is not None:
                return hook
        return self.fallback(ids) if self.fallback is not None else None

    def retire(self, hook: EpisodeHook) -> None:
        """Mark ``hook`` ended; it stays findable for late calls (up to :data:`MAX_RETIRED`)."""
        hook.ended = True
        self._retired[hook.token] = hook
        while len(self._retired) > MAX_RETIRED:
            _, old = self._retired.popitem(last=False)
            self._by_token.pop(old.token, None)
            for pid in old.platform_ids:
                if self._by_platform.get(pid) is old:
                    del self._by_platform[pid]

    def live(self) -> int:
        """How many registered hooks have not ended."""
        return sum(1 for h in self._by_token.values() if not h.ended)
