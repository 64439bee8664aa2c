"""Forms in which a reader takes a value whole although the text does not write it as one string:
the leak audit's views of a text, beyond :mod:`callbench.audit.normal`'s folding.

- :func:`joined`: the text as Markdown lays it out (CommonMark, ``markdown-it-py``). The soft line
  breaks of a paragraph are joined: removed inside a number (``38,⏎650.00`` reads ``38,650.00``),
  a space elsewhere. A paragraph break or a new list item is no soft break. HTML comments,
  code and HTML blocks stay as written: the candidate model receives the prompt as text, comments
  included.
- :func:`spelled_digits`: digits written as words, read as digits (``two six zero three``,
  ``double one``, Bengali ``এক এক``), so ``DSP two six zero three ...`` folds like ``DSP2603...``.
  The digit names come from ``num2words`` in :data:`DIGIT_LANGUAGES`.
- :func:`written_amounts`: the amounts a text writes in figures (:func:`~callbench.audit.normal.amounts`)
  in any of the views above, plus an amount with a scale word (``38.65k``, ``38.65 thousand``,
  ``1.5 lakh``, ``2 crore``, ``1.2 million``).
- :func:`amount_in_words`: an amount written in words (``thirty-eight thousand six hundred
  fifty``, Indian ``one lakh fifty thousand``, Bengali ``আটত্রিশ হাজার ছয়শত পঞ্চাশ``): the forms
  ``num2words`` writes in :data:`AMOUNT_LANGUAGES` (``and`` dropped, case and punctuation ignored),
  compared with each whole run of number words in the text, so that ``... fifty-one`` or ``one
  hundred thirty-eight thousand ...`` is another amount.
- :func:`skeleton_fold`: the Unicode confusable skeleton (UTS #39, section 4: NFD, each character
  replaced by its prototype from ``confusables.txt``, NFD) then :func:`~callbench.audit.normal.fold`:
  a Cyrillic ``В`` or a Greek ``Ο`` reads as the Latin letter. The data is the
  ``confusable_homoglyphs`` package's copy of confusables.txt; it keeps the pairs, not their
  direction, so a pair whose prototype it cannot tell is mapped to one member (the same classes of
  characters, so the same matches).

Hindi, Tamil, Gujarati and Marathi number words are not covered: ``num2words`` has no converter
for them.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from decimal import Decimal
from importlib import resources

from markdown_it import MarkdownIt
from num2words import num2words

from callbench.audit.normal import amounts, ascii_digits, fold

DIGIT_LANGUAGES = ("en", "bn", "te", "kn")
"""Languages whose digit names :func:`spelled_digits` reads (every Indian language ``num2words``
converts)."""
AMOUNT_LANGUAGES = ("en", "en_IN", "bn", "te", "kn")
"""Languages (``num2words`` converters) whose word forms of an amount :func:`amount_in_words` finds;
``en_IN`` writes lakhs and crores."""

_MD = MarkdownIt("commonmark")
_IN_NUMBER = re.compile(r"(?:(?<=[0-9])|(?<=[0-9][,.]))[ \t]*\n[ \t]*(?=[0-9]|[,.][0-9])")
_SOFT = re.compile(r"[ \t]*\n[ \t]*")
_WORD = re.compile(r"(?:[^\W\d_]|[\u0900-\u0963\u0966-\u0dff])+")
"""A word: letters, and every character of the Indic blocks but the dandas (their vowel signs are
marks, which ``\\w`` leaves out)."""
_RUN_BREAK = re.compile(r"[.!?;:।॥()\[\]\n]")
_SCALED = re.compile(
    r"(?<![0-9A-Za-z.])([0-9]+(?:\.[0-9]+)?)\s*(k|thousand|lakhs?|lacs?|l|crores?|cr|mn|million)(?![A-Za-z])",
    re.IGNORECASE,
)
_SCALE = {"k": 3, "thousand": 3, "lakh": 5, "lac": 5, "l": 5, "crore": 7, "cr": 7, "mn": 6, "million": 6}


@functools.lru_cache(maxsize=1 << 14)
def joined(text: str) -> str:
    """``text`` with each paragraph's soft line breaks joined (module docstring); blocks are
    separated by a blank line. Raises nothing: Markdown has no syntax errors."""
    out: list[str] = []
    for tok in _MD.parse(text):
        if tok.type == "inline":
            out.append(_SOFT.sub(" ", _IN_NUMBER.sub("", tok.content)))
        elif tok.content:  # a code or HTML block (an HTML comment): read as written
            out.append(tok.content)
    return "\n\n".join(out)


@functools.cache
def _digit_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for lang in DIGIT_LANGUAGES:
        for d in range(10):
            names[unicodedata.normalize("NFKC", num2words(d, lang=lang)).strip().casefold()] = str(d)
    return names


@functools.cache
def _digit_word() -> re.Pattern[str]:
    alts = "|".join(re.escape(w) for w in sorted(_digit_names(), key=len, reverse=True))
    edge = r"[^\W\d_]|[\u0900-\u0963\u0966-\u0dff]"
    return re.compile(rf"(?<!{edge})(?:(double|triple)[\s-]+)?({alts})(?!{edge})", re.IGNORECASE)


def _spell(m: re.Match[str]) -> str:
    times = {"double": 2, "triple": 3}.get((m.group(1) or "").casefold(), 1)
    return "\x01" + _digit_names()[m.group(2).casefold()] * times + "\x02"


@functools.lru_cache(maxsize=1 << 14)
def spelled_digits(text: str) -> str:
    """``text`` (NFKC, any script's digits as ASCII) with every digit written as a word replaced by
    the digit, and the spaces, hyphens and commas between two such digits dropped:
    ``two six-zero, double one`` -> ``26011``. Case is ignored."""
    t = _digit_word().sub(_spell, ascii_digits(unicodedata.normalize("NFKC", text)))
    return re.sub(r"\x02[\s,\-]*\x01", "", t).replace("\x01", "").replace("\x02", "")


@functools.lru_cache(maxsize=1 << 14)
def written_amounts(text: str) -> frozenset[Decimal]:
    """Every amount ``text`` writes in figures (module docstring): as written, with soft line breaks
    joined, with spelled digits read, and with a scale word multiplied out."""
    out: set[Decimal] = set()
    for view in {text, joined(text), spelled_digits(joined(text))}:
        out |= amounts(view)
        t = ascii_digits(unicodedata.normalize("NFKC", view))
        for m in _SCALED.finditer(t):
            word = m.group(2).casefold().rstrip("s") if len(m.group(2)) > 2 else m.group(2).casefold()
            if word == "l" and m.group(2) != "L":
                continue  # a lower-case l is a litre, not a lakh
            out.add((Decimal(m.group(1)) * 10 ** _SCALE[word]).normalize())
    return frozenset(out)


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()) if w != "and"]


@functools.cache
def _number_vocabulary() -> frozenset[str]:
    out: set[str] = set()
    for lang in AMOUNT_LANGUAGES:
        # Bengali and the Dravidian converters write each hundred and thousand as one word
        hundreds = [*range(100, 1000, 100), *range(1000, 10000, 1000)]
        for n in [*range(101), *hundreds, 10**5, 10**6, 10**7, 10**9, Decimal("0.5")]:
            out |= set(_words(num2words(n, lang=lang)))
    return frozenset(out)


@functools.lru_cache(maxsize=1 << 14)
def number_phrases(text: str) -> frozenset[str]:
    """Each whole run of number words in ``text`` (soft line breaks joined; not across a sentence
    end, a bracket or a paragraph), its words joined by single spaces, ``and`` dropped."""
    vocab = _number_vocabulary()
    out: set[str] = set()
    for part in _RUN_BREAK.split(joined(text)):
        run: list[str] = []
        for w in [*_words(part), ""]:
            if w in vocab:
                run.append(w)
            elif run:
                out.add(" ".join(run))
                run = []
    return frozenset(out)


@functools.lru_cache(maxsize=1 << 14)
def amount_words(amount: Decimal) -> frozenset[str]:
    """The word forms of ``amount`` in :data:`AMOUNT_LANGUAGES`, as :func:`number_phrases` writes a
    run (a language whose converter refuses the amount is left out)."""
    value: int | Decimal = int(amount) if amount == amount.to_integral_value() else amount
    out: set[str] = set()
    for lang in AMOUNT_LANGUAGES:
        try:
            out.add(" ".join(_words(num2words(value, lang=lang))))
        except (NotImplementedError, OverflowError, ValueError, TypeError):
            continue
    return frozenset(out)


def amount_in_words(amount: Decimal, text: str) -> bool:
    """True when ``text`` writes ``amount`` in words (module docstring)."""
    return not amount_words(amount).isdisjoint(number_phrases(text))


@functools.cache
def _prototypes() -> dict[int, str]:
    raw = resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    # the package wraps right-to-left characters in left-to-right marks
    data = {k.strip("\u200e"): [a["c"].strip("\u200e") for a in v] for k, v in json.loads(raw).items()}
    table: dict[int, str] = {}
    for ch, alts in data.items():
        # confusables.txt maps each source character to one prototype, and no prototype is a source;
        # the package lists both directions, so a character with one partner that has others (or is
        # a sequence) is a source, and a pair alone is one class whichever member is the prototype
        if len(ch) != 1 or len(alts) != 1:
            continue
        target = alts[0]
        source = len(target) != 1 or len(data.get(target, ())) > 1
        if source or target < ch:  # a lone pair: the smaller member stands for both
            table[ord(ch)] = target
    return table


@functools.lru_cache(maxsize=1 << 14)
def skeleton_fold(text: str) -> str:
    """:func:`~callbench.audit.normal.fold` of the UTS #39 skeleton of ``text`` (module docstring),
    after any script's digits are read as ASCII digits."""
    t = unicodedata.normalize("NFD", ascii_digits(unicodedata.normalize("NFKC", text)))
    return fold(unicodedata.normalize("NFD", t.translate(_prototypes())))
