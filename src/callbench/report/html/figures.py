"""The report's figures (inline SVG from :mod:`callbench.report.html.charts`), chosen from a
:class:`~callbench.report.model.build.Report`.

A figure that has nothing to say is left out, not drawn empty: the paired-difference forest
needs two candidates; the score matrix, per-agent, diagnostics and distribution figures need at
least one scored episode. Tiles and labels link to episodes through ``anchors`` (episode id ->
in-page anchor of its trace), when the trace viewer is in the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from markupsafe import Markup

from callbench.bundle.models import DIAGNOSTIC_LABELS, Diagnostic
from callbench.report.html.charts import PALETTE, ForestRow, Tile, forest, histograms, tile_grid
from callbench.report.html.latency_chart import Point, latency_points, scatter, usd
from callbench.report.model.build import Report
from callbench.report.model.latency_text import budget_text
from callbench.stats.bootstrap import BootstrapResult
from callbench.stats.paired import MIN_PAIRED_SCENARIOS


@dataclass(frozen=True)
class Figure:
    """One figure: ``id`` (page anchor ``fig-<name>``), title, the SVG and a one-line caption."""

    id: str
    title: str
    svg: Markup
    caption: str


def _row(label: str, r: BootstrapResult, colour: str, note: str = "") -> ForestRow:
    return ForestRow(label, r.estimate, r.low, r.high, colour, note or f"n={r.n_episodes}")


def _colours(report: Report) -> dict[str, str]:
    return {c.candidate: PALETTE[i % len(PALETTE)] for i, c in enumerate(report.candidates)}


def score_matrix(report: Report, anchors: dict[str, str]) -> Figure | None:
    """Rows: agent x candidate; tiles: the agent's scenarios in id order, coloured by the mean
    overall score over repeats, linking to the first repeat's trace."""
    cells = [c for c in report.scenario_cells if c.scored or c.skipped]
    if not any(c.scored for c in cells):
        return None
    agents = sorted({c.agent_id for c in cells})
    cands = [c.candidate for c in report.candidates]
    scen_of = {a: sorted({c.scenario_id for c in cells if c.agent_id == a}) for a in agents}
    by_key = {(c.candidate, c.agent_id, c.scenario_id): c for c in cells}
    rows, groups, tiles = [], [], []
    for a in agents:
        langs = sorted({c.language for c in cells if c.agent_id == a})
        for cand in cands:
            rows.append(
                f"{a} ({', '.join(langs)}) · {cand}" if len(cands) > 1 else f"{a} ({', '.join(langs)})"
            )
            groups.append(a)
            line: list[Tile | None] = []
            for s in scen_of[a]:
                c = by_key.get((cand, a, s))
                if c is None:
                    line.append(None)
                    continue
                verdict = (f"passed {c.passed} of {c.judged}"
                           + (f", {c.cut} cut at the turn cap" if c.cut else "")
                           + (f", {c.skipped} skipped" if c.skipped else ""))
                score = "no score" if c.mean_overall is None else f"overall {c.mean_overall:.1f}"
                line.append(
                    Tile(
                        value=c.mean_overall,
                        text="—"
                        if c.mean_overall is None
                        else f"{c.mean_overall:.0f}" + ("✗" if c.passed < c.judged else ""),
                        title=f"{cand} · {a} / {s} ({c.language}, {c.difficulty}): {score}, {verdict}",
                        href=next((anchors[e] for e in c.episode_ids if e in anchors), None),
                    )
                )
            tiles.append(line)
    width = max(len(v) for v in scen_of.values())
    svg = tile_grid(
        rows,
        [str(i + 1) for i in range(width)],
        tiles,
        label="overall score per scenario and candidate",
        row_groups=groups,
    )
    return Figure(
        "fig-matrix",
        "Where each candidate fails: overall score per scenario",
        svg,
        "One tile per scenario (an agent's scenarios in id order; hover for its id, language and verdict), "
        "coloured red (0) to green (100) by the mean overall score over repeats; ✗: a repeat failed "
        "(its pass rule: the outcome and the cutoff by default; a call cut at the turn cap has no "
        "verdict); grey: no score. A tile opens that call.",
    )


def by_agent_figure(report: Report) -> Figure | None:
    col = _colours(report)
    rows = [
        _row(f"{agent} · {cand}" if len(report.by_agent) > 1 else agent, r, col.get(cand, PALETTE[0]))
        for agent in sorted({a for v in report.by_agent.values() for a in v})
        for cand in (c.candidate for c in report.candidates)
        if (r := report.by_agent.get(cand, {}).get(agent)) is not None
    ]
    if not rows:
        return None
    return Figure(
        "fig-agents",
        "Overall score by agent",
        forest(rows, lo=0, hi=100, label="overall score by agent", axis="overall score"),
        "Mean overall score of each agent's scored calls; interval from resampling its scenarios, "
        "then repeats.",
    )


def diagnostics_figure(report: Report) -> Figure | None:
    diags = [d for d in Diagnostic if any(d in c.diagnostics for c in report.candidates)]
    if not diags:
        return None
    tiles: list[list[Tile | None]] = []
    for d in diags:
        line: list[Tile | None] = []
        for c in report.candidates:
            s = c.diagnostics.get(d)
            if s is None or s.score is None:
                line.append(Tile(None, "—", f"{c.candidate}: {DIAGNOSTIC_LABELS[d]}: no applicable item"))
            else:
                line.append(
                    Tile(
                        s.score,
                        f"{s.score:.0f}",
                        f"{c.candidate}: {DIAGNOSTIC_LABELS[d]} {s.score:.1f}, {s.items} items",
                    )
                )
        tiles.append(line)
    svg = tile_grid(
        [DIAGNOSTIC_LABELS[d] for d in diags],
        [c.candidate for c in report.candidates],
        tiles,
        label="diagnostic scores per candidate",
        tile_w=max(90.0, min(230.0, 10.0 + 7 * max(len(c.candidate) for c in report.candidates))),
    )
    return Figure(
        "fig-diagnostics",
        "Diagnostics per candidate",
        svg,
        "Score = 100 × summed points / summed weight over scored calls (table below).",
    )


def distribution_figure(report: Report) -> Figure | None:
    series = [
        (
            c.candidate,
            [r.overall for r in report.calls if r.candidate == c.candidate and r.overall is not None],
        )
        for c in report.candidates
    ]
    if not any(v for _, v in series):
        return None
    cutoffs = sorted({r.cutoff for r in report.runs})
    return Figure(
        "fig-distribution",
        "Score distribution per candidate",
        histograms(
            series, cutoff=cutoffs[0] if len(cutoffs) == 1 else None, label="overall score distribution"
        ),
        "Scored calls per 10-point overall-score bin (the last bin includes 100); "
        "dashed line: the pass cutoff" + (f" ({cutoffs[0]:g})." if len(cutoffs) == 1 else "."),
    )


def paired_figure(report: Report) -> Figure | None:
    pairs = [p for p in report.paired if p.mean_difference is not None]
    if not pairs:
        return None
    reach = max(abs(v) for p in pairs for v in (p.mean_difference, p.low, p.high) if v is not None)
    hi = max(10.0, 10.0 * math.ceil(reach * 1.1 / 10.0))
    rows = [
        ForestRow(
            f"{p.candidate_a} − {p.candidate_b}",
            p.mean_difference,
            p.low,
            p.high,
            PALETTE[1] if p.excludes_zero and not p.too_few else PALETTE[0],
            f"{p.n_scenarios} scen." + (" † too few" if p.too_few else ""),
        )
        for p in pairs
    ]
    return Figure(
        "fig-paired",
        "Paired differences (a − b)",
        forest(rows, lo=-hi, hi=hi, zero=0.0, label="paired differences", axis="difference in overall score"),
        "Mean difference on shared scenarios with its interval; red where the interval excludes 0 "
        f"on at least {MIN_PAIRED_SCENARIOS} shared scenarios"
        + (" († too few: fewer, so it means little)." if any(p.too_few for p in pairs) else "."),
    )


def latency_figure(report: Report) -> Figure | None:
    """Quality against median time to first word, with the Pareto frontier (html/latency_chart.py)."""
    points, quality = latency_points(report)
    if not points:
        return None
    budget = report.settings.latency_budget_s
    return Figure(
        "fig-latency",
        f"Quality and latency: {quality} against median time to first word",
        scatter(points, budget=1000.0 * budget, x_axis="median time to first word (ms)", y_axis=quality,
                label="quality against latency per candidate"),
        "Dot: the candidate; bars: hierarchical bootstrap intervals on both axes; ringed and joined: the "
        "Pareto frontier (no other candidate both faster and at least as good); dashed: the latency "
        f"budget ({budget_text(budget)}). {cost_caption(points)} Latency depends on where and when it "
        "was measured.",
    )


def cost_caption(points: list[Point]) -> str:
    """What the markers' sizes say, with the real costs (report/model/cost.py)."""
    known = sorted((p for p in points if p.cost is not None), key=lambda p: (p.cost or 0.0, p.label))
    unknown = [p.label for p in points if p.cost is None]
    text = ("Dot area: the candidate's mean cost per call of its own model calls (caller and judges "
            "excluded), growing linearly from the smallest dot at $0")
    if len(known) == 1:
        text += f"; {known[0].label} {usd(known[0].cost or 0.0)} per call."
    elif known:
        text += (f"; cheapest {known[0].label} {usd(known[0].cost or 0.0)}, dearest {known[-1].label} "
                 f"{usd(known[-1].cost or 0.0)} per call.")
    else:
        text += "."
    if unknown:
        text += (" Hollow dashed: cost unknown (a model's price is not known, or a call recorded no usage): "
                 + ", ".join(unknown) + ".")
    return text


def figures(report: Report, anchors: dict[str, str]) -> list[Figure]:
    """Every figure with something to say, in page order."""
    if not report.candidates:
        return []
    col = _colours(report)
    cands = report.candidates
    out = [
        Figure(
            "fig-leaderboard",
            "Leaderboard: overall score",
            forest([_row(c.candidate, c.overall, col[c.candidate]) for c in cands], lo=0, hi=100,
                   label="overall score per candidate", axis="overall score"),
            "Dot: mean overall score of scored calls; bar: hierarchical bootstrap interval.",
        ),
        Figure(
            "fig-pillars",
            "Pillars: task and conversation",
            forest([_row(f"{c.candidate} · {name}", getattr(c, name), col[c.candidate]) for c in cands
                    for name in ("task", "conversation")],
                   lo=0, hi=100, label="pillar scores", axis="pillar score"),
            "Each pillar's mean over scored calls with its interval.",
        ),
        Figure(
            "fig-pass",
            "Pass rate at the cutoff",
            forest([_row(c.candidate, c.pass_rate, col[c.candidate]) for c in cands], lo=0, hi=100,
                   label="pass rate per candidate", axis="pass rate %"),
            "Share of scored calls with overall ≥ cutoff, with its interval.",
        ),
    ]  # fmt: skip
    for fig in (
        score_matrix(report, anchors),
        paired_figure(report),
        latency_figure(report),
        by_agent_figure(report),
        diagnostics_figure(report),
        distribution_figure(report),
    ):
        if fig is not None:
            out.append(fig)
    return out
