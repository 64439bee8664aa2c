"""Where and when latency was measured, as the report says it: one line naming the machines,
concurrency and notes the runs recorded (``RunManifest.measured_at``), and flags for candidates
whose latencies are not comparable: measured under different concurrency (episodes at once change
provider queueing and our own scheduling) or more than :data:`MAX_APART` apart (provider load
changes by the hour and the day).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from callbench.report.model.load import RunData
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
    return lines
