"""The latency section as plain text rows and lines, shown by the terminal and the HTML report
alike (:mod:`callbench.report.model.latency` computes the figures). Times are shown in
milliseconds (turn quantiles) or seconds (per-call talk and wait time)."""

from __future__ import annotations

from typing import Literal, NamedTuple

from callbench.report.model.latency import SLICE_QUANTILES, LatencySummary
from callbench.stats.bootstrap import BootstrapResult
from callbench.stats.paired import PairedComparison

LATENCY_COLUMNS = ("first word p50 ms", "p90 ms", "p99 ms", "dead air p90 ms", "within budget %",
                   "talk s/call", "wait s/call", "dead air %", "calls", "turns")


def ms(r: BootstrapResult | None) -> str:
    """``estimate [low, high]`` of a time in seconds, shown in whole milliseconds; an em dash when
    undefined."""
    if r is None or r.estimate is None:
        return "—"
    lo = "—" if r.low is None else f"{1000 * r.low:.0f}"
    hi = "—" if r.high is None else f"{1000 * r.high:.0f}"
    return f"{1000 * r.estimate:.0f} [{lo}, {hi}]"


def plain(r: BootstrapResult | None, digits: int = 1) -> str:
    """``estimate [low, high]`` in the result's own unit, or an em dash."""
    if r is None or r.estimate is None:
        return "—"
    lo = "—" if r.low is None else f"{r.low:.{digits}f}"
    hi = "—" if r.high is None else f"{r.high:.{digits}f}"
    return f"{r.estimate:.{digits}f} [{lo}, {hi}]"


def budget_text(budget_s: float) -> str:
    """The budget as the command line takes it, e.g. ``800ms``."""
    return f"{1000 * budget_s:g}ms"


def latency_cell(summary: LatencySummary | None) -> str:
    """The leaderboard's latency cell: median time to first word in ms with its interval."""
    return "—" if summary is None else ms(summary.median_first_word)


def latency_rows(latency: dict[str, LatencySummary]) -> list[list[str]]:
    """One row per candidate: its name, then :data:`LATENCY_COLUMNS`."""
    return [[c, ms(s.first_word.get("p50")), ms(s.first_word.get("p90")), ms(s.first_word.get("p99")),
             ms(s.dead_air.get("p90")), plain(s.within_budget), plain(s.talk_s), plain(s.wait_s),
             plain(s.dead_air_share), str(s.n_calls), str(s.n_turns)] for c, s in latency.items()]


def slice_rows(latency: dict[str, LatencySummary]) -> list[list[str]]:
    """Rows ``candidate, slice, p50 ms, p90 ms, warning`` for the short slices of time to first
    word: language, tool round trips before speech and turn index (the long ones, agent and
    scenario, are :func:`ranked_slices`)."""
    rows = []
    for c, s in latency.items():
        groups = (("language", s.by_language), ("tools before speech", s.by_tools_before_speech),
                  ("turn", s.by_turn_index))
        for kind, by in groups:
            for key, qs in by.items():
                warn = next((r.warning for r in qs.values() if r.warning), None)
                rows.append([c, f"{kind} {key or '?'}", *(ms(qs.get(q)) for q in SLICE_QUANTILES),
                             warn or ""])
    return rows


class RankedSlice(NamedTuple):
    """One agent or scenario slice of a candidate, as shown: ``p50``/``p90`` as :func:`ms` text,
    ``p50_ms``/``p90_ms`` the estimates in milliseconds (None: no turn spoke) for sorting,
    ``calls`` the calls with a turn that spoke, ``warning`` the slice's caution ('' for none)."""

    candidate: str
    key: str
    p50: str
    p90: str
    calls: int
    warning: str
    p50_ms: float | None
    p90_ms: float | None


def ranked_slices(latency: dict[str, LatencySummary], kind: Literal["agent", "scenario"],
                  limit: int | None = None) -> list[RankedSlice]:
    """The ``kind`` slices of each candidate (in the report's order), slowest median time to first
    word first (ties by key; slices where no turn spoke last); at most ``limit`` per candidate
    (None: all)."""
    out = []
    for c, s in latency.items():
        rows = []
        for key, qs in (s.by_agent if kind == "agent" else s.by_scenario).items():
            p50, p90 = qs.get("p50"), qs.get("p90")
            est = [None if r is None or r.estimate is None else 1000.0 * r.estimate for r in (p50, p90)]
            warn = next((r.warning for r in qs.values() if r.warning), None)
            rows.append(RankedSlice(c, key, ms(p50), ms(p90), p50.n_episodes if p50 else 0, warn or "",
                                    est[0], est[1]))
        rows.sort(key=lambda r: (r.p50_ms is None, -(r.p50_ms or 0.0), r.key))
        out += rows[:limit]
    return out


def slowest_scenarios_line(candidate: str, s: LatencySummary, n: int = 3) -> str | None:
    """The line naming the candidate's ``n`` slowest scenarios by median time to first word (the
    rest: :data:`SLICES_ELSEWHERE`); None without a scenario whose turns spoke."""
    top = [r for r in ranked_slices({candidate: s}, "scenario", n) if r.p50_ms is not None]
    if not top:
        return None
    named = ", ".join(f"{r.key} {r.p50_ms:.0f} ms" + (" (†)" if r.warning else "") for r in top)
    return (f"{candidate}: slowest scenarios by median time to first word: {named} (of "
            f"{len(s.by_scenario)}; † thin).")


TURN_SLICE_NOTE = ("Turn n: the candidate's n-th turn in the call (turn 1, the greeting, counts from the "
                   "call connecting; 5+ pools the fifth turn and every later one).")
"""What the turn-index slices are, said under the slice table."""

SLICES_ELSEWHERE = ("Time to first word of every agent and every scenario, with intervals: the HTML report's "
                    "latency section, and latency.<candidate>.by_agent / by_scenario in the JSON report.")
"""Where the terminal's reader finds the slices it leaves out."""


def paired_rows(paired: list[PairedComparison]) -> list[list[str]]:
    """Rows ``a - b, difference ms [interval], shared scenarios, a slower/b slower/ties``."""
    rows = []
    for p in paired:
        diff = "—" if p.mean_difference is None else (
            f"{p.mean_difference:+.0f} [{p.low or 0:+.0f}, {p.high or 0:+.0f}]")
        rows.append([f"{p.candidate_a} − {p.candidate_b}", diff + (" †" if p.too_few else ""),
                     str(p.n_scenarios), f"{p.wins}/{p.losses}/{p.ties}"])
    return rows


def cpu_ms(r: BootstrapResult | None) -> str:
    """A CPU time in seconds as ``estimate [low, high]`` milliseconds with one decimal, or an em
    dash."""
    if r is None or r.estimate is None:
        return "—"
    lo = "—" if r.low is None else f"{1000 * r.low:.1f}"
    hi = "—" if r.high is None else f"{1000 * r.high:.1f}"
    return f"{1000 * r.estimate:.1f} [{lo}, {hi}]"


def harness_cpu_line(candidate: str, s: LatencySummary) -> str | None:
    """The line on callbench's own CPU per candidate request beside the provider's latency, or
    None when no request recorded it (traces from before it was measured, deployed agents)."""
    if not s.harness_cpu_requests:
        return None
    head = (f"{candidate}: harness CPU per request (callbench's own, not the provider's) p50 "
            f"{cpu_ms(s.harness_cpu.get('p50'))} ms, p90 {cpu_ms(s.harness_cpu.get('p90'))} ms over "
            f"{s.harness_cpu_requests} requests")
    if s.harness_cpu_share is not None:
        return f"{head}; p50 = {s.harness_cpu_share:.2f}% of the median time to first word"
    if s.harness_timed_calls:
        return (f"{head}; no share of the time to first word: {s.harness_timed_calls} call(s) timed by the "
                f"harness, not the model")
    return head


def latency_notes(latency: dict[str, LatencySummary], budget_s: float) -> list[str]:
    """The lines under the latency table: what the figures are, the budget, and per candidate why
    its figures may not be measured latency."""
    lines = [f"Time to first word: from the end of the caller's turn to the first word of the reply the "
             f"caller would hear (tool round trips before speech count). Dead air: silence after the "
             f"first word while the agent worked. Quantiles over turns, hierarchical bootstrap intervals "
             f"(agents, scenarios, repeats). Budget {budget_text(budget_s)} (--latency-budget; default "
             f"800ms): within budget % = turns that spoke within it. Talk and wait: estimated speaking "
             f"time and silent waiting per call; dead air % of the agent's side of the call."]
    lines += [f"{c}: {s.source_note}" for c, s in latency.items() if s.source_note]
    lines += [line for c, s in latency.items() if (line := harness_cpu_line(c, s))]
    return lines
