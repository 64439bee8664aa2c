"""Seeded channel noise (paper: "A lighter seeded mode changes one eligible word of the first caller
turn, drawn from words of four letters or more and never from the caller's known values").

The change imitates a recogniser slip: one sound swapped for a confusable one. Confusions:

* Latin and Cyrillic: voiced/unvoiced and nasal/liquid pairs (b/p, d/t, g/k, v/f, z/s, m/n, l/r...)
  and close vowels (e/i, o/u); case is preserved.
* Brahmic scripts of Unicode's parallel Indic blocks (Devanagari, Bengali, Gurmukhi, Gujarati,
  Oriya, Tamil, Telugu, Kannada, Malayalam): aspirated/unaspirated consonants, dental/retroflex
  stops and nasals, the two r and l letters of Tamil and Malayalam, sibilants, and short/long vowel
  signs. A pair is used only when both code points are assigned in that script.
* Any other script: the word loses its last letter (a clipped ending).

Which word and which confusable position are drawn from ``random.Random(channel_seed)``, so the
same seed always makes the same slip.
"""

from __future__ import annotations

import random
import unicodedata

from pydantic import BaseModel

from callbench.sim.text import find_span, letter_count, nfc, words

_LATIN_PAIRS = ["bp", "dt", "gk", "vf", "zs", "mn", "lr", "ei", "ou", "ae"]
_CYRILLIC_PAIRS = ["бп", "дт", "гк", "вф", "зс", "жш", "еи", "оа"]
# Offsets inside a 128-code-point Indic block (ISCII layout, shared by the Unicode Indic blocks).
_INDIC_OFFSET_PAIRS = [
    (0x15, 0x16),
    (0x17, 0x18),
    (0x1A, 0x1B),
    (0x1C, 0x1D),
    (0x1F, 0x20),
    (0x21, 0x22),
    (0x24, 0x25),
    (0x26, 0x27),
    (0x2A, 0x2B),
    (0x2C, 0x2D),  # unaspirated / aspirated
    (0x24, 0x1F),
    (0x26, 0x21),
    (0x28, 0x23),  # dental / retroflex
    (0x28, 0x29),
    (0x30, 0x31),
    (0x32, 0x33),  # Tamil/Malayalam n, r, l pairs
    (0x36, 0x38),
    (0x37, 0x38),  # sibilants
    (0x3F, 0x40),
    (0x41, 0x42),
    (0x07, 0x08),
    (0x09, 0x0A),  # short / long vowels
]
_INDIC_BLOCKS = range(0x0900, 0x0D80, 0x80)


def _assigned(c: str) -> bool:
    return unicodedata.name(c, "") != ""


def _build_confusions() -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}

    def add(a: str, b: str) -> None:
        table.setdefault(a, []).append(b)
        table.setdefault(b, []).append(a)

    for pairs in (_LATIN_PAIRS, _CYRILLIC_PAIRS):
        for p in pairs:
            add(p[0], p[1])
    for base in _INDIC_BLOCKS:
        for x, y in _INDIC_OFFSET_PAIRS:
            a, b = chr(base + x), chr(base + y)
            if _assigned(a) and _assigned(b):
                add(a, b)
    return table


CONFUSIONS = _build_confusions()


class Slip(BaseModel):
    """One seeded change: the word, its replacement and where it sits in the text."""

    start: int
    end: int
    word: str
    replacement: str
    how: str


def _fact_strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _fact_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _fact_strings(v)]
    if value is None or isinstance(value, bool):
        return []
    return [nfc(str(value))]


def protected_ranges(text: str, known_facts: dict[str, object]) -> tuple[list[tuple[int, int]], set[str]]:
    """Character ranges of ``text`` inside a known-fact value, and the casefolded words of all values."""
    ranges: list[tuple[int, int]] = []
    fact_words: set[str] = set()
    for value in _fact_strings(known_facts):
        fact_words.update(w.casefold() for _, _, w in words(value))
        pos = 0
        while (hit := find_span(text, value, pos, whole_words=False)) is not None:
            ranges.append(hit)
            pos = hit[0] + 1
    return ranges, fact_words


def eligible_words(text: str, known_facts: dict[str, object]) -> list[tuple[int, int, str]]:
    """Words of ``text`` with at least four letters, no digit, not overlapping a known-fact value
    and not equal to any word of a known-fact value."""
    ranges, fact_words = protected_ranges(text, known_facts)
    out = []
    for s, e, w in words(text):
        if letter_count(w) < 4 or any(unicodedata.category(c) == "Nd" for c in w):
            continue
        if w.casefold() in fact_words or any(s < re_ and rs < e for rs, re_ in ranges):
            continue
        out.append((s, e, w))
    return out


def slip_word(word: str, rng: random.Random) -> tuple[str, str]:
    """Return (changed word, description) for one confusable-sound slip drawn from ``rng``."""
    positions = [i for i, c in enumerate(word) if c.lower() in CONFUSIONS]
    if positions:
        i = positions[rng.randrange(len(positions))]
        c = word[i]
        options = CONFUSIONS[c.lower()]
        r = options[rng.randrange(len(options))]
        if c.isupper():
            r = r.upper()
        return nfc(word[:i] + r + word[i + 1 :]), f"sound {c!r} heard as {r!r}"
    letters = [i for i, c in enumerate(word) if unicodedata.category(c).startswith("L")]
    last = letters[-1]
    end = last + 1
    while end < len(word) and unicodedata.category(word[end]).startswith("M"):
        end += 1  # drop the letter with its vowel signs
    return nfc(word[:last] + word[end:]), f"ending {word[last:end]!r} clipped"


def seeded_slip(text: str, known_facts: dict[str, object], seed: int) -> Slip | None:
    """Choose one eligible word of ``text`` with ``seed`` and change it; None when no word is eligible."""
    rng = random.Random(seed)
    cands = eligible_words(text, known_facts)
    if not cands:
        return None
    s, e, w = cands[rng.randrange(len(cands))]
    new, how = slip_word(w, rng)
    if new == w:  # pragma: no cover - every confusion maps to a different character
        return None
    return Slip(start=s, end=e, word=w, replacement=new, how=how)
