"""Script-neutral text helpers for the channel: NFC, word boundaries that work for Indic scripts
(where Python's ``\\b`` splits words at vowel signs), and case-insensitive span search.

A *word character* is any letter (L*), mark (M*, e.g. Devanagari vowel signs and viramas), digit
(N*), the underscore, or a zero-width joiner/non-joiner; every other character separates words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

_JOINERS = {"\u200c", "\u200d"}


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


def _part(word: str) -> str:
    out = []
    for i, c in enumerate(word):
        out.append(re.escape(c))
        nxt = word[i + 1] if i + 1 < len(word) else ""
        if nxt and (_is_digit(c) or _is_digit(nxt)) and c.isalnum() and nxt.isalnum():
            out.append(r"[\s\-.]?")  # grouped as spoken: "NB4471" also matches "NB 44 71"
    return "".join(out)


def _pattern(span: str) -> re.Pattern[str]:
    parts = [_part(p) for p in nfc(span).split()]
    return re.compile(r"\s+".join(parts), re.IGNORECASE)


def find_span(text: str, span: str, start: int = 0, whole_words: bool = True) -> tuple[int, int] | None:
    """Find ``span`` in ``text`` (both NFC) case-insensitively.

    Runs of whitespace in ``span`` match any run of whitespace; a digit next to a digit or letter
    also matches with one space, hyphen or dot between them (an identifier grouped as spoken:
    "NB2773" finds "NB 27 73"). With ``whole_words`` a match bounded by word characters on either
    side is preferred; when there is none, the first plain substring match is returned.
    Returns (start, end) or None.
    """
    if not span.strip():
        return None
    pat = _pattern(span)
    first: tuple[int, int] | None = None
    pos = start
    while True:
        m = pat.search(text, pos)
        if m is None:
            break
        s, e = m.span()
        if first is None:
            first = (s, e)
        if not whole_words:
            return first
        left_ok = s == 0 or not is_word_char(text[s - 1]) or not is_word_char(text[s])
        right_ok = e == len(text) or not is_word_char(text[e]) or not is_word_char(text[e - 1])
        if left_ok and right_ok:
            return s, e
        pos = s + 1
    return first


def tidy(text: str) -> str:
    """Collapse runs of spaces left by an edit and remove space before punctuation; strip ends."""
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r" +([,.!?;:।])", r"\1", text)
    return text.strip()
