"""Normalised forms of values and text, for finding a value wherever it is written.

A hidden value can reach the caller in another form than the one stored: another case, another
Unicode composition, digits of another script (Gujarati ૧૨૩, Devanagari ४५६), or an identifier
written with other separators (``PK-1001``, ``pk 1001``, ``P K 1 0 0 1``, ``PK1001``). The
functions here give one normal form of text (:func:`norm_text`) and a pattern that finds a value
in normalised text in any of those forms (:func:`find_value`). Shared by the validator's caller
isolation audit (:mod:`callbench.bundle.validate.isolation`) and usable by any leak audit.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from functools import lru_cache

_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
SEPARATORS = " \t\n\r\u00a0\u2009\u202f\u200b-\u2010\u2011\u2012\u2013\u2014_.,/:()#"
"""Characters that people and recognisers put between the parts of an identifier or a number."""
_SEP_CLASS = "[" + re.escape(SEPARATORS) + "]*"
MIN_VALUE_CHARS = 4
"""A value with fewer letters and digits than this is too common to judge (``PK``, ``45``)."""


NFC_PIECE = 1024
"""Characters :func:`nfc` checks at a time (at least; a piece ends before an ASCII character)."""
_ASCII_CHAR = re.compile(r"[\x00-\x7f]")


def _nfc_pieces(s: str, piece: int) -> list[tuple[str, bool]]:
    """``s`` cut before ASCII characters into pieces of at least ``piece`` characters, each with
    whether it is NFC. An ASCII character has canonical combining class 0 and never combines with
    what precedes it (NFC_Quick_Check = Yes), so it is a normalisation boundary (Unicode UAX #15,
    "Stable Code Points"): text is NFC when every piece is, and its NFC is the pieces' NFC joined."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(s)
    while i < n:
        j = i + piece
        if j < n:
            m = _ASCII_CHAR.search(s, j)
            j = m.start() if m else n
        else:
            j = n
        chunk = s[i:j]
        out.append((chunk, unicodedata.is_normalized("NFC", chunk)))
        i = j
    return out


def is_nfc(s: str, piece: int = NFC_PIECE) -> bool:
    """``unicodedata.is_normalized("NFC", s)``, piece by piece: CPython normalises the whole text to
    answer once any character may combine with the one before it (NFC_Quick_Check = Maybe, common
    in Indic scripts), so a long text (a bundle's canonical JSON, a rendered operating document) is
    checked about three times faster in pieces, only those holding such a character normalised."""
    return s.isascii() or all(ok for _, ok in _nfc_pieces(s, piece))


def nfc(s: str, piece: int = NFC_PIECE) -> str:
    """``unicodedata.normalize("NFC", s)``, piece by piece (see :func:`is_nfc`); ``s`` itself when
    it is NFC."""
    if s.isascii():
        return s
    pieces = _nfc_pieces(s, piece)
    if all(ok for _, ok in pieces):
        return s
    return "".join(c if ok else unicodedata.normalize("NFC", c) for c, ok in pieces)


_nfc_chunk = lru_cache(maxsize=1024)(nfc)
"""NFC of a chunk of text, cached: a template's literal chunks are the same at every render."""


def nfc_joined(chunks: list[str]) -> str:
    """``nfc("".join(chunks))``, chunk by chunk, each chunk's NFC cached: a chunk that starts with
    an ASCII character starts at a normalisation boundary (see :func:`_nfc_pieces`), so the text's
    NFC is the chunks' NFC joined; a chunk starting with another character is taken together with
    the chunk before it. For a rendered template whose literal chunks are the same at every render
    (the operating document rendered for each scenario), only the variable parts cost anything."""
    groups: list[str] = []
    for chunk in chunks:
        if not chunk:
            continue
        if groups and not chunk[0].isascii():
            groups[-1] += chunk
        else:
            groups.append(chunk)
    return "".join([_nfc_chunk(g) for g in groups])


def norm_text(s: str) -> str:
    """NFC, casefold, every Unicode decimal digit (e.g. Gujarati ૧૨૩) as ASCII."""
    if s.isascii():  # already NFC, and no digit but ASCII ones
        return s.casefold()
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
def _value_form(value: str, min_chars: int) -> str | tuple[str, ...] | None:
    """How :class:`TextSet` looks for ``value``: its compact form (a string) for a value holding a
    digit (its characters with any separators between them: :func:`value_pattern`'s rule), else its
    words (:func:`value_pattern`'s pattern is the words with white space between them); None when
    :func:`value_pattern` is None. Neither compiles a pattern: compiling one per value cost a third
    of the isolation audit."""
    norm = norm_text(value).strip()
    core = compact(norm)
    if sum(c.isalnum() for c in core) < min_chars:
        return None
    if any(c.isdigit() for c in core):
        return core
    return tuple(norm.split())


_KEPT_RUN = re.compile("[^" + re.escape(SEPARATORS) + "]+")
_SENTINEL = "\x00"
"""Put between texts searched together: not a separator, never in a value's form (a value holding
it is searched text by text), and not glued (:func:`_glued`), as a text's start and end are not."""


def _words_end(hay: str, j: int, words: tuple[str, ...]) -> int | None:
    """Where ``\\s+w1\\s+w2...`` matching at ``hay[j:]`` ends, or None. Exact for the regex: a word
    never starts with white space, so ``\\s+`` (str.isspace characters, as re's ``\\s``) takes
    all of it and never gives any back."""
    n = len(hay)
    for w in words:
        k = j
        while k < n and hay[k].isspace():
            k += 1
        if k == j or not hay.startswith(w, k):
            return None
        j = k + len(w)
    return j


class TextSet:
    """Texts searched together for many values: :meth:`holding` gives the indices of the texts
    holding a value in one of :func:`value_pattern`'s forms, from one search of all the texts
    (each normalised by :func:`norm_text`) joined by :data:`_SENTINEL` (a scenario's isolation
    audit searches its brief's 10-30 texts for each of its 10-50 secrets).

    The same answer as ``value_pattern(value, min_chars).finditer`` over each normalised text with
    :func:`find_value`'s glue rule: no form of a value spans the sentinel, leftmost non-overlapping
    matches within each text are the same, and the sentinel next to a match is not glued, as a
    text's start or end is not. A value holding digits is found as its compact form in the texts'
    compact form (separators removed), which is exactly what its pattern matches; a value of words
    as its first word followed by the others with white space between (:func:`_words_end`)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = list(texts)
        hays = [norm_text(t) for t in self.texts]
        self.starts: list[int] = []
        offset = 0
        for hay in hays:
            self.starts.append(offset)
            offset += len(hay) + 1
        self.hay = _SENTINEL.join(hays)
        # the compact form: runs of kept (non-separator) characters; for each run its start in the
        # compact form and in ``hay`` (the sentinel is kept: no compact match spans two texts)
        self._run_packed: list[int] = []
        self._run_hay: list[int] = []
        pieces: list[str] = []
        size = 0
        for m in _KEPT_RUN.finditer(self.hay):
            self._run_packed.append(size)
            self._run_hay.append(m.start())
            pieces.append(m.group())
            size += m.end() - m.start()
        self.packed = "".join(pieces)

    def _at(self, i: int) -> int:
        """Position in ``hay`` of the compact form's character ``i``."""
        r = bisect.bisect_right(self._run_packed, i) - 1
        return self._run_hay[r] + i - self._run_packed[r]

    def _spans(self, what: str | tuple[str, ...]) -> list[tuple[int, int]]:
        """(start, end) in ``hay`` of the leftmost non-overlapping matches of a value's form."""
        hay, out = self.hay, []
        if isinstance(what, str):
            i = self.packed.find(what)
            while i >= 0:
                out.append((self._at(i), self._at(i + len(what) - 1) + 1))
                i = self.packed.find(what, i + len(what))
            return out
        if not what:  # no words (min_chars below 1): the empty pattern matches everywhere
            return [(p, p) for p in range(len(hay) + 1)]
        first, rest = what[0], what[1:]
        i = hay.find(first)
        while i >= 0:
            end = _words_end(hay, i + len(first), rest)
            if end is None:
                i = hay.find(first, i + 1)
            else:
                out.append((i, end))
                i = hay.find(first, end)
        return out

    def holding(self, value: str, min_chars: int = MIN_VALUE_CHARS) -> list[int]:
        """Indices (ascending) of the texts where :func:`find_value` finds ``value``."""
        what = _value_form(value, min_chars)
        if what is None or not self.texts:
            return []
        if _SENTINEL in value and len(self.texts) > 1:
            return [i for i, t in enumerate(self.texts) if TextSet([t]).holding(value, min_chars)]
        hay, found = self.hay, set()
        for start, end in self._spans(what):
            before = hay[start - 1] if start else " "
            after = hay[end] if end < len(hay) else " "
            if not _glued(before) and not _glued(after):
                found.add(bisect.bisect_right(self.starts, start) - 1)
        return sorted(found)


def find_value(value: str, text: str, min_chars: int = MIN_VALUE_CHARS) -> bool:
    """True when ``value`` occurs in ``text`` (normalised here) in any of the forms of
    :func:`value_pattern`, with no letter, digit or combining mark glued to either side (and, for
    a value holding digits, no digit glued: ``1001`` is not found in ``410012``). To search many
    texts for many values, build one :class:`TextSet`."""
    return bool(TextSet([text]).holding(value, min_chars))
