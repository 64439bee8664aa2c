"""Each candidate's cost per call: the mean over its calls of what its own model calls cost
(``Usage.cost_usd`` of the trace's ``candidate`` role, priced by ``models/pricing.py``; the caller
simulator and the judges are the benchmark's cost, not the candidate's, and are left out). The
calls counted are those the latency summary counts (scored or ungraded, with a trace). The cost is
unknown (None) when any such call's price is unknown (or the call recorded no usage), never a
mean of the priced calls alone: that would understate it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from callbench.stats.summary import EpisodeRecord


class CostPerCall(BaseModel):
    """One candidate's mean cost per call in USD (``usd``; None: unknown, see the module
    docstring) over ``calls`` calls, ``unpriced`` of which had no known price."""

    usd: float | None = None
    calls: int = 0
    unpriced: int = 0


def cost_per_call(records: Sequence[EpisodeRecord], candidates: Sequence[str]) -> dict[str, CostPerCall]:
    """Candidate -> :class:`CostPerCall` for each of ``candidates`` with at least one counted call."""
    costs: dict[str, list[float | None]] = {}
    for r in records:
        if r.candidate in candidates and r.status in ("scored", "ungraded") and r.usage:
            usage = r.usage.get("candidate")
            costs.setdefault(r.candidate, []).append(None if usage is None else usage.cost_usd)
    out = {}
    for cand, values in costs.items():
        unpriced = sum(1 for v in values if v is None)
        usd = None if unpriced else sum(v or 0.0 for v in values) / len(values)
        out[cand] = CostPerCall(usd=usd, calls=len(values), unpriced=unpriced)
    return out
