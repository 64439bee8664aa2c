"""The HTML report in a real browser (Playwright driving Debian's chromium, no download): fonts
for every starter language, filters, sort, search, links that open their targets, no network
request, and a layout without horizontal overflow at 900 and 1,400 px.

The report comes from a real run of the starter bundle with scripted models (``starter_report``
in conftest.py). Skipped when playwright or chromium is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip("no chromium installed (apt-get install chromium)", allow_module_level=True)
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
# script of each starter language: (Unicode block, the Noto family the report's CSS names first)
SCRIPTS = {
    "hi": (0x0900, 0x097F, "Noto Sans Devanagari"),
    "mr": (0x0900, 0x097F, "Noto Sans Devanagari"),
    "ta": (0x0B80, 0x0BFF, "Noto Sans Tamil"),
    "gu": (0x0A80, 0x0AFF, "Noto Sans Gujarati"),
    "bn": (0x0980, 0x09FF, "Noto Sans Bengali"),
}


@pytest.fixture(scope="module")
def report(starter_report: dict[str, Any]) -> dict[str, Any]:
    return starter_report


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def open_page(browser: Any, report: dict[str, Any], width: int = 1400) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report["html"].as_uri())
    page.wait_for_load_state("load")
    assert errors == []
    return page, requests


def platform_fonts(page: Any, selector: str) -> dict[str, int]:
    """Font family -> glyphs it drew for the element's text, as Chromium reports it."""
    cdp = page.context.new_cdp_session(page)
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    cdp.send("CSS.enable")
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return {f["familyName"]: f["glyphCount"] for f in fonts}


def test_every_language_tagged_and_drawn_by_its_script_font(browser: Any, report: dict[str, Any]) -> None:
    page, _ = open_page(browser, report)
    assert set(report["languages"]) >= {"en-IN", "hi-IN", "mr-IN", "ta-IN", "gu-IN", "bn-IN"}
    for tag in report["languages"]:
        text = page.evaluate(
            "t => Array.from(document.querySelectorAll('[lang=\"' + t + '\"]'))"
            ".map(e => e.textContent).join(' ')",
            tag,
        )
        assert len(text) > 50, tag  # the language's messages carry its tag
        script = SCRIPTS.get(tag.split("-")[0])
        if script is None:
            continue
        lo, hi, family = script
        chars = "".join(sorted({ch for ch in text if lo <= ord(ch) <= hi}))
        assert len(chars) > 20, (tag, chars)  # native script, not transliteration
        # no skip when the machine lacks the font: the report embeds it (report/html/fonts.py)
        # the report's font stack names the family for this language
        stack = page.evaluate(
            "t => getComputedStyle(document.querySelector('div.text[lang=\"' + t + '\"]')).fontFamily", tag
        )
        assert stack.startswith(f'"{family}"'), stack
        assert page.evaluate("([f, s]) => document.fonts.check('16px \"' + f + '\"', s)", [family, chars])
        # every glyph of the script's characters is drawn by the script's font, none by a fallback
        page.evaluate(
            "([t, s]) => { const p = document.createElement('p'); p.id = 'probe'; p.lang = t;"
            " p.textContent = s; document.body.appendChild(p); }",
            [tag, chars],
        )
        fonts = platform_fonts(page, "#probe")
        page.evaluate("document.getElementById('probe').remove()")
        assert set(fonts) == {family}, (tag, fonts)


def visible_rows(page: Any) -> list[dict[str, str]]:
    return page.evaluate(
        "Array.from(document.querySelectorAll('#episode-table tbody tr')).filter(r => !r.hidden)"
        ".map(r => Object.assign({}, r.dataset, {overall: r.cells[9].getAttribute('data-v')}))"
    )


def test_filters_sort_and_search(browser: Any, report: dict[str, Any]) -> None:
    page, _ = open_page(browser, report)
    every = visible_rows(page)
    assert len(every) == len(report["traces"]) == 2 * len(report["languages"])
    page.select_option("#filter-language", "ta-IN")
    page.select_option("#filter-verdict", "fail")
    rows = visible_rows(page)
    expected = [r for r in every if r["language"] == "ta-IN" and r["verdict"] == "fail"]
    assert rows and rows == expected
    assert page.text_content("#episode-count") == f"{len(rows)} of {len(every)} episodes shown"
    # episodes filtered out are hidden below too
    hidden = page.evaluate("Array.from(document.querySelectorAll('details.episode.filtered-out')).length")
    assert hidden == len(every) - len(rows)
    for facet, key in (("candidate", "candidate"), ("agent_id", "agent"), ("difficulty", "difficulty"),
                       ("end_reason", "end")):  # fmt: skip
        page.click("#episode-reset")
        value = every[-1][key]
        page.select_option(f"#filter-{facet}", value)
        assert visible_rows(page) == [r for r in every if r[key] == value]
    page.click("#episode-reset")
    # sort by overall: ascending, then descending on a second click
    page.click("#episode-table thead th:nth-child(10) button")
    asc = [float(r["overall"]) for r in visible_rows(page)]
    assert asc == sorted(asc) and len(set(asc)) > 1
    page.click("#episode-table thead th:nth-child(10) button")
    assert [float(r["overall"]) for r in visible_rows(page)] == sorted(asc, reverse=True)
    # search message text: a Tamil word from one caller utterance
    trace = next(t for t in report["traces"] if t["language"] == "ta-IN")
    word = max(next(m["content"] for m in trace["messages"] if m["role"] == "user").split(), key=len)
    page.fill("#episode-search", word)
    found = sorted(r["target"] for r in visible_rows(page))
    holding = {t["episode_id"] for t in report["traces"] if word in json.dumps(t, ensure_ascii=False)}
    ids = page.evaluate("ts => ts.map(t => document.getElementById(t).querySelector('p').textContent)", found)
    assert 1 <= len(found) <= len(holding)
    assert all(any(e in text for e in holding) for text in ids)


def in_view(page: Any, selector: str) -> bool:
    return page.evaluate(
        "s => { const r = document.querySelector(s).getBoundingClientRect();"
        " return r.height > 0 && r.top >= -1 && r.top < innerHeight; }",
        selector,
    )


def test_links_open_what_they_point_to(browser: Any, report: dict[str, Any]) -> None:
    page, _ = open_page(browser, report)
    # episode table row -> the episode, open and on screen
    link = page.locator("#episode-table tbody tr a").nth(3)
    target = link.get_attribute("href")[1:]
    link.click()
    assert page.evaluate("t => document.getElementById(t).open", target)
    assert in_view(page, f"#{target}")
    # its operating-instruction link -> the instruction block open, full text rebuilt exactly
    instr = page.locator(f"#{target} tr.role-system a")
    block = instr.get_attribute("href")[1:]
    name = page.text_content(f"#{block} > summary")
    episode_id = page.text_content(f"#{target} > p").split("episode ")[1].split(" ·")[0]
    trace = next(t for t in report["traces"] if t["episode_id"] == episode_id)
    assert f"{trace['agent_id']} · scenario" in name and trace["scenario_id"] in name
    instr.click()
    assert page.evaluate("b => document.getElementById(b).open", block) and in_view(page, f"#{block}")
    shown = page.evaluate(
        "b => { const d = document.getElementById(b); const f = d.querySelector('.full');"
        " return f ? f.textContent : document.getElementById(b + '-text').textContent; }",
        block,
    )
    assert shown.rstrip("\n") == trace["messages"][0]["content"].rstrip("\n")
    # a judge citation -> the cited message row, its episode open
    cite = page.locator("details.episode a[href*='-m']").nth(5)
    cited = cite.get_attribute("href")[1:]
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
    page.evaluate(
        "c => document.querySelector('a[href=\"#' + c + '\"]').closest('details').open = true", cited
    )
    cite.click()
    assert in_view(page, f"#{cited}")
    # a tile of the score matrix -> that call, even when a filter had hidden it
    page.select_option(
        "#filter-candidate", page.evaluate("document.querySelector('#filter-candidate').options[1].value")
    )
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
    tiles = page.locator("#fig-matrix svg a")
    assert tiles.count() == len(report["traces"])
    tile = tiles.nth(tiles.count() - 1)
    goal = tile.get_attribute("href")[1:]
    tile.click()
    assert page.evaluate("t => document.getElementById(t).open", goal) and in_view(page, f"#{goal}")


def test_no_request_leaves_the_file(browser: Any, report: dict[str, Any]) -> None:
    page, requests = open_page(browser, report)
    page.select_option("#filter-language", "hi-IN")
    page.fill("#episode-search", "a")
    page.locator("#episode-table tbody tr:not([hidden]) a").first.click()
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    page.wait_for_timeout(300)
    assert requests and all(u.startswith("file://") for u in requests), requests


@pytest.mark.parametrize("width", [900, 1400])
def test_layout_without_horizontal_overflow(
    browser: Any, report: dict[str, Any], width: int, tmp_path: Path
) -> None:
    page, _ = open_page(browser, report, width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for table in ("#runs ~ .scroll table", "#leaderboard ~ .scroll table", "#episode-table"):
        right = page.evaluate("s => document.querySelector(s).getBoundingClientRect().right", table)
        scroller = page.evaluate("s => { const e = document.querySelector(s).parentElement;"
                                 " return e.scrollWidth - e.clientWidth; }", table)  # fmt: skip
        assert right <= width and scroller <= 0, (table, right, scroller)
    for fig in ("#fig-leaderboard", "#fig-matrix", "#fig-paired"):
        assert page.evaluate("s => document.querySelector(s).getBoundingClientRect().right", fig) <= width
    shot = tmp_path / f"report-{width}.png"
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000


def test_indic_text_renders_from_embedded_fonts_without_installed_ones(
        browser: Any, report: dict[str, Any], tmp_path: Path) -> None:
    """On a machine without fonts-noto, every Indic script of the report is drawn
    by the font the page embeds: its glyphs differ from the boxes the system's fallback draws."""
    installed = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True).stdout
    page, requests = open_page(browser, report)
    assert page.evaluate("document.getElementById('embedded-fonts') !== null")
    text = report["html"].read_text(encoding="utf-8")  # templates and data included
    for lo, hi, family in {(lo, hi, f) for lo, hi, f in SCRIPTS.values()}:
        chars = "".join(sorted({ch for ch in text if lo <= ord(ch) <= hi}))[:12]
        assert chars, family
        shots = []
        for stack in (f'"{family}"', '"DejaVu Sans", sans-serif'):
            page.evaluate(
                "([s, f]) => { const p = document.createElement('p'); p.id = 'shot';"
                " p.style.fontFamily = f; p.style.fontSize = '32px'; p.style.display = 'inline-block';"
                " p.textContent = s; document.body.prepend(p); }",
                [chars, stack],
            )
            if stack.startswith(f'"{family}"'):
                # an embedded face is decoded when text first asks for it, asynchronously: until
                # then the fallback draws (seen on a loaded machine); wait for it, as a reader's
                # page repaints once it is ready
                loaded = page.evaluate("([f, s]) => document.fonts.load('32px \"' + f + '\"', s)"
                                       ".then(faces => faces.length)", [family, chars])
                assert loaded >= 1, family
                page.evaluate("document.fonts.ready.then(() => true)")
                assert set(platform_fonts(page, "#shot")) == {family}, family
            shots.append(page.locator("#shot").screenshot(path=str(tmp_path / f"{lo:x}-{len(shots)}.png")))
            page.evaluate("document.getElementById('shot').remove()")
        assert shots[0] != shots[1], family  # the embedded font draws glyphs, not the fallback's
        if family not in installed:  # the case of the issue: nothing installed to fall back on
            assert page.evaluate("f => document.fonts.check('16px \"' + f + '\"')", family)
    # nothing but the report itself is fetched (Chromium's CSS domain may read the page again)
    assert set(requests) == {report["html"].as_uri()}
