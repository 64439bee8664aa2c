"""One self-contained HTML report that works offline.

- Charts are inline SVG drawn in Python (:mod:`callbench.report.html.figures`); the page's only script
  is the small viewer script ``templates/report.js`` (filters, sort, search, opening linked
  episodes and instruction blocks), embedded once. No external URL: no CDN, no web fonts, no
  links out. Fonts: the CSS font stack names Noto families for Devanagari, Tamil, Gujarati and
  Bengali first, and the page embeds those fonts, subset to the characters it uses
  (:mod:`callbench.report.html.fonts`), so Indic text renders with no Indic font installed.
- Script text is checked by :func:`neutralise_js`: it must not be able to end its ``<script>``
  element early, and any ``://`` is written ``:\\/\\/`` (the same string in JavaScript and
  JSON), so the file holds no URL text; in HTML text ``://`` is written ``&#58;//``.
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

from jinja2 import Environment, Template
from markupsafe import Markup, escape

from callbench.bundle.models import DIAGNOSTIC_LABELS, Diagnostic
from callbench.report.html.figures import figures
from callbench.report.html.fonts import font_face_css
from callbench.report.html.viewer import episode_row, episode_views
from callbench.report.model.build import Report, pass_rule_text
from callbench.report.model.faults import FAULT_COLUMNS, fault_rows, fault_summary
from callbench.report.model.judge_accuracy import JUDGE_ACCURACY_COLUMNS, NOT_MEASURED, accuracy_rows
from callbench.report.model.judge_latency import judge_latency_line
from callbench.report.model.latency_text import (
    LATENCY_COLUMNS,
    TURN_SLICE_NOTE,
    latency_notes,
    latency_rows,
    paired_rows,
    ranked_slices,
    slice_rows,
)
from callbench.report.model.ledger import LEDGER_COLUMNS, ledger_rows
from callbench.report.model.load import RunData
from callbench.report.model.official import HTML_SHOWN_IDS, missing_traces_text
from callbench.report.model.text import (
    REFERENCE_TEXT,
    SMOKE_TEST_TEXT,
    SOURCE_LABELS,
    SOURCES_NOTE,
    STAND_IN_TEXT,
    source_cells,
    validation_lines,
)
from callbench.report.model.voice import FIGURE_COLUMNS, RETENTION_COLUMNS, figure_rows, retention_rows
from callbench.stats.bootstrap import MIN_SCORED_FOR_INTERVAL
from callbench.stats.paired import MIN_PAIRED_SCENARIOS
from callbench.stats.sources import SOURCE_NAMES
from callbench.trace import atomic_write_text

TEMPLATE = "report.html.j2"
SCRIPT = "report.js"
EPISODE_TEMPLATE = "episode.html.j2"


def neutralise_js(text: str) -> str:
    """Script text with every ``://`` written ``:\\/\\/``: the same string inside JS/JSON string
    literals, template literals and regex literals (where script text holds URL-shaped strings).
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
def viewer_js() -> str:
    """The report's viewer script (``templates/report.js``), checked for inline embedding."""
    return neutralise_js(
        (resources.files("callbench.report.html") / "templates" / SCRIPT).read_text(encoding="utf-8")
    )


def _finalize(value: Any) -> Any:
    """Autoescape every interpolation, then break up ``://`` so the file holds no URL text."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    text = escape(value)  # the common case holds no "://": no second copy of the text
    return text if "://" not in text else Markup(str(text).replace("://", "&#58;//"))


def break_points(value: Any) -> Markup:
    """Escaped text with a ``<wbr>`` line-break opportunity after each ``_``, ``-``, ``.``,
    ``:`` and ``/``, so long ids wrap between their parts, not mid-word."""
    text = str(_finalize(value))
    for ch in "_-.:/":
        text = text.replace(ch, ch + "<wbr>")
    return Markup(text)


def _environment() -> Environment:
    env = Environment(autoescape=True, finalize=_finalize, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda x, d=1: "—" if x is None else f"{x:.{d}f}"
    env.filters["wbr"] = break_points
    env.filters["missing_traces"] = lambda ids: missing_traces_text(ids, HTML_SHOWN_IDS)
    return env


def _template_source(name: str = TEMPLATE) -> str:
    return (resources.files("callbench.report.html") / "templates" / name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _templates() -> tuple[Template, Template]:
    env = _environment()
    return env.from_string(_template_source()), env.from_string(_template_source(EPISODE_TEMPLATE))


def render_episode(view: dict[str, Any]) -> Markup:
    """One call's ``<details class="episode">`` element (``templates/episode.html.j2``) from its
    :func:`~callbench.report.html.viewer.episode_view`, every value escaped as in the page."""
    return Markup(_templates()[1].render(e=view))


def facet_values(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The filter menus' values: for each facet of the episodes table, its distinct values sorted."""
    return {
        key: sorted({str(r[key]) for r in rows})
        for key in ("candidate", "agent_id", "language", "difficulty", "end_reason")
    }


def render_page(
    report: Report,
    rows: list[dict[str, Any]],
    instructions: list[dict[str, Any]],
    briefs: list[dict[str, Any]],
    *,
    episode_html: list[Markup] | None,
    folder: dict[str, Any] | None = None,
    include_traces: bool = True,
) -> str:
    """The report page: every table and figure, the episodes table from ``rows``
    (:func:`~callbench.report.html.viewer.episode_row`), the shared instruction and brief blocks, and
    either the calls themselves (``episode_html``, the single file) or, with ``folder`` (keys
    ``calls``, ``search``, ``shards``, ``search_mb``, ``reason``), an empty container the viewer
    script fills from the folder's call files. Fonts are not embedded here (:func:`embed_fonts`)."""
    template = _templates()[0]
    anchors = {r["episode_id"]: r["anchor"] for r in rows}
    for block in instructions + briefs:
        block["ops_json"] = script_json([[i1, i2, new] for i1, i2, new in block["ops"]])
    diffs = sorted({d for c in report.candidates for d in c.by_difficulty})
    return template.render(
        report=report,
        pass_rule_text=pass_rule_text(report.candidates),
        viewer_js=Markup(viewer_js()),
        figures=figures(report, anchors),
        facets=facet_values(rows),
        briefs=briefs,
        difficulties=diffs,
        diagnostics=[(d, DIAGNOSTIC_LABELS[d]) for d in Diagnostic],
        episodes=rows,
        episode_html=episode_html or [],
        folder=folder,
        instructions=instructions,
        smoke_test_text=SMOKE_TEST_TEXT,
        reference_text=REFERENCE_TEXT,
        stand_in_text=STAND_IN_TEXT,
        report_id=hashlib.sha256(report.model_dump_json().encode()).hexdigest()[:12],
        include_traces=include_traces,
        ledger=[row for r in report.runs if r.simulator for row in ledger_rows(r.run_id, r.simulator)],
        ledger_columns=LEDGER_COLUMNS,
        voice_figures=figure_rows(report.voice) if report.voice else [],
        voice_figure_columns=FIGURE_COLUMNS,
        voice_retention=retention_rows(report.voice) if report.voice else [],
        voice_retention_columns=RETENTION_COLUMNS,
        latency_rows=latency_rows(report.latency),
        latency_columns=LATENCY_COLUMNS,
        latency_lines=(latency_notes(report.latency, report.settings.latency_budget_s)
                       + report.latency_warnings) if report.latency else [],
        latency_slices=slice_rows(report.latency),
        latency_turn_note=TURN_SLICE_NOTE,
        latency_ranked=[(kind, ranked_slices(report.latency, kind)) for kind in ("agent", "scenario")],
        latency_paired=paired_rows(report.paired_latency),
        judge_latency_lines=[line for r in report.runs
                             if (line := judge_latency_line(r.run_id, r.judge_latency))],
        judge_accuracy=[row for r in report.runs for row in accuracy_rows(r.run_id, r.judge_accuracy)],
        judge_accuracy_columns=JUDGE_ACCURACY_COLUMNS[1:],
        judge_accuracy_missing=NOT_MEASURED,
        validation_lines=validation_lines,
        score_sources=source_cells(report),
        score_source_labels=[SOURCE_LABELS[s] for s in SOURCE_NAMES],
        score_sources_note=SOURCES_NOTE,
        fault_rows=[row for r in report.runs if r.faults for row in fault_rows(r.run_id, r.faults)],
        fault_columns=FAULT_COLUMNS,
        fault_summaries=[fault_summary(r.run_id, r.faults) for r in report.runs if r.faults],
        repeat_ks=[str(k) for k in sorted({int(k) for c in report.candidates for k in c.pass_hat_k or {}})],
        min_scored=MIN_SCORED_FOR_INTERVAL,
        min_paired=MIN_PAIRED_SCENARIOS,
    )


def render_html(report: Report, runs: list[RunData], *, include_traces: bool = True) -> str:
    """The report as one HTML document (module docstring for the offline and escaping rules).
    ``include_traces=False`` leaves out the per-episode trace viewer (for very large runs, where
    it dominates the file size). Trace data is read through
    :func:`~callbench.report.html.viewer.call_data`."""
    views, instructions, briefs = (episode_views(runs, report.settings.latency_budget_s) if include_traces
                                   else ([], [], []))
    page = render_page(
        report,
        [episode_row(v) for v in views],
        instructions,
        briefs,
        episode_html=[render_episode(v) for v in views],
        include_traces=include_traces,
    )
    return embed_fonts(page)


def embed_fonts(page: str, *, extra_text: str = "", parallel: bool = False) -> str:
    """``page`` with ``@font-face`` rules embedding subsets of the shipped Noto fonts for the
    Indic scripts its text uses, and those of ``extra_text`` (the folder report's call files)
    (:func:`callbench.report.html.fonts.font_face_css`), in a ``<style>`` element at the end of its
    head; unchanged when it uses none. ``parallel``: subset the fonts in the report's worker
    processes (for large reports)."""
    css = font_face_css(page + extra_text, parallel=parallel)
    if not css:
        return page
    return page.replace("</head>", f'<style id="embedded-fonts">\n{css}\n</style>\n</head>', 1)


def write_html(report: Report, runs: list[RunData], path: Path, *, include_traces: bool = True) -> None:
    """Render and write the report atomically to ``path``."""
    atomic_write_text(path, render_html(report, runs, include_traces=include_traces))
