"""The audit's folded forms (callbench.audit.normal) through cached translate tables:
exactly the per-character definitions they replace."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.audit.normal import ascii_digits, fold


def _ascii_digits(text: str) -> str:
    out = []
    for ch in text:
        if "0" <= ch <= "9" or ch.isascii():
            out.append(ch)
            continue
        d = unicodedata.digit(ch, None)
        out.append(str(d) if d is not None else ch)
    return "".join(out)


def _fold(text: str) -> str:
    t = _ascii_digits(unicodedata.normalize("NFKC", text).casefold())
    return "".join(ch for ch in t if ch.isalnum() or unicodedata.category(ch).startswith("M"))


_SAMPLE = "aZ09 -_./,\u00b2\u2460\u0967\u0be9\u0ae7\u0915\u093f\u0301\u00df\ufb01\u212b\u00a0\u3000\U0001d7d8"
"""ASCII, superscript two and circled one (digits, not decimals), Devanagari, Tamil and Gujarati
digits, a Devanagari letter and vowel sign, a combining accent, sharp s and the fi ligature (case
folding and NFKC), the angstrom sign, spaces, and a mathematical double-struck digit."""


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.one_of(st.sampled_from(_SAMPLE), st.characters()), max_size=40))
def test_folded_forms_are_the_per_character_ones(text: str) -> None:
    assert ascii_digits(text) == _ascii_digits(text)
    assert fold(text) == _fold(text)


def test_examples() -> None:
    assert fold("SB-3309 418826") == fold("sb3309418826") == "sb3309418826"
    assert ascii_digits("\u0969\u0969\u0966\u096f and \u00b2") == "3309 and 2"
