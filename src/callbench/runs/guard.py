"""What stands between a run and its role clients: per-provider concurrency limits and the run's
health.

Every call holds its provider's semaphore. Every call's outcome is reported to :class:`RunHealth`:
a role whose requests fail with a non-retryable authentication or not-found error (HTTP 401, 403,
404) ``max_consecutive`` times in a row stops the run (:class:`RunStopped`) instead of skipping
every remaining episode; any usable answer of that role resets its count. Retryable faults never
count: they are retried, and an episode they still break is skipped and rerun on resume.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractAsyncContextManager
from typing import Any

from callbench.models.base import InfrastructureError, ModelClient, ModelRequest, ModelResponse
from callbench.models.deployed.base import as_deployed
from callbench.models.faults import note_limiter_wait

FATAL_STATUS = frozenset({401, 403, 404})
DEFAULT_MAX_CONSECUTIVE = 3


class RunStopped(Exception):
    """The run was stopped because a role cannot be served; the message names role, spec and error."""


class RunHealth:
    """Consecutive fatal errors by role name; ``message`` is set once the run must stop."""

    def __init__(self, max_consecutive: int = DEFAULT_MAX_CONSECUTIVE) -> None:
        self.max_consecutive = max(1, max_consecutive)
        self.counts: dict[str, int] = {}
        self.message: str | None = None

    @property
    def stopped(self) -> bool:
        return self.message is not None

    def ok(self, role: str) -> None:
        """A usable answer (or an answer the model got wrong) for ``role``: reset its count."""
        self.counts[role] = 0

    def failed(self, role: str, spec: str, err: InfrastructureError) -> None:
        """Count ``err`` when it is fatal (non-retryable 401/403/404); stop at the limit."""
        if err.retryable or err.status not in FATAL_STATUS:
            self.counts[role] = 0
            return
        self.counts[role] = self.counts.get(role, 0) + 1
        if self.counts[role] >= self.max_consecutive and self.message is None:
            self.message = (f"{role} {spec} failed {self.counts[role]} times in a row with HTTP "
                            f"{err.status}: {err}")


class Limited:
    """Wraps a ModelClient: every call holds its provider's semaphore (or any async context
    manager that holds a permit, e.g. a cluster-wide one) and reports to the health. The seconds a
    call waits for its permit go to the fault ledger (``RoleFaults.limiter_wait_s``)."""

    def __init__(self, inner: ModelClient, sem: AbstractAsyncContextManager[Any], name: str,
                 health: RunHealth) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.settings = inner.settings
        self._sem = sem
        self.name = name
        self.health = health

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.health.message is not None:
            raise InfrastructureError(f"run stopped: {self.health.message}", retryable=False,
                                      kind="run_stopped", role=request.context.role)
        queued = time.perf_counter()
        async with self._sem:
            # the time spent queued for a permit is recorded, never timed as latency
            note_limiter_wait(request.context.role, time.perf_counter() - queued)
            try:
                response = await self.inner.complete(request)
            except InfrastructureError as err:
                self.health.failed(self.name, self.spec, err)
                raise
            except Exception:
                self.health.ok(self.name)
                raise
        self.health.ok(self.name)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def limit_providers(clients: dict[str, ModelClient], provider_limits: dict[str, int], concurrency: int,
                    max_consecutive: int = DEFAULT_MAX_CONSECUTIVE) -> dict[str, ModelClient]:
    """``clients`` with every call holding its provider's semaphore: ``provider_limits`` calls at
    once per provider (the part of the spec before ``:``), ``concurrency`` for a provider not
    listed. One semaphore per provider is shared by every role (candidates, caller and judges), so
    grading as episodes finish never exceeds a provider's limit; one :class:`RunHealth` is shared
    by all. Clients already limited are returned as they are (with their health)."""
    sems: dict[str, AbstractAsyncContextManager[Any]] = {}
    health: RunHealth | None = None
    for c in clients.values():
        if isinstance(c, Limited):
            sems.setdefault(c.spec.split(":", 1)[0], c._sem)
            health = health or c.health
    shared = health or RunHealth(max_consecutive)

    def limited(name: str, c: ModelClient) -> ModelClient:
        if isinstance(c, Limited) or as_deployed(c) is not None:
            return c  # a deployed agent is driven by sessions, not by limited completion requests
        provider = c.spec.split(":", 1)[0]
        limit = provider_limits.get(provider, concurrency)
        sem = sems.setdefault(provider, asyncio.Semaphore(max(1, limit)))
        return Limited(c, sem, name, shared)

    return {k: limited(k, c) for k, c in clients.items()}


def health_of(clients: dict[str, ModelClient]) -> RunHealth:
    """The shared health of limited ``clients`` (a fresh one when none is limited)."""
    for c in clients.values():
        if isinstance(c, Limited):
            return c.health
    return RunHealth()
