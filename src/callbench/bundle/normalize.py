"""Normalised forms of values and text, for finding a value wherever it is written (issue 26 item 3).

A hidden value can reach the caller in another form than the one stored: another case, another
Unicode composition, digits of another script (Gujarati ૧૨૩, Devanagari ४५६), or an identifier
written with other separators (``PK-1001``, ``pk 1001``, ``P K 1 0 0 1``, ``PK1001``). The
functions here give one normal form of text (:func:`norm_text`) and a pattern that finds a value
in normalised text in any of those forms (:func:`find_value`). Shared by the validator's caller
isolation audit (:mod:`callbench.bundle.isolation`) and usable by any leak audit.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
SEPARATORS = " \t\n\r\u00a0\u2009\u202f\u200b-\u2010\u2011\u2012\u2013\u2014_.,/:()#"
"""Characters that people and recognisers put between the parts of an identifier or a number."""
_SEP_CLASS = "[" + re.escape(SEPARATORS) + "]*"
MIN_VALUE_CHARS = 4
"""A value with fewer letters and digits than this is too common to judge (``PK``, ``45``)."""


def norm_text(s: str) -> str:
    """NFC, casefold, every Unicode decimal digit (e.g. Gujarati ૧૨૩) as ASCII."""
    s = unicodedata.normalize("NFC", s).casefold()
    return _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group(), 0)), s)


def compact(s: str) -> str:
    """:func:`norm_text` with every separator (:data:`SEPARATORS`) removed: ``PK-10 01`` ->
    ``pk1001``."""
    return "".join(c for c in norm_text(s) if c not in SEPARATORS)


def _glued(c: str) -> bool:
    return c.isalnum() or unicodedata.category(c).startswith("M")


@lru_cache(maxsize=4096)
def value_pattern(value: str, min_chars: int = MIN_VALUE_CHARS) -> re.Pattern[str] | None:
    """A pattern finding ``value`` in :func:`norm_text` text, or None when the value has fewer than
    ``min_chars`` letters and digits. A value holding a digit (an identifier, a number)
    matches with any separators, or none, between any two of its characters; a value without digits
    matches as written up to case, composition and the kind and amount of white space (``Asha Rao``
    finds ``ASHA\u00a0 RAO``; ``cash_on_delivery`` is a code, not the phrase "cash on delivery")."""
    norm = norm_text(value).strip()
    core = compact(norm)
    if sum(c.isalnum() for c in core) < min_chars:
        return None
    if any(c.isdigit() for c in core):
        body = _SEP_CLASS.join(re.escape(c) for c in core)
    else:
        body = r"\s+".join(re.escape(w) for w in norm.split())
    return re.compile(body)


@lru_cache(maxsize=4096)
def _value_form(value: str, min_chars: int) -> str | re.Pattern[str] | None:
    """How :func:`find_value` looks for ``value``: its compact form (a string) for a value holding
    a digit (its characters with any separators between them: :func:`value_pattern`'s rule), else
    :func:`value_pattern`'s pattern; None when :func:`value_pattern` is None."""
    norm = norm_text(value).strip()
    core = compact(norm)
    if sum(c.isalnum() for c in core) < min_chars:
        return None
    if any(c.isdigit() for c in core):
        return core
    return re.compile(r"\s+".join(re.escape(w) for w in norm.split()))


_SEPARATOR_SET = frozenset(SEPARATORS)


@lru_cache(maxsize=1024)
def _haystack(text: str) -> tuple[str, str, tuple[int, ...]]:
    """``text`` normalised (:func:`norm_text`), the same without separators, and for each character
    of the latter its index in the former. A validator searches the same brief texts for every
    secret of a scenario: each is normalised once."""
    hay = norm_text(text)
    index = tuple(i for i, c in enumerate(hay) if c not in _SEPARATOR_SET)
    return hay, "".join([hay[i] for i in index]), index


def _spans(value: str, text: str, min_chars: int) -> tuple[str, list[tuple[int, int]]]:
    """The normalised ``text`` and the spans in it that :func:`value_pattern`'s ``finditer`` would
    give (leftmost, non-overlapping). A value holding digits is found as its compact form in the
    text's compact form, which is what its pattern (its characters with any separators between
    them) matches, without compiling one pattern per value: compiling the separator class once per
    character cost most of ``callbench validate``'s time (issue 27 item 5)."""
    what = _value_form(value, min_chars)
    hay, packed, index = _haystack(text)
    if what is None:
        return hay, []
    if isinstance(what, re.Pattern):
        return hay, [(m.start(), m.end()) for m in what.finditer(hay)]
    out: list[tuple[int, int]] = []
    i = packed.find(what)
    while i >= 0:
        out.append((index[i], index[i + len(what) - 1] + 1))
        i = packed.find(what, i + len(what))
    return hay, out


def find_value(value: str, text: str, min_chars: int = MIN_VALUE_CHARS) -> bool:
    """True when ``value`` occurs in ``text`` (normalised here) in any of the forms of
    :func:`value_pattern`, with no letter, digit or combining mark glued to either side (and, for
    a value holding digits, no digit glued: ``1001`` is not found in ``410012``)."""
    if _value_form(value, min_chars) is None:
        return False
    hay, spans = _spans(value, text, min_chars)
    for start, end in spans:
        before = hay[start - 1] if start else " "
        after = hay[end] if end < len(hay) else " "
        if not _glued(before) and not _glued(after):
            return True
    return False
