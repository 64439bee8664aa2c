"""Where and when latency was measured, as the report says it: one line naming the machines,
concurrency and notes the runs recorded (``RunManifest.measured_at``), and flags for candidates
whose latencies are not comparable: measured under different concurrency (episodes at once change
provider queueing and our own scheduling) or more than :data:`MAX_APART` apart (provider load
changes by the hour and the day); then the rate-limit waits the runs recorded, and a warning for
candidates whose requests a provider answered 429 while they were measured.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence

from callbench.models.faults import RateLimitWaits
from callbench.report.model.load import RunData
from callbench.runfolder.manifest import MeasuredAt
from callbench.stats.latency import CallTimings

MAX_APART = dt.timedelta(days=1)
"""Candidates whose calls were measured further apart than this are flagged."""


def _when(text: str) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def latency_warnings(runs: Sequence[RunData], candidates: Sequence[str]) -> list[str]:
    """The report's lines about where latency was measured (module docstring), for the
    ``candidates`` that have timed calls; empty when none has."""
    timed: dict[str, list[tuple[str, CallTimings]]] = {}
    for run in runs:
        for r in run.records:
            if r.timings is not None and r.candidate in candidates and r.status in ("scored", "ungraded"):
                timed.setdefault(r.candidate, []).append((run.manifest.run_id, r.timings))
    if not timed:
        return []
    sites = [(run.manifest.run_id, m) for run in runs for m in run.manifest.measured_at]
    where = "; ".join(sorted({
        f"{m.platform or 'unknown machine'} ({m.cpu_count or '?'} CPUs), concurrency {m.concurrency}"
        + (f", event loop {m.event_loop}" if m.event_loop else "")
        + (f", note: {m.note}" if m.note else "") for _, m in sites}))
    lines = ["Latency depends on where and when it was measured (region, network, provider load, "
             "concurrency): it includes the network and the provider's queueing; a request the client "
             "timed excludes callbench's own time"
             + (f". Measured on: {where}" if where else ". The runs recorded no machine (made before "
                "callbench recorded one)")]
    concurrency: dict[str, set[int]] = {}
    for cand, items in timed.items():
        run_ids = {run_id for run_id, _ in items}
        concurrency[cand] = {m.concurrency for run_id, m in sites if run_id in run_ids}
    if len({frozenset(c) for c in concurrency.values() if c}) > 1:
        lines.append("Candidates measured under different concurrency (episodes at once): " + ", ".join(
            f"{c} {'/'.join(str(x) for x in sorted(v))}" for c, v in sorted(concurrency.items()) if v)
            + "; their latencies are not directly comparable")
    windows: dict[str, tuple[dt.datetime, dt.datetime]] = {}
    for cand, items in timed.items():
        times = [w for w in (_when(t.started_at) for _, t in items) if w is not None]
        if times:
            windows[cand] = (min(times), max(times))
    if windows:
        first = min(w[0] for w in windows.values())
        last = max(w[1] for w in windows.values())
        if len(windows) > 1 and last - first > MAX_APART:
            lines.append("Candidates measured more than a day apart: " + ", ".join(
                f"{c} {lo:%Y-%m-%d %H:%M} .. {hi:%Y-%m-%d %H:%M} UTC"
                for c, (lo, hi) in sorted(windows.items()))
                + "; provider load changes with the time of day, so their latencies are not directly "
                "comparable")
    return lines + rate_limit_lines(runs, timed)


def _waits_text(w: RateLimitWaits) -> str:
    return f"{w.answered_429} answered 429, {w.retry_wait_s:.1f} s waited before retrying"


def rate_limit_lines(runs: Sequence[RunData], timed: Iterable[str]) -> list[str]:
    """The rate-limit waits the runs' invocations recorded (``MeasuredAt.rate_limits``), summed by
    role over the runs, and a warning naming each ``timed`` candidate whose own requests were
    answered 429: its latency was measured against a throttled provider (the waits are not in its
    time to first word, every attempt being timed from its own send, but the provider was under
    pressure). Empty when no run recorded waits (runs made before callbench recorded them)."""
    by_role = _summed(runs, lambda m: m.rate_limits)
    by_run_slug: dict[tuple[str, str], RateLimitWaits] = {}
    recorded = False
    for run in runs:
        for m in run.manifest.measured_at:
            if m.rate_limits is None:
                continue
            recorded = True
            for slug, w in m.candidate_rate_limits.items():
                by_run_slug.setdefault((run.manifest.run_id, slug), RateLimitWaits()).add(w)
    if not recorded:
        return []
    queued = sum(w.limiter_wait_s for w in by_role.values())
    limited = [(role, w) for role, w in sorted(by_role.items()) if w.answered_429]
    line = ("Rate limits while measuring: " + "; ".join(f"{role} {_waits_text(w)}" for role, w in limited)
            if limited else "Rate limits while measuring: no request was answered 429")
    lines = [line + f"; requests queued {queued:.1f} s in all for callbench's own provider limits"]
    wanted = set(timed)
    throttled: dict[str, RateLimitWaits] = {}
    for run in runs:
        planned = {k.episode_id: k.candidate for k in run.manifest.planned}
        slugs = {(r.candidate, planned.get(r.episode_id, r.candidate)) for r in run.records
                 if r.candidate in wanted}
        for label, slug in sorted(slugs):
            waited = by_run_slug.get((run.manifest.run_id, slug))
            if waited is not None and waited.answered_429:
                throttled.setdefault(label, RateLimitWaits()).add(waited)
    if throttled:
        lines.append("Candidates whose requests waited on rate limits: " + ", ".join(
            f"{c} ({_waits_text(w)})" for c, w in sorted(throttled.items()))
            + "; their latency was measured against a throttled provider: the waits are not in time "
            "to first word, but the provider was under pressure")
    return lines + preflight_lines(runs)


def preflight_lines(runs: Sequence[RunData]) -> list[str]:
    """One line giving the roles whose preflight requests (``MeasuredAt.preflight_rate_limits``,
    before any call was measured) were answered 429, summed over the runs; empty when none was."""
    by_role = _summed(runs, lambda m: m.preflight_rate_limits)
    limited = [(role, w) for role, w in sorted(by_role.items()) if w.answered_429]
    if not limited:
        return []
    return ["Rate limits before measuring (the preflight's one request per role): "
            + "; ".join(f"{role} {_waits_text(w)}" for role, w in limited)]


def _summed(runs: Sequence[RunData],
            field: Callable[[MeasuredAt], dict[str, RateLimitWaits] | None]) -> dict[str, RateLimitWaits]:
    """Role -> the waits ``field`` gives for each invocation of the runs (None: none recorded),
    summed."""
    by_role: dict[str, RateLimitWaits] = {}
    for run in runs:
        for m in run.manifest.measured_at:
            for role, w in (field(m) or {}).items():
                by_role.setdefault(role, RateLimitWaits()).add(w)
    return by_role
