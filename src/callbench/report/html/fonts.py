"""Open fonts embedded in the HTML report for the Indic scripts it contains.

A report opened on a machine with no Indic font (a stock Linux with DejaVu only) showed Hindi,
Tamil, Marathi, Bengali and Gujarati as empty boxes. The package ships Noto Sans Devanagari, Tamil,
Bengali and Gujarati (``report/html/fonts/``, SIL Open Font License 1.1, ``OFL.txt`` beside them, taken
unmodified from Debian's ``fonts-noto-core``); :func:`font_face_css` subsets each font whose script
the report uses to exactly the characters of that script in the report (with every OpenType
layout feature, so conjuncts and vowel signs shape as in the full font), and embeds it as a WOFF
``data:`` URL under the font's own family name. The report's CSS already names these families
first for each language, so the embedded face is used everywhere and no font is fetched.

Size: a subset is a few to a few tens of kilobytes (``docs/decisions.md`` has the figures); a
report without Indic text embeds nothing.
"""

from __future__ import annotations

import base64
import functools
import io
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class ScriptFont:
    """A script's Unicode ranges (inclusive), its Noto family and the shipped file."""

    script: str
    ranges: tuple[tuple[int, int], ...]
    family: str
    file: str

    def covers(self, cp: int) -> bool:
        """True when code point ``cp`` belongs to this script's ranges."""
        return any(lo <= cp <= hi for lo, hi in self.ranges)


SCRIPT_FONTS = (
    ScriptFont("Devanagari", ((0x0900, 0x097F), (0xA8E0, 0xA8FF), (0x1CD0, 0x1CFF)), "Noto Sans Devanagari",
               "NotoSansDevanagari-Regular.ttf"),
    ScriptFont("Bengali", ((0x0980, 0x09FF),), "Noto Sans Bengali", "NotoSansBengali-Regular.ttf"),
    ScriptFont("Gujarati", ((0x0A80, 0x0AFF),), "Noto Sans Gujarati", "NotoSansGujarati-Regular.ttf"),
    ScriptFont("Tamil", ((0x0B80, 0x0BFF),), "Noto Sans Tamil", "NotoSansTamil-Regular.ttf"),
)
"""The scripts of the starter bundle's languages (hi, mr: Devanagari; bn; gu; ta)."""

JOINERS = frozenset({0x200C, 0x200D, 0x25CC})
"""ZWNJ, ZWJ and the dotted circle: kept in a script's subset when the text uses them."""


@functools.cache
def _font_bytes(name: str) -> bytes:
    return resources.files("callbench.report.html").joinpath("fonts", name).read_bytes()


def subset_font(font: ScriptFont, codepoints: set[int]) -> bytes:
    """``font`` subset to ``codepoints`` (those it has), every layout feature kept, as WOFF bytes
    (the same bytes for the same inputs).
    Raises ``ImportError`` when fontTools is missing (a dependency of callbench)."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.layout_features = ["*"]  # Indic shaping needs the script's whole GSUB/GPOS
    options.name_IDs = ["*"]  # keep the family name and the licence notice (IDs 13, 14)
    options.name_languages = ["*"]
    options.notdef_outline = True
    options.flavor = "woff"
    # recalcTimestamp=False: keep the font's own ``head.modified`` so equal inputs give equal bytes
    # (fontTools otherwise stamps the time of saving)
    with TTFont(io.BytesIO(_font_bytes(font.file)), recalcTimestamp=False) as tt:
        keep = codepoints & set(tt.getBestCmap())
        sub = subset.Subsetter(options)
        sub.populate(unicodes=sorted(keep))
        sub.subset(tt)
        out = io.BytesIO()
        tt.flavor = "woff"
        tt.save(out)
    return out.getvalue()


def used_codepoints(text: str) -> dict[ScriptFont, set[int]]:
    """The code points of ``text`` by script font (scripts not in ``text`` are absent); joiners
    used anywhere go to every script used."""
    used = {ord(ch) for ch in set(text)}
    out: dict[ScriptFont, set[int]] = {}
    for font in SCRIPT_FONTS:
        mine = {cp for cp in used if font.covers(cp)}
        if mine:
            out[font] = mine | (used & JOINERS)
    return out


def subset_fonts(jobs: list[tuple[ScriptFont, set[int]]]) -> list[bytes]:
    """:func:`subset_font` of each ``(font, codepoints)`` job, in order (a report worker's unit)."""
    return [subset_font(font, cps) for font, cps in jobs]


def font_face_css(text: str, *, parallel: bool = False) -> str:
    """``@font-face`` rules embedding, for each script in ``text``, its font subset to exactly the
    characters used (module docstring); empty when ``text`` has no such script. With ``parallel``
    the fonts are subset in the report's worker processes (:mod:`callbench.report.model.workers`; about
    0.6 s of CPU per font), the same bytes either way."""
    from callbench.report.model.workers import map_ordered

    jobs = list(used_codepoints(text).items())
    subsets = map_ordered(subset_fonts, jobs, chunk=1, min_items=2 if parallel else len(jobs) + 1)
    rules = []
    for (font, _), woff in zip(jobs, subsets, strict=True):
        data = base64.b64encode(woff).decode("ascii")
        rules.append(
            f'@font-face {{ font-family: "{font.family}"; font-style: normal; font-weight: 400 700; '
            f'font-display: block; src: url(data:font/woff;base64,{data}) format("woff"); }}'
        )
    return "\n".join(rules)
