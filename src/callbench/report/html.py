"""One self-contained HTML report that works offline.

- plotly.js is embedded exactly once (``plotly.offline.get_plotlyjs()`` in one ``<script>``);
  each figure's JSON (``fig.to_json()``) sits in a ``<script type="application/json">`` block and
  is drawn by a few lines of inline script. No external URL: no CDN, no web fonts, no links out.
- The plotly.js source holds URL-shaped string constants (XML namespaces, map-tile servers it
  never contacts for the charts used here). To keep the file free of any ``://`` text, the ``/``
  characters after ``:`` are written as ``\\/`` inside scripts (the same string in JavaScript and
  JSON) and as ``&#58;//`` in HTML text (the same character after entity decoding).
- Every value interpolated into the template (model speech, tool arguments and results, judge
  reasons, candidate names) goes through jinja2 autoescaping; values meant for ``<script>``
  are JSON with ``<``, ``>`` and ``&`` written as ``\\u003c`` etc. (:func:`script_json`).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.offline
from jinja2 import Environment
from markupsafe import Markup, escape

from callbench.bundle.models import DIAGNOSTIC_LABELS, Diagnostic
from callbench.report.build import Report
from callbench.report.faults import FAULT_COLUMNS, fault_rows, fault_summary
from callbench.report.judge_accuracy import JUDGE_ACCURACY_COLUMNS, NOT_MEASURED, accuracy_rows
from callbench.report.ledger import LEDGER_COLUMNS, ledger_rows
from callbench.report.load import RunData
from callbench.report.terminal import SMOKE_TEST_TEXT
from callbench.report.viewer import episode_views
from callbench.trace import atomic_write_text

TEMPLATE = "report.html.j2"
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "showLink": False, "showSendToCloud": False}


def neutralise_js(text: str) -> str:
    """Script text with every ``://`` written ``:\\/\\/``: the same string inside JS/JSON string
    literals, template literals and regex literals, which is where plotly.js holds them.
    Raises ``ValueError`` if the text could end its ``<script>`` element early."""
    lowered = text.lower()
    if "</script" in lowered or "<!--" in lowered:
        raise ValueError("script text holds '</script' or '<!--' and cannot be inlined safely")
    return text.replace("://", ":\\/\\/")


def script_json(value: Any) -> Markup:
    """JSON safe to place inside a ``<script>`` element (HTML-significant characters escaped)."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(neutralise_js(text))


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js as shipped by the plotly package, made safe for inline embedding."""
    return neutralise_js(plotly.offline.get_plotlyjs())


def _finalize(value: Any) -> Any:
    """Autoescape every interpolation, then break up ``://`` so the file holds no URL text."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return Markup(str(escape(value)).replace("://", "&#58;//"))


def _environment() -> Environment:
    env = Environment(autoescape=True, finalize=_finalize, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda x, d=1: "—" if x is None else f"{x:.{d}f}"
    return env


def _template_source() -> str:
    return (resources.files("callbench.report") / "templates" / TEMPLATE).read_text(encoding="utf-8")


def _errors(est: list[float | None], low: list[float | None], high: list[float | None]) -> dict[str, Any]:
    plus = [None if e is None or h is None else h - e for e, h in zip(est, high, strict=True)]
    minus = [None if e is None or lo is None else e - lo for e, lo in zip(est, low, strict=True)]
    return {"type": "data", "array": plus, "arrayminus": minus, "visible": True}


def figures(report: Report) -> list[tuple[str, str]]:
    """``(title, figure JSON)`` for the leaderboard, pillars, pass rate and diagnostics charts."""
    cands = [c.candidate for c in report.candidates]
    if not cands:
        return []
    out: list[tuple[str, str]] = []
    ov = [c.overall for c in report.candidates]
    fig = go.Figure(
        go.Scatter(
            x=[r.estimate for r in ov],
            y=cands,
            mode="markers",
            marker={"size": 10},
            error_x=_errors([r.estimate for r in ov], [r.low for r in ov], [r.high for r in ov]),
        )
    )
    fig.update_layout(
        xaxis={"title": "overall score", "range": [-2, 102]},
        yaxis={"autorange": "reversed", "type": "category"},
        height=110 + 45 * len(cands),
        margin={"l": 240, "r": 20, "t": 20, "b": 50},
    )
    out.append(("Leaderboard: overall score with interval", fig.to_json()))
    fig = go.Figure()
    for name in ("task", "conversation"):
        rs = [getattr(c, name) for c in report.candidates]
        fig.add_bar(
            name=name,
            x=cands,
            y=[r.estimate for r in rs],
            error_y=_errors([r.estimate for r in rs], [r.low for r in rs], [r.high for r in rs]),
        )
    fig.update_layout(
        barmode="group",
        yaxis={"title": "pillar score", "range": [0, 102]},
        xaxis={"type": "category"},
        margin={"t": 20},
        height=420,
    )
    out.append(("Pillars: task and conversation", fig.to_json()))
    pr = [c.pass_rate for c in report.candidates]
    fig = go.Figure(
        go.Bar(
            x=cands,
            y=[r.estimate for r in pr],
            error_y=_errors([r.estimate for r in pr], [r.low for r in pr], [r.high for r in pr]),
        )
    )
    fig.update_layout(
        yaxis={"title": "pass rate %", "range": [0, 102]},
        xaxis={"type": "category"},
        margin={"t": 20},
        height=380,
    )
    out.append(("Pass rate at the cutoff", fig.to_json()))
    diags = list(Diagnostic)
    z = [[(c.diagnostics[d].score if d in c.diagnostics else None) for d in diags] for c in report.candidates]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[DIAGNOSTIC_LABELS[d] for d in diags],
            y=cands,
            zmin=0,
            zmax=100,
            colorscale="RdYlGn",
            texttemplate="%{z:.0f}",
            hovertemplate="%{y}<br>%{x}: %{z:.1f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=230 + 40 * len(cands),
        margin={"l": 240, "r": 20, "t": 20, "b": 170},
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis={"tickangle": 35},
    )
    out.append(("Diagnostics (score from summed points)", fig.to_json()))
    return out


def render_html(report: Report, runs: list[RunData], *, include_traces: bool = True) -> str:
    """The report as one HTML document (module docstring for the offline and escaping rules).
    ``include_traces=False`` leaves out the per-episode trace viewer (for very large runs, where
    it dominates the file size)."""
    views, instructions = episode_views(runs) if include_traces else ([], [])
    env = _environment()
    template = env.from_string(_template_source())
    figs = [
        {"id": f"fig-{i}", "title": title, "json": script_json(spec)}
        for i, (title, spec) in enumerate(figures(report))
    ]
    diffs = sorted({d for c in report.candidates for d in c.by_difficulty})
    return template.render(
        report=report,
        plotly_js=Markup(plotly_js()),
        plotly_config=script_json(PLOTLY_CONFIG),
        figures=figs,
        difficulties=diffs,
        diagnostics=[(d, DIAGNOSTIC_LABELS[d]) for d in Diagnostic],
        episodes=views,
        instructions=instructions,
        smoke_test_text=SMOKE_TEST_TEXT,
        report_id=hashlib.sha256(report.model_dump_json().encode()).hexdigest()[:12],
        include_traces=include_traces,
        ledger=[row for r in report.runs if r.simulator for row in ledger_rows(r.run_id, r.simulator)],
        ledger_columns=LEDGER_COLUMNS,
        judge_accuracy=[row for r in report.runs for row in accuracy_rows(r.run_id, r.judge_accuracy)],
        judge_accuracy_columns=JUDGE_ACCURACY_COLUMNS[1:],
        judge_accuracy_missing=NOT_MEASURED,
        fault_rows=[row for r in report.runs if r.faults for row in fault_rows(r.run_id, r.faults)],
        fault_columns=FAULT_COLUMNS,
        fault_summaries=[fault_summary(r.run_id, r.faults) for r in report.runs if r.faults],
        repeat_ks=[str(k) for k in sorted({int(k) for c in report.candidates for k in c.pass_hat_k or {}})],
    )


def write_html(report: Report, runs: list[RunData], path: Path, *, include_traces: bool = True) -> None:
    """Render and write the report atomically to ``path``."""
    atomic_write_text(path, render_html(report, runs, include_traces=include_traces))
