"""The judges' request timings of a run, for the report: how long the judges kept the grading
waiting. They are the judges', never the candidate's latency, and no score depends on them.

Read from each grade's ``judge_timings`` (:class:`~callbench.grade.models.JudgeRequestTiming`,
seconds); quantiles are inverted-CDF over every request of the role in the run, as the
candidate's (:func:`callbench.stats.latency.call_quantile`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from callbench.stats.latency import call_quantile
from callbench.stats.summary import EpisodeRecord


class JudgeLatency(BaseModel):
    """One judge role's requests in one run. Seconds. ``requests``: timed requests (re-asks
    included); ``median_waited_s``, ``p90_waited_s``: the answer complete (HTTP retries and
    backoff included); ``median_first_token_s``: the first token (not streamed: the whole answer);
    ``replayed``: requests served from the response cache (the original run's times)."""

    role: str
    requests: int
    median_waited_s: float | None = None
    p90_waited_s: float | None = None
    median_first_token_s: float | None = None
    replayed: int = 0


def judge_latency(records: Sequence[EpisodeRecord]) -> dict[str, JudgeLatency]:
    """Judge role -> :class:`JudgeLatency` over the grades of ``records`` (roles without timed
    requests are absent), roles in name order."""
    by_role: dict[str, list[tuple[float, float, bool]]] = {}
    for r in records:
        if r.grade is None:
            continue
        for role, timings in r.grade.judge_timings.items():
            by_role.setdefault(role, []).extend((t.waited_s, t.first_token_s, t.replayed) for t in timings)
    out = {}
    for role, items in sorted(by_role.items()):
        waited = [w for w, _, _ in items]
        out[role] = JudgeLatency(
            role=role, requests=len(items), median_waited_s=call_quantile(waited, 0.5),
            p90_waited_s=call_quantile(waited, 0.9),
            median_first_token_s=call_quantile([f for _, f, _ in items], 0.5),
            replayed=sum(rep for _, _, rep in items))
    return out


def judge_latency_line(run_id: str, latency: dict[str, JudgeLatency]) -> str | None:
    """One line naming each judge role's median and p90 wait in ms (the judges', not the
    candidate's), or None when the run's grades recorded no judge timings."""
    if not latency:
        return None

    def ms(x: float | None) -> str:
        return "—" if x is None else f"{1000 * x:.0f}"

    parts = [f"{j.role} median {ms(j.median_waited_s)} ms, p90 {ms(j.p90_waited_s)} ms over {j.requests} "
             f"requests" + (f" ({j.replayed} replayed)" if j.replayed else "") for j in latency.values()]
    return f"{run_id}: judge request latency (the judges', not the candidate's): " + "; ".join(parts)
