"""What the recogniser did to a caller turn: word alignment, word error rate and entity survival.

Words are compared after :func:`words`: NFKC, lower case, punctuation removed, number words
zero..nine (and "oh") read as digits, and every digit its own word, so "4821", "4-8-2-1" and
"four eight two one" are the same four words. WER = (substitutions + deletions + insertions) /
intended words (Levenshtein alignment, ties broken toward substitution, then deletion).

Entities are the things a caller must get across intact: ``digits`` (a run of three digits or
more, however grouped), ``amount`` (a currency sign or word with a number), and ``name`` (a
string fact from the caller's brief that the turn says, or a run of capitalised words, each a
capital then a lower-case letter so acronyms such as "ID" are not names, not at the start of a
sentence). An entity *survives* when its normalised form occurs contiguously in the observed
words (digits and amounts: in the observed digit stream).
"""

from __future__ import annotations

import re
import unicodedata

from callbench.trace import Entity, WordOp

_NUM = {
    "zero": "0",
    "oh": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
}
_AMOUNT = re.compile(
    r"[$£€₹]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:dollars?|euros?|pounds?|rupees?|usd|eur|gbp|inr)\b",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"(?<![\w.,])\d(?:[ \-]?\d){2,}(?![\w])")
_NAME = re.compile(r"(?<=[\w,;] )(?:[A-Z][a-z][\w'\-]*)(?: [A-Z][a-z][\w'\-]*)*")
_NOT_NAMES = {"i", "i'm", "i've", "i'll", "i'd", "ok", "okay"}


def words(text: str) -> list[str]:
    """Normalised words of ``text`` (module docstring)."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = re.sub(r"(?<=\d)[,.](?=\d)", "", t)  # 1,250.00 -> 125000 (digits only)
    t = re.sub(r"[^\w\s']", " ", t)
    out: list[str] = []
    for w in t.split():
        w = w.strip("'")
        if not w:
            continue
        if w in _NUM:
            out.append(_NUM[w])
        elif any(c.isdigit() for c in w):
            out.extend(re.findall(r"\d|[^\d]+", w))
        else:
            out.append(w)
    return out


def align(ref: list[str], hyp: list[str]) -> list[WordOp]:
    """Minimum-edit alignment of ``ref`` (intended words) to ``hyp`` (observed words)."""
    n, m = len(ref), len(hyp)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]), d[i - 1][j] + 1, d[i][j - 1] + 1)
    ops: list[WordOp] = []
    i, j = n, m
    while i or j:
        if i and j and d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            same = ref[i - 1] == hyp[j - 1]
            ops.append(WordOp(op="ok" if same else "sub", intended=ref[i - 1], observed=hyp[j - 1]))
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            ops.append(WordOp(op="del", intended=ref[i - 1]))
            i -= 1
        else:
            ops.append(WordOp(op="ins", observed=hyp[j - 1]))
            j -= 1
    return ops[::-1]


def wer(ops: list[WordOp]) -> float | None:
    """Word error rate of an alignment; None when nothing was intended."""
    ref = sum(1 for o in ops if o.op != "ins")
    errors = sum(1 for o in ops if o.op != "ok")
    return None if ref == 0 else errors / ref


def _contains(seq: list[str], sub: list[str]) -> bool:
    k = len(sub)
    return k > 0 and any(seq[i : i + k] == sub for i in range(len(seq) - k + 1))


def _digits(text: str) -> str:
    return "".join(w for w in words(text) if w.isdigit())


def entities(intended: str, observed: str, facts: dict[str, object] | None = None) -> list[Entity]:
    """The entities of ``intended`` and whether each survives in ``observed`` (module docstring)."""
    seen_digits = _digits(observed)
    obs_words = words(observed)
    out: list[Entity] = []
    taken: list[tuple[int, int]] = []
    for m in _AMOUNT.finditer(intended):
        digits = _digits(m.group())
        survived = digits in seen_digits or (digits.rstrip("0") in seen_digits and digits.endswith("00"))
        out.append(Entity(kind="amount", text=m.group().strip(), survived=bool(digits) and survived))
        taken.append(m.span())
    for m in _DIGITS.finditer(intended):
        if any(s <= m.start() < e for s, e in taken):
            continue
        out.append(Entity(kind="digits", text=m.group(), survived=_digits(m.group()) in seen_digits))
    names: list[str] = []
    low = intended.lower()
    for value in (facts or {}).values():
        if isinstance(value, str) and any(c.isalpha() for c in value) and value.lower() in low:
            names.append(value)
    for m in _NAME.finditer(intended):
        if m.group().lower() not in _NOT_NAMES and not any(m.group().lower() in n.lower() for n in names):
            names.append(m.group())
    for name in dict.fromkeys(names):
        w = words(name)
        if w and not all(x.isdigit() for x in w):
            out.append(Entity(kind="name", text=name, survived=_contains(obs_words, w)))
    return out


def speakable(text: str) -> str:
    """The text as it is spoken: digit runs of four or more (account, phone and card numbers)
    read digit by digit ("48215" -> "4 8 2 1 5"); amounts, years in words and short numbers are
    left to the voice. Control characters other than tab and newline (NUL, BEL, ESC: a model can
    emit them) are not spoken: each becomes a space (piper exits on a line holding NUL)."""

    def spaced(m: re.Match[str]) -> str:
        return " ".join(m.group())

    text = _CONTROL.sub(" ", text)
    return re.sub(r"(?<![\d$£€₹.,])\d{4,}(?![\d.,]\d)", spaced, text)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def pronounceable(spoken: str) -> bool:
    """Whether ``spoken`` has anything a voice says: a letter, number or symbol (Unicode
    categories L, N, S) or one of the punctuation marks read out as a word (``%*#@``). Other
    punctuation, spaces and format characters alone ("...", "?!", an em dash, an apostrophe, a
    zero-width space) are silence: piper (en_US-joe-medium) writes no audio for them and exits,
    while "$", "%", "#", an emoji or Chinese text are spoken (measured)."""
    return any(ch in "%*#@" or unicodedata.category(ch)[0] in "LNS" for ch in spoken)
