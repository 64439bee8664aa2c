"""The HTML report's charts as inline SVG built here: no JavaScript library, nothing fetched.

Each function returns one ``<svg>`` element as :class:`markupsafe.Markup`; every label is escaped
with :func:`markupsafe.escape`. The SVG has a ``viewBox`` and ``width="100%"``, so it scales with
the page (readable from 900 px up); no ``xmlns`` attribute is written (inline SVG in HTML needs
none, and the file stays free of URL text). Colours: candidates cycle through :data:`PALETTE`;
scores 0..100 map to a red-amber-green ramp (:func:`score_colour`), grey for no score.

Chart kinds:
- :func:`forest`: one row per estimate, a dot at the estimate and a bar from low to high on a
  shared axis (leaderboard, pillars, pass rate, per-agent scores, paired differences).
- :func:`tile_grid`: a matrix of coloured tiles with the value written in each tile, each tile an
  optional in-page link (scenario x candidate matrix, diagnostics x candidate).
- :func:`histograms`: per candidate, the count of episodes per 10-point overall-score bin, with the
  pass cutoff drawn as a line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from markupsafe import Markup, escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
FONT = 13  # px in viewBox units
WIDTH = 900  # viewBox width


@dataclass(frozen=True)
class ForestRow:
    """One row of a forest plot: values in axis units; ``estimate`` None draws "no estimate"."""

    label: str
    estimate: float | None
    low: float | None = None
    high: float | None = None
    colour: str = PALETTE[0]
    note: str = ""  # written at the right end (e.g. "n=12")
    href: str | None = None  # in-page link for the label


def label_width(labels: Sequence[str]) -> float:
    """Width of a label column for ``labels`` (about 7 units per character, 160..480)."""
    return max(160.0, min(480.0, 16 + 7 * max((len(t) for t in labels), default=0)))


def _f(x: float) -> str:
    return f"{x:.1f}"


def _svg(height: float, body: list[str], label: str, width: float = WIDTH) -> Markup:
    return Markup(
        f'<svg class="chart" role="img" aria-label="{escape(label)}" viewBox="0 0 {_f(width)} {_f(height)}" '
        f'width="100%" style="max-width:{_f(width)}px" font-size="{FONT}">' + "".join(body) + "</svg>"
    )


def _label(x: float, y: float, text: str, anchor: str = "end", cls: str = "", href: str | None = None) -> str:
    attrs = f' class="{cls}"' if cls else ""
    t = (
        f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}" dominant-baseline="middle"{attrs}>'
        f"{escape(text)}</text>"
    )
    return f'<a href="#{escape(href)}">{t}</a>' if href else t


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (step 1, 2 or 5 times a power of ten)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def forest(
    rows: Sequence[ForestRow], *, lo: float, hi: float, label: str, zero: float | None = None, axis: str = ""
) -> Markup:
    """A forest plot of ``rows`` on the axis ``[lo, hi]``; ``zero`` draws a reference line
    (e.g. 0 for differences). Estimates outside the axis are clamped to its ends."""
    row_h, top, right = 24, 8, 150
    label_w = label_width([r.label for r in rows])
    plot_w = WIDTH - label_w - right
    height = top + row_h * len(rows) + 36

    def x(v: float) -> float:
        return label_w + plot_w * (min(max(v, lo), hi) - lo) / (hi - lo)

    body = []
    for t in nice_ticks(lo, hi):
        body.append(f'<line class="grid" x1="{_f(x(t))}" x2="{_f(x(t))}" y1="{top}" y2="{_f(height - 30)}"/>')
        body.append(_label(x(t), height - 20, f"{t:g}", "middle", "tick"))
    if zero is not None:
        body.append(
            f'<line class="zero" x1="{_f(x(zero))}" x2="{_f(x(zero))}" y1="{top}" y2="{_f(height - 30)}"/>'
        )
    if axis:
        body.append(_label(label_w + plot_w / 2, height - 6, axis, "middle", "tick"))
    for i, r in enumerate(rows):
        y = top + row_h * i + row_h / 2
        body.append(_label(label_w - 8, y, r.label, href=r.href))
        if r.estimate is None:
            body.append(_label(label_w + 4, y, "no estimate", "start", "tick"))
            continue
        if r.low is not None and r.high is not None:
            body.append(
                f'<line x1="{_f(x(r.low))}" x2="{_f(x(r.high))}" y1="{_f(y)}" y2="{_f(y)}" '
                f'stroke="{r.colour}" stroke-width="3"/>'
            )
        body.append(f'<circle cx="{_f(x(r.estimate))}" cy="{_f(y)}" r="5" fill="{r.colour}"/>')
        interval = "" if r.low is None or r.high is None else f" [{r.low:.1f}, {r.high:.1f}]"
        body.append(
            _label(WIDTH - right + 6, y, f"{r.estimate:.1f}{interval} {r.note}".strip(), "start", "tick")
        )
    return _svg(height, body, label)


def score_colour(v: float | None) -> str:
    """Tile colour for a score in points: red (0) through amber (50) to green (100); grey for None."""
    if v is None or math.isnan(v):
        return "#e6e6e6"
    t = min(max(v, 0.0), 100.0) / 100.0
    stops = [(0.0, (215, 48, 39)), (0.5, (254, 224, 139)), (1.0, (26, 152, 80))]
    for (t0, c0), (t1, c1) in pairwise(stops):
        if t <= t1:
            u = (t - t0) / (t1 - t0)
            r, g, b = (round(a + (b_ - a) * u) for a, b_ in zip(c0, c1, strict=True))
            return f"#{r:02x}{g:02x}{b:02x}"
    return "#1a9850"


@dataclass(frozen=True)
class Tile:
    """One tile: ``value`` in score points (None: no score), ``text`` written in it, ``title`` as
    its tooltip, ``href`` an in-page link, ``mark`` a short badge (e.g. "✗" for a failed call)."""

    value: float | None
    text: str = ""
    title: str = ""
    href: str | None = None


def tile_grid(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    tiles: Sequence[Sequence[Tile | None]],
    *,
    label: str,
    tile_w: float = 46,
    row_groups: Sequence[str] | None = None,
    label_w: float | None = None,
) -> Markup:
    """A matrix of tiles, ``tiles[row][col]`` (None leaves the slot empty). ``row_groups`` (one
    per row) draws a separator line where the group changes. Column labels are written rotated
    when longer than a tile."""
    row_h = 22
    label_w = label_width(row_labels) if label_w is None else label_w
    longest = max((len(c) for c in col_labels), default=0)
    rotate = longest * 7 > tile_w
    top = 12 + (min(longest, 34) * 6.5 if rotate else 18)
    width = max(WIDTH, label_w + tile_w * len(col_labels) + 20)
    height = top + row_h * len(row_labels) + 8
    body = []
    for j, c in enumerate(col_labels):
        cx = label_w + tile_w * j + tile_w / 2
        text = c if len(c) <= 34 else c[:33] + "…"
        if rotate:
            body.append(
                f'<text x="{_f(cx)}" y="{_f(top - 6)}" transform="rotate(-45 {_f(cx)} {_f(top - 6)})" '
                f'class="tick">{escape(text)}<title>{escape(c)}</title></text>'
            )
        else:
            body.append(_label(cx, top - 10, text, "middle", "tick"))
    for i, rl in enumerate(row_labels):
        y = top + row_h * i
        if row_groups and i and row_groups[i] != row_groups[i - 1]:
            body.append(f'<line class="sep" x1="0" x2="{_f(width)}" y1="{_f(y)}" y2="{_f(y)}"/>')
        body.append(_label(label_w - 8, y + row_h / 2, rl))
        for j, t in enumerate(tiles[i]):
            if t is None:
                continue
            x0 = label_w + tile_w * j
            tile = (
                f'<rect x="{_f(x0 + 1)}" y="{_f(y + 1)}" width="{_f(tile_w - 2)}" height="{row_h - 2}" '
                f'fill="{score_colour(t.value)}"><title>{escape(t.title)}</title></rect>'
                f'<text x="{_f(x0 + tile_w / 2)}" y="{_f(y + row_h / 2)}" text-anchor="middle" '
                f'dominant-baseline="middle" class="tile">{escape(t.text)}</text>'
            )
            body.append(f'<a href="#{escape(t.href)}">{tile}</a>' if t.href else tile)
    return _svg(height, body, label, width)


def histograms(
    series: Sequence[tuple[str, Sequence[float]]], *, cutoff: float | None, label: str, bins: int = 10
) -> Markup:
    """Per named series of scores (0..100 points), bars counting scores per bin of width
    ``100 / bins`` (the last bin includes 100); one panel per series on a shared x axis."""
    panel_h, gap, top = 90, 26, 6
    label_w = label_width([name for name, _ in series])
    plot_w = WIDTH - label_w - 90
    height = top + (panel_h + gap) * len(series) + 24
    body = []
    width = plot_w / bins
    for k, (name, values) in enumerate(series):
        counts = [0] * bins
        for v in values:
            counts[min(int(max(v, 0.0) / (100.0 / bins)), bins - 1)] += 1
        peak = max(counts) or 1
        y0 = top + (panel_h + gap) * k
        colour = PALETTE[k % len(PALETTE)]
        body.append(_label(label_w - 8, y0 + panel_h / 2, name))
        body.append(_label(label_w - 8, y0 + panel_h / 2 + 16, f"{len(values)} scored", cls="tick"))
        base = y0 + panel_h
        body.append(
            f'<line class="axis" x1="{label_w}" x2="{_f(label_w + plot_w)}" y1="{_f(base)}" y2="{_f(base)}"/>'
        )
        for b, n in enumerate(counts):
            h = (panel_h - 14) * n / peak
            bx = label_w + width * b
            lo_b, hi_b = b * 100 // bins, (b + 1) * 100 // bins
            body.append(
                f'<rect x="{_f(bx + 1)}" y="{_f(base - h)}" width="{_f(width - 2)}" height="{_f(h)}" '
                f'fill="{colour}">'
                f"<title>{escape(name)}: {n} calls scored {lo_b}–{hi_b}</title></rect>"
            )
            if n:
                body.append(_label(bx + width / 2, base - h - 7, str(n), "middle", "tick"))
        if cutoff is not None:
            cx = label_w + plot_w * cutoff / 100.0
            body.append(f'<line class="zero" x1="{_f(cx)}" x2="{_f(cx)}" y1="{_f(y0)}" y2="{_f(base)}"/>')
    axis_y = height - 14
    for t in range(0, 101, 100 // bins if bins <= 10 else 10):
        body.append(_label(label_w + plot_w * t / 100, axis_y, str(t), "middle", "tick"))
    return _svg(height, body, label)
