"""Script-neutral text helpers for the channel: NFC, word boundaries that work for Indic scripts
(where Python's ``\\b`` splits words at vowel signs), and span search that is case-insensitive,
digit-script-insensitive and insensitive to how a number is grouped.

A *word character* is any letter (L*), mark (M*, e.g. Devanagari vowel signs and viramas), digit
(N*), the underscore, or a zero-width joiner/non-joiner; every other character separates words.

Digits: every Unicode decimal digit (category Nd, ``unicodedata.decimal``) matches the ASCII digit
of the same value, so an authored span "2514" finds a caller's "२५१४" (Devanagari), "૨૫૧૪"
(Gujarati), "২৫১৪" (Bengali) or "௨௫௧௪" (Tamil), and a span written in native digits finds ASCII
ones. A *digit run* is digits joined by gaps (see ``_GAP``); gaps are ignored on both sides, so
"2514", "25 14" and "25-14" match one another. Positions always refer to the original text: the
caller's own digits and separators are what a drop removes, a double repeats and a split cuts after.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict

_JOINERS = {"\u200c", "\u200d"}

# Between two digits of one digit run: nothing, one whitespace character other than a line break
# (space, NBSP, thin or narrow no-break space...), one hyphen or dash with at most one such
# whitespace character on each side ("25-14", "25 - 14"), or one tight dot or comma ("25.14",
# "1,25,000"). A dot or comma next to a space ends the run ("25, 14" is a list, "25. 14" two
# sentences); words never join a run ("25 and 14" is two runs); neither do line breaks or colons.
_WS = r"[^\S\r\n]"
_DASHES = "-\u2010\u2011\u2012\u2013"
_GAP = rf"(?:{_WS}?[{re.escape(_DASHES)}]{_WS}?|{_WS}|[.,])"
_RUN = re.compile(rf"[0-9](?:{_GAP}?[0-9])*")
# A letter next to a digit may be split from it by one space, hyphen or dot: "NB4471" finds
# "NB 44 71" (the matcher's behaviour before digit runs; unchanged).
_LETTER_DIGIT_GAP = r"[\s\-.]?"


json_text = json.JSONEncoder(ensure_ascii=False).encode
"""``json.dumps(value, ensure_ascii=False)`` with one shared encoder (``dumps`` with any argument
builds a new encoder per call): the JSON text of tool results and caller turns in messages."""


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def is_word_char(c: str) -> bool:
    """True for letters, marks, digits, underscore and zero-width (non-)joiners."""
    return c == "_" or c in _JOINERS or unicodedata.category(c)[0] in "LMN"


def words(text: str) -> Iterator[tuple[int, int, str]]:
    """Yield (start, end, word) for each maximal run of word characters in ``text``."""
    i, n = 0, len(text)
    while i < n:
        if is_word_char(text[i]):
            j = i + 1
            while j < n and is_word_char(text[j]):
                j += 1
            yield i, j, text[i:j]
            i = j
        else:
            i += 1


def letter_count(word: str) -> int:
    """Letters (Unicode category L*) in ``word``; marks such as vowel signs are not counted."""
    return sum(1 for c in word if unicodedata.category(c).startswith("L"))


def _is_digit(c: str) -> bool:
    return unicodedata.category(c) == "Nd"


def fold_digits(text: str) -> str:
    """``text`` with every decimal digit (Unicode Nd, any script) replaced by the ASCII digit of
    the same value. One code point maps to one code point, so indexes into the result are indexes
    into ``text``."""
    if text.isascii():
        return text
    return _ND.sub(_ascii_digit, text)


_ND = re.compile(r"\d")
"""A decimal digit: for str patterns ``\\d`` is exactly Unicode category Nd (``re`` docs)."""


def _ascii_digit(m: re.Match[str]) -> str:
    return str(unicodedata.decimal(m.group()))


def digit_script(c: str) -> str:
    """Name of the script of decimal digit ``c`` from its Unicode name: "Devanagari" for "२",
    "Tamil" for "௨", "ASCII" for "2", "Fullwidth" for "２"."""
    prefix = unicodedata.name(c, "").partition("DIGIT")[0].strip()
    return prefix.title() if prefix else "ASCII"


def digits_like(replacement: str, found: str) -> str:
    """``replacement`` with its ASCII digits written in the script of the digits of ``found``, when
    all digits of ``found`` are of one non-ASCII script (Unicode keeps each script's ten decimal
    digits contiguous, zero first); otherwise ``replacement`` unchanged."""
    digits = [c for c in found if _is_digit(c)]
    zeros = {ord(c) - unicodedata.decimal(c) for c in digits}
    if len(zeros) != 1 or digits[0].isascii():
        return replacement
    zero = zeros.pop()
    return "".join(chr(zero + int(c)) if "0" <= c <= "9" else c for c in replacement)


class SpanMatch(BaseModel):
    """Where a span was found: ``start``/``end`` index the original text (end exclusive);
    ``scripts`` names the digit scripts of the text that were read as different-script digits of
    the span (e.g. ("Devanagari",) when "2514" found "२५१४"); ``regrouped`` is True when the
    match contains digits grouped differently from the span ("2514" found "25 14")."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    scripts: tuple[str, ...] = ()
    span_scripts: tuple[str, ...] = ()
    regrouped: bool = False

    @property
    def normalised(self) -> bool:
        """True when the match needed digit normalisation (script or grouping)."""
        return bool(self.scripts) or self.regrouped

    def note(self) -> str:
        """A short phrase for a channel event's detail; empty when no digit normalisation was needed."""
        parts = []
        if self.scripts:
            theirs, ours = "/".join(self.scripts), "/".join(self.span_scripts)
            parts.append(f"{theirs} digits in the turn read as the span's {ours} digits")
        if self.regrouped:
            parts.append("digit grouping differs from the span")
        return "digit normalisation: " + "; ".join(parts) if parts else ""


def _pattern(span: str) -> re.Pattern[str]:
    """Regex for a stripped, NFC, digit-folded span: whitespace runs match any whitespace run,
    digit runs match the same digits with any gaps, a letter and a digit side by side may be split
    by ``_LETTER_DIGIT_GAP``; everything else matches itself, ignoring case."""
    out: list[str] = []
    i, n = 0, len(span)
    while i < n:
        c = span[i]
        if c.isspace():
            while i < n and span[i].isspace():
                i += 1
            out.append(r"\s+")
            continue
        if "0" <= c <= "9":
            run = _RUN.match(span, i)
            assert run is not None  # a digit always starts a run
            out.append(f"(?:{_GAP})?".join(d for d in run.group() if "0" <= d <= "9"))
            i = run.end()
            if i < n and span[i].isalnum():
                out.append(_LETTER_DIGIT_GAP)
            continue
        out.append(re.escape(c))
        i += 1
        if i < n and c.isalnum() and "0" <= span[i] <= "9":
            out.append(_LETTER_DIGIT_GAP)
    return re.compile("".join(out), re.IGNORECASE)


def _shape(s: str) -> str:
    return re.sub(r"\s+", " ", fold_digits(s)).casefold()


def _describe(text: str, span: str, s: int, e: int) -> SpanMatch:
    found = text[s:e]
    found_digits = [c for c in found if _is_digit(c)]
    span_digits = [c for c in span if _is_digit(c)]
    differing = [(f, p) for f, p in zip(found_digits, span_digits, strict=False) if f != p]
    return SpanMatch(
        start=s,
        end=e,
        scripts=tuple(sorted({digit_script(f) for f, _ in differing})),
        span_scripts=tuple(sorted({digit_script(p) for _, p in differing})),
        regrouped=bool(found_digits) and _shape(found) != _shape(span),
    )


def find_span_match(text: str, span: str, start: int = 0, whole_words: bool = True) -> SpanMatch | None:
    """Find ``span`` in ``text`` (``text`` NFC; ``span`` is normalised here) case-insensitively.

    Runs of whitespace in ``span`` match any run of whitespace; decimal digits of any script match
    the same digit of any script; the gaps inside a digit run (see ``_GAP``) are ignored on both
    sides ("2514" finds "25 14", "25-14" and "२५१४"); a letter next to a digit also matches with
    one space, hyphen or dot between them (an identifier grouped as spoken: "NB2773" finds
    "NB 27 73"). With ``whole_words`` a match bounded by word characters on either side, and not
    starting or ending inside a longer digit run of the text ("2514" inside "98 25 14 77"), is
    preferred; when there is none, the first plain match is returned. Searching starts at index
    ``start``. Returns a :class:`SpanMatch` on the original text, or None.
    """
    norm = nfc(span).strip()
    if not norm:
        return None
    pat = _pattern(fold_digits(norm))
    folded = fold_digits(text)
    runs = [r.span() for r in _RUN.finditer(folded)] if whole_words else []

    def inside_run(p: int) -> bool:
        return any(rs < p < re_ for rs, re_ in runs)

    first: tuple[int, int] | None = None
    pos = start
    while True:
        m = pat.search(folded, pos)
        if m is None:
            break
        s, e = m.span()
        if first is None:
            first = (s, e)
        if not whole_words:
            break
        left_ok = s == 0 or not is_word_char(text[s - 1]) or not is_word_char(text[s])
        right_ok = e == len(text) or not is_word_char(text[e]) or not is_word_char(text[e - 1])
        if left_ok and right_ok and not inside_run(s) and not inside_run(e):
            return _describe(text, norm, s, e)
        pos = s + 1
    return None if first is None else _describe(text, norm, *first)


def find_span(text: str, span: str, start: int = 0, whole_words: bool = True) -> tuple[int, int] | None:
    """(start, end) of :func:`find_span_match`, or None."""
    hit = find_span_match(text, span, start, whole_words)
    return None if hit is None else (hit.start, hit.end)


def tidy(text: str) -> str:
    """Collapse runs of spaces left by an edit and remove space before punctuation; strip ends."""
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r" +([,.!?;:।])", r"\1", text)
    return text.strip()
