"""Saving a run's finished episodes, shared by the local and the Ray executor.

:class:`Saver` writes each finished trace and its fault ledger on the store's writer thread, keeps
the run's counts (:class:`RunCounts`) incrementally, checkpoints the manifest every
:data:`CHECKPOINT_SECONDS` and then grades and reports the episode; :func:`run_all` runs the
episodes' jobs so that the first machine fault stops the others.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from callbench.models.faults import FaultLedger, collect_faults
from callbench.runfolder.manifest import RunManifest
from callbench.runfolder.store import RunStore
from callbench.trace import EndReason, Trace

ProgressHook = Callable[[Trace, dict[str, Any]], None]
GradeHook = Callable[[Trace], Awaitable[None]]


class RunCounts:
    """Completed/skipped counts and skips by reason over the planned episodes, kept incrementally
    (constant cost per saved episode). ``record`` replaces an episode's earlier status, so an
    episode run again counts once."""

    def __init__(self, planned: set[str], rows: list[tuple[str, str, str | None]]) -> None:
        self.planned = planned
        self.status: dict[str, str | None] = {}  # episode id -> skip reason kind, None = completed
        self.skips: Counter[str] = Counter()
        for eid, end, reason in rows:
            self.record(eid, end, reason)

    def record(self, episode_id: str, end_reason: str, skip_reason: str | None) -> None:
        """Count one saved episode (``EndReason`` value and skip reason as in the index)."""
        if episode_id not in self.planned:
            return
        before = self.status.get(episode_id, "")
        if before:
            self.skips[before] -= 1
            if not self.skips[before]:
                del self.skips[before]
        kind = (skip_reason or "unknown").split(":")[0] if end_reason == EndReason.SKIPPED.value else None
        self.status[episode_id] = kind
        if kind:
            self.skips[kind] += 1

    def apply(self, manifest: RunManifest) -> None:
        """Write the counts into ``manifest``."""
        manifest.skipped = sum(self.skips.values())
        manifest.completed = len(self.status) - manifest.skipped
        manifest.skips_by_reason = dict(self.skips)


def refresh_counts(manifest: RunManifest, store: RunStore) -> None:
    """Recompute completed/skipped counts and skip reasons from the index (a full read; the
    executor keeps :class:`RunCounts` instead)."""
    RunCounts({k.episode_id for k in manifest.planned}, store.episode_rows()).apply(manifest)


CHECKPOINT_SECONDS = 30.0
"""How often a running run rewrites its manifest (counts for readers of a run in progress); the
manifest is also written when the run starts, stops and ends."""


class Saver:
    """Saves finished episodes for an executor: trace and fault ledger on the store's writer
    thread, counts and totals kept incrementally, the manifest checkpointed every
    :data:`CHECKPOINT_SECONDS`, then the grade hook and the progress hook. The rate-limit waits of
    the episode's ledger and of its grading add to this invocation's ``measured_at`` entry.
    Nothing here runs inside an episode's concurrency slot."""

    def __init__(self, store: RunStore, manifest: RunManifest, counts: RunCounts,
                 grade_hook: GradeHook | None, on_episode: ProgressHook | None,
                 stopped: Callable[[], bool] = lambda: False) -> None:
        self.store, self.manifest, self.counts = store, manifest, counts
        self.grade_hook, self.on_episode = grade_hook, on_episode
        self.stopped = stopped
        """True once the run is stopping (a role keeps failing): a trace saved then is not graded
        (its judges would be refused; the resume grades it)."""
        self.totals: dict[str, Any] = {"tokens": 0, "cost": 0.0}
        self.last_checkpoint = time.monotonic()
        self.saved: set[str] = set()
        self.keys = {k.episode_id: k for k in manifest.planned}

    async def save(self, trace: Trace, ledger: FaultLedger) -> None:
        """Save one finished episode, then grade it (unless the run is stopping) and report
        progress. A write that fails raises (the executor then stops the run)."""
        await self.store.submit_episode(trace, ledger)
        self.saved.add(trace.episode_id)
        here = self.manifest.measured_at[-1] if self.manifest.measured_at else None
        key = self.keys.get(trace.episode_id)
        if here is not None:
            here.add_waits(ledger.roles, None if key is None else key.candidate)
        self.counts.record(trace.episode_id, trace.end_reason.value, trace.skip_reason)
        for u in trace.usage.values():
            self.totals["tokens"] += u.input_tokens + u.output_tokens
            cost = self.totals["cost"]
            self.totals["cost"] = None if cost is None or u.cost_usd is None else cost + u.cost_usd
        if time.monotonic() - self.last_checkpoint >= CHECKPOINT_SECONDS:
            self.last_checkpoint = time.monotonic()
            await self.checkpoint()
        if self.grade_hook is not None and not self.stopped():
            with collect_faults() as judged:  # the judges' own ledger adds into this one
                await self.grade_hook(trace)
            if here is not None:
                here.add_waits(judged.roles)
        if self.on_episode:
            self.on_episode(trace, self.totals)

    async def checkpoint(self) -> None:
        """Save the manifest with the current counts (on the writer thread; a snapshot, so the
        counts written are those of this moment while the run goes on)."""
        self.counts.apply(self.manifest)
        # the waits of this invocation's entry change as episodes finish: the writer gets its own copy
        snapshot = self.manifest.model_copy(
            update={"measured_at": [m.model_copy(deep=True) for m in self.manifest.measured_at]})
        await self.store.submit(self.store.save_manifest, snapshot)


async def run_all(jobs: Iterable[Awaitable[None]]) -> None:
    """Run ``jobs`` concurrently until all end; the first to raise cancels the others (waiting for
    them to unwind) and its exception is raised, so the first machine fault stops the run at once,
    as a kill would, instead of letting the other episodes go on writing and spending budget.
    Cancelling this call cancels every job."""
    tasks = [asyncio.ensure_future(j) for j in jobs]
    if not tasks:
        return
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = [t for t in tasks if t in done and not t.cancelled() and t.exception() is not None]
        if failed:
            exc = failed[0].exception()
            assert exc is not None
            raise exc
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
