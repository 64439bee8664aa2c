"""The quality-latency chart of the HTML report (inline SVG, as :mod:`callbench.report.html.charts`):
one point per candidate at its median time to first word (x, ms) and its quality (y: outcome
success where the candidates have outcomes, else the overall score), with both intervals drawn as
bars, the latency budget as a dashed vertical line and the Pareto frontier (no other candidate
both faster and at least as good) joined by a line and its points ringed. Cost is the third axis:
a point's area grows linearly with its mean cost per call (:func:`radius`), a size key under the
axis names real costs, and a point of unknown cost is a hollow dashed circle. The SVG carries a
title and a description listing every point's values (screen readers read them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from callbench.report.html.charts import PALETTE, WIDTH, _f, _label, _svg, nice_ticks
from callbench.report.model.build import Report
from callbench.stats.bootstrap import BootstrapResult


@dataclass(frozen=True)
class Point:
    """One candidate: latency (x) and quality (y), each an estimate with its interval."""

    label: str
    x: float
    y: float
    x_low: float | None = None
    x_high: float | None = None
    y_low: float | None = None
    y_high: float | None = None
    colour: str = PALETTE[0]
    cost: float | None = None
    """Mean cost per call in USD (report/model/cost.py); None: unknown."""


R_MIN, R_MAX, R_UNKNOWN = 4.0, 14.0, 7.0
"""Marker radii (px): a call that costs nothing, the dearest candidate, a cost not known."""


def usd(value: float) -> str:
    """``$0.0123``, ``$1.23``, ``$1,234``: three significant figures below $100."""
    return f"${value:,.0f}" if value >= 100 else f"${value:.3g}"


def radius(cost: float | None, top: float) -> float:
    """The marker radius of ``cost`` when the dearest point costs ``top``: the area above the
    smallest marker's is proportional to the cost (``R_MIN`` at $0, ``R_MAX`` at ``top``), so a
    free candidate stays visible; ``R_UNKNOWN`` for an unknown cost."""
    if cost is None:
        return R_UNKNOWN
    if top <= 0:
        return R_MIN
    return math.sqrt(R_MIN**2 + (R_MAX**2 - R_MIN**2) * min(cost, top) / top)


def size_key(points: Sequence[Point]) -> list[tuple[str, float | None]]:
    """The costs the size key shows: $0, half the largest and the largest known cost (distinct
    values only), then None when any point's cost is unknown."""
    known = [p.cost for p in points if p.cost is not None]
    top = max(known, default=0.0)
    values: list[float | None] = [*sorted({0.0, top / 2, top})] if known else []
    if any(p.cost is None for p in points):
        values.append(None)
    return [("unknown" if v is None else usd(v), v) for v in values]


def describe(p: Point, x_axis: str, y_axis: str) -> str:
    """One point's values as text (its SVG title and the chart's description)."""
    cost = "cost unknown" if p.cost is None else f"{usd(p.cost)} per call"
    return f"{p.label}: {x_axis} {p.x:.0f}, {y_axis} {p.y:.1f}, {cost}"


def pareto(points: Sequence[Point]) -> list[Point]:
    """The points no other point dominates (an x at most as large and a y at least as large, one
    of them strictly), by ascending x: lower latency and higher quality are both better."""
    def dominated(p: Point) -> bool:
        return any(q.x <= p.x and q.y >= p.y and (q.x < p.x or q.y > p.y) for q in points)
    return sorted((p for p in points if not dominated(p)), key=lambda p: (p.x, -p.y))


def scatter(points: Sequence[Point], *, budget: float | None, x_axis: str, y_axis: str, label: str) -> Markup:
    """The chart of ``points`` (module docstring); ``budget`` on the x axis, or None."""
    left, right, top, bottom, height = 70.0, 190.0, 12.0, 80.0, 414.0
    dearest = max((p.cost for p in points if p.cost is not None), default=0.0)
    xs = [v for p in points for v in (p.x, p.x_low, p.x_high) if v is not None] + ([budget] if budget else [])
    x_hi = max(1.0, max(xs) * 1.1)
    ys = [v for p in points for v in (p.y, p.y_low, p.y_high) if v is not None]
    y_lo = max(0.0, 10.0 * math.floor(min(ys) / 10.0) - 10.0)
    plot_w, plot_h = WIDTH - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + plot_w * min(max(v, 0.0), x_hi) / x_hi

    def py(v: float) -> float:
        return top + plot_h * (1.0 - (min(max(v, y_lo), 100.0) - y_lo) / (100.0 - y_lo))

    body = [f"<title>{escape(label)}</title>",
            f"<desc>{escape('; '.join(describe(p, x_axis, y_axis) for p in points))}</desc>"]
    for t in nice_ticks(0.0, x_hi):
        body.append(f'<line class="grid" x1="{_f(px(t))}" x2="{_f(px(t))}" y1="{top}" '
                    f'y2="{_f(top + plot_h)}"/>')
        body.append(_label(px(t), top + plot_h + 14, f"{t:g}", "middle", "tick"))
    for t in nice_ticks(y_lo, 100.0, 5):
        body.append(f'<line class="grid" x1="{left}" x2="{_f(left + plot_w)}" y1="{_f(py(t))}" '
                    f'y2="{_f(py(t))}"/>')
        body.append(_label(left - 6, py(t), f"{t:g}", "end", "tick"))
    body.append(_label(left + plot_w / 2, top + plot_h + 32, x_axis, "middle", "tick"))
    key_y, key_x = height - 18, left
    body.append(_label(key_x, key_y, "cost per call (area):", "start", "tick"))
    key_x += 130
    for text, value in size_key(points):
        r = radius(value, dearest)
        dash = ' stroke-dasharray="3 2" fill="none"' if value is None else ' fill="#999"'
        worth = "" if value is None else value
        body.append(f'<circle class="size-key" data-usd="{worth}" cx="{_f(key_x + r)}" cy="{_f(key_y)}" '
                    f'r="{_f(r)}" stroke="#555"{dash}/>')
        body.append(_label(key_x + 2 * r + 4, key_y, text, "start", "tick"))
        key_x += 2 * r + 14 + 7 * len(text)
    body.append(f'<text x="14" y="{_f(top + plot_h / 2)}" text-anchor="middle" class="tick" '
                f'transform="rotate(-90 14 {_f(top + plot_h / 2)})">{escape(y_axis)}</text>')
    if budget is not None:
        body.append(f'<line class="zero" stroke-dasharray="6 4" x1="{_f(px(budget))}" x2="{_f(px(budget))}" '
                    f'y1="{top}" y2="{_f(top + plot_h)}"/>')
        body.append(_label(px(budget) + 4, top + 8, "budget", "start", "tick"))
    front = pareto(points)
    if len(front) > 1:
        path = " ".join(f"{_f(px(p.x))},{_f(py(p.y))}" for p in front)
        body.append(f'<polyline class="pareto" points="{path}" fill="none" stroke="#555" stroke-width="1.5" '
                    'stroke-dasharray="3 3"/>')
    for p in points:
        cx, cy = px(p.x), py(p.y)
        if p.x_low is not None and p.x_high is not None:
            body.append(f'<line x1="{_f(px(p.x_low))}" x2="{_f(px(p.x_high))}" y1="{_f(cy)}" y2="{_f(cy)}" '
                        f'stroke="{p.colour}" stroke-width="2"/>')
        if p.y_low is not None and p.y_high is not None:
            body.append(f'<line x1="{_f(cx)}" x2="{_f(cx)}" y1="{_f(py(p.y_low))}" y2="{_f(py(p.y_high))}" '
                        f'stroke="{p.colour}" stroke-width="2"/>')
        r = radius(p.cost, dearest)
        if p in front:
            body.append(f'<circle class="frontier" cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(r + 4)}" fill="none" '
                        'stroke="#222"/>')
        marker = (f'fill="#fff" stroke="{p.colour}" stroke-width="2" stroke-dasharray="3 2"' if p.cost is None
                  else f'fill="{p.colour}" fill-opacity="0.8"')
        body.append(f'<g class="point"><title>{escape(describe(p, x_axis, y_axis))}</title>'
                    f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(r)}" {marker}/></g>')
        body.append(_label(cx + r + 6, cy - r - 4, p.label, "start", "tick"))
    return _svg(height, body, label)


def _xy(lat: BootstrapResult, quality: BootstrapResult) -> tuple[float, float] | None:
    if lat.estimate is None or quality.estimate is None:
        return None
    return 1000.0 * lat.estimate, quality.estimate


def latency_points(report: Report) -> tuple[list[Point], str]:
    """Each candidate with a median time to first word and a quality estimate as a :class:`Point`
    (ms; percent or score points; its mean cost per call, None when unknown), and the quality's
    name: ``outcome success %`` when every such candidate has outcomes, else ``overall score``."""
    colours = {c.candidate: PALETTE[i % len(PALETTE)] for i, c in enumerate(report.candidates)}
    with_latency = [c for c in report.candidates
                    if c.candidate in report.latency and report.latency[c.candidate].median_first_word]
    use_outcome = bool(with_latency) and all(c.outcome_success.estimate is not None for c in with_latency)
    points = []
    for c in with_latency:
        lat = report.latency[c.candidate].median_first_word
        assert lat is not None
        quality = c.outcome_success if use_outcome else c.overall
        xy = _xy(lat, quality)
        if xy is None:
            continue
        ms = [None if v is None else 1000.0 * v for v in (lat.low, lat.high)]
        cost = report.cost_per_call.get(c.candidate)
        points.append(Point(c.candidate, xy[0], xy[1], ms[0], ms[1], quality.low, quality.high,
                            colours[c.candidate], None if cost is None else cost.usd))
    return points, "outcome success %" if use_outcome else "overall score"
