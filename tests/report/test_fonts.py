"""Embedded open fonts: the HTML report embeds, for each Indic script it
contains, the shipped Noto font subset to exactly the characters used, and nothing otherwise."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fontTools.ttLib import TTFont

from callbench.report.html.fonts import SCRIPT_FONTS, font_face_css, subset_font, used_codepoints
from callbench.report.html.page import embed_fonts, render_html
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs

MakeRun = Callable[..., Path]
HINDI = "नमस्ते, आपका खाता संख्या क्या है?"
TAMIL = "வணக்கம், உங்கள் கணக்கு எண் என்ன?"


def _faces(css: str) -> dict[str, TTFont]:
    out = {}
    for family, data in re.findall(r'font-family: "([^"]+)";.*?base64,([A-Za-z0-9+/=]+)\)', css):
        out[family] = TTFont(io.BytesIO(base64.b64decode(data)))
    return out


def test_each_script_gets_its_font_with_exactly_the_characters_used() -> None:
    faces = _faces(font_face_css(f"<p>{HINDI}</p><p>{TAMIL}</p><p>plain English</p>"))
    assert set(faces) == {"Noto Sans Devanagari", "Noto Sans Tamil"}
    for family, text in (("Noto Sans Devanagari", HINDI), ("Noto Sans Tamil", TAMIL)):
        font = faces[family]
        script = next(f for f in SCRIPT_FONTS if f.family == family)
        expected = {ord(c) for c in text if script.covers(ord(c))}
        assert set(font.getBestCmap()) == expected  # exactly the characters used
        assert font.flavor == "woff"
        assert font["name"].getDebugName(1) == family and "Open Font License" in font["name"].getDebugName(13)
        assert "GSUB" in font and "GPOS" in font  # conjuncts and vowel signs still shape


def test_a_page_without_indic_text_embeds_nothing() -> None:
    page = "<html><head><title>x</title></head><body>plain</body></html>"
    assert font_face_css(page) == "" and embed_fonts(page) == page


def test_a_subset_is_a_small_part_of_the_font() -> None:
    deva = SCRIPT_FONTS[0]
    used = used_codepoints(HINDI)[deva]
    small = subset_font(deva, used)
    assert 0 < len(small) < 40_000  # the full font is 229,336 bytes


def test_the_report_embeds_fonts_for_its_languages(make_run: MakeRun) -> None:
    run = make_run(candidates=("a",), agents=3, scenarios=1, repeats=1, reply=lambda c, a, s, r: (
        HINDI if a == 1 else TAMIL if a == 2 else "Booked."))
    runs = load_runs([run])
    page = render_html(build_report(runs, n_samples=20), runs)
    head = page[: page.index("</head>")]
    assert head.count("@font-face") == 2 and 'id="embedded-fonts"' in head
    assert set(_faces(head)) == {"Noto Sans Devanagari", "Noto Sans Tamil"}


def test_fonts_subset_in_worker_processes_are_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLBENCH_REPORT_WORKERS", "2")
    text = "नमस्ते বাংলা ગુજરાતી தமிழ் hello"
    serial = font_face_css(text)
    assert serial.count("@font-face") == 4
    assert font_face_css(text, parallel=True) == serial
