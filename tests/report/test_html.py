from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from callbench.report.html.page import neutralise_js, render_html, viewer_js, write_html
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from waiting import limit

MakeRun = Callable[..., Path]
EVIL = "<script>alert(1)</script> see https://evil.example/x?a=1&b=2"


class Collector(HTMLParser):
    """Every tag with its attributes, and the text of every <script> element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.ids: set[str] = set()
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        d = dict(attrs)
        self.tags.append((tag, d))
        if d.get("id"):
            self.ids.add(str(d["id"]))
        if tag == "script":
            self._in_script = d
            self.scripts.append((d, ""))

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None


@pytest.fixture
def html(make_run: MakeRun) -> str:
    rd = make_run(
        candidates=("cand-a", '<i>c&"d'),
        reply=lambda c, a, s, r: EVIL,
        skip=lambda c, a, s, r: (a, s, r) == (1, 1, 1),
    )
    runs = load_runs([rd])
    return render_html(build_report(runs, n_samples=50), runs)


def parsed(html: str) -> Collector:
    c = Collector()
    c.feed(html)
    c.close()
    return c


def test_no_external_url_anywhere(html: str) -> None:
    assert "://" not in html
    assert "//cdn" not in html.lower()
    c = parsed(html)
    for tag, attrs in c.tags:
        assert tag not in ("link", "iframe", "img", "object", "embed", "base"), tag
        assert "src" not in attrs, (tag, attrs)
        for key in ("href", "action", "data", "srcset", "poster"):
            value = attrs.get(key)
            if value is not None:
                assert key == "href" and value.startswith("#"), (tag, attrs)
        assert "style" not in attrs or "url(" not in str(attrs["style"])
    head = html.split("<script", 1)[0]
    # the only url() is an embedded font, a data: URL inside the page (report/html/fonts.py)
    urls = re.findall(r"url\(([^)]*)\)", head)
    assert all(u.startswith("data:font/woff;base64,") for u in urls), [u[:40] for u in urls]
    assert "@import" not in html


def test_every_in_page_link_has_a_target(html: str) -> None:
    c = parsed(html)
    hrefs = [str(a["href"]) for _, a in c.tags if a.get("href")]
    assert len(hrefs) > 50
    missing = [h for h in hrefs if h[1:] not in c.ids]
    assert missing == []


def test_charts_are_inline_svg_with_one_script(html: str) -> None:
    c = parsed(html)
    svgs = [a for t, a in c.tags if t == "svg"]
    assert len(svgs) == 8  # leaderboard, pillars, pass, matrix, paired, agents, diagnostics, distribution
    assert all(a.get("class") == "chart" and "xmlns" not in a for a in svgs)
    executable = [text for attrs, text in c.scripts if attrs.get("type") != "application/json"]
    assert len(executable) == 1 and "episode-table" in executable[0]
    assert "Plotly" not in html and "plotly.js" not in html
    # candidate names are escaped in the SVG labels, and intact in the text
    assert "<i>c" not in html
    assert "&lt;i&gt;c&amp;&#34;d" in html


def test_model_text_is_escaped(html: str) -> None:
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # one occurrence per non-skipped episode's final assistant message (2 x 12 - 2 skipped)
    assert (
        html.count("&lt;script&gt;alert(1)&lt;/script&gt; see https&#58;//evil.example/x?a=1&amp;b=2") == 22
    )
    c = parsed(html)
    executable = [text for attrs, text in c.scripts if attrs.get("type") != "application/json"]
    assert len(executable) == 1  # the viewer script; no injected script
    assert not any("alert(1)" in t for t in executable)


def test_trace_viewer_content(html: str) -> None:
    # intended vs heard: only the dropped words are marked, in the intended text
    assert '<div class="text" lang="en">I want to book <del class="w">a table</del></div>' in html
    assert '<div class="text" lang="en">I want to book</div>' in html
    assert 'drop (authored, applied): “<span lang="en">a table</span>”' in html
    assert 'href="#e0-t0"' in html and 'id="e0-t0"' in html  # judge label citing tool event 0
    assert 'href="#e0-m5"' in html and 'id="e0-m5"' in html  # judge label citing message 5
    assert "99?" in html  # a cited index that does not exist is shown, not linked
    assert "skipped: caller validation failed 3 times" in html
    assert html.count('<details class="instr" id="instr-') == 3  # one operating document per agent
    # caller briefs: one per scenario, the first of each language whole, the rest as line edits
    assert (
        html.count('<details class="instr" id="brief-')
        + html.count('<details class="instr derived" id="brief-')
        == 6
    )
    assert "operating instructions of ag0 for sc0" in html
    assert 'lang="hi"' in html and 'lang="ta"' in html


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_viewer_script_parses_as_javascript(tmp_path: Path) -> None:
    path = tmp_path / "v.js"
    path.write_text(viewer_js(), encoding="utf-8")
    done = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True, timeout=limit(600))
    assert done.returncode == 0, done.stderr[:2000]


def test_neutralise_js_rules() -> None:
    assert neutralise_js('a="http://x"') == 'a="http:\\/\\/x"'
    assert json.loads(neutralise_js(json.dumps({"u": "https://a.b/c"}))) == {"u": "https://a.b/c"}
    with pytest.raises(ValueError, match="cannot be inlined"):
        neutralise_js("x='</script>'")


def test_write_html_file(make_run: MakeRun, tmp_path: Path) -> None:
    runs = load_runs([make_run(agents=1, scenarios=1, repeats=1)])
    out = tmp_path / "out" / "r.html"
    write_html(build_report(runs, n_samples=20), runs, out)
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert re.search(r"<title>callbench report [0-9a-f]{12}</title>", text)


def test_html_without_traces(make_run: MakeRun) -> None:
    runs = load_runs([make_run(reply=lambda c, a, s, r: EVIL)])
    report = build_report(runs, n_samples=20)
    full, lean = render_html(report, runs), render_html(report, runs, include_traces=False)
    assert 'id="e0"' in full and 'id="e0"' not in lean
    assert "--no-traces" in lean and "alert(1)" not in lean
    assert "://" not in lean and 'id="fig-matrix"' in lean


def test_starter_report_within_size_budget(starter_report: dict[str, Any]) -> None:
    """The 70-call starter report at most 4 MB, i.e. 4 MB / 70 per call. This slice
    (one scenario per language, each agent's instructions stored whole) is the costly case."""
    html = starter_report["html"].read_text(encoding="utf-8")
    calls = len(starter_report["traces"])
    assert calls == 2 * len(starter_report["languages"])
    # the embedded fonts are a fixed cost, not a per-call one (docs/decisions.md)
    fonts = html[html.index('<style id="embedded-fonts">'):]
    fonts = fonts[: fonts.index("</style>")]
    assert len(fonts.encode()) <= 300_000
    assert len(html.encode()) - len(fonts.encode()) <= 4_000_000 * calls / 70
    c = parsed(html)
    executable = [text for attrs, text in c.scripts if attrs.get("type") != "application/json"]
    assert len(executable) == 1 and len(executable[0]) < 20_000
    assert "://" not in html
