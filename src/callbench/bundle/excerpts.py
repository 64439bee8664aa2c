"""Where a criterion's excerpt sits in the rendered operating document, and whether it is whole.

Paper (section 3): "Criteria that depend on the agent's instructions carry exact excerpts of those
instructions, and the loader verifies each excerpt against the hash of the full rendered prompt."

Operating documents are Markdown and are hard-wrapped, so one sentence often spans two lines of
``prompt.md``. In Markdown a line break inside a paragraph (a soft break) reads as a space, so an
excerpt matches the rendered text when it is equal to it after every run of whitespace (spaces,
tabs, line breaks and the indentation of a continued list item) is read as one space. Nothing else
is relaxed: letters, digits, punctuation and Markdown markers must be exactly as rendered (after
Unicode NFC).

An excerpt must also be *whole*: a judge handed half a rule ("...block with reason suspected_fraud
after a") grades against a rule the document never stated. It must start where a sentence or
clause starts (the start of a paragraph, list item, heading or table cell, the line after a
Markdown or ``[Bracketed]`` heading, or just after ``. ! ? ;
:``, the Devanagari danda ``।``/``॥``, or the end of a quotation or bracket that follows one) and
end where one ends (its last character, or the first after it, is one of those marks, or the list
item, paragraph or line of a table ends there). A comma does not end a clause here: cutting at a
comma is how half-rules are made.
"""

from __future__ import annotations

import bisect
import functools
import re

from callbench.bundle.normalize import nfc
from callbench.bundle.sections import is_heading

TERMINATORS = frozenset(".!?;:।॥…")
"""Marks that end a sentence or clause (Latin, and the Devanagari danda and double danda used in
Hindi, Marathi and Bengali text)."""
_CLOSERS = "\"'”’)]*_`»"
"""Closing quotation marks, brackets and Markdown emphasis that may follow a terminator."""
_OPENERS = "\"'“‘([*_`«"
_MARKER = r"[ \t]*(?:[-*+]|\d{1,3}[.)]|#{1,6}|>|\|)"
_BLOCK_HEAD = re.compile(_MARKER + r"(?:[ \t]+\*\*[^*\n]{0,80}\*\*)?[ \t]*[\"'“‘(«]*")
"""What may precede an excerpt on its line: a Markdown list marker, heading, quotation or table
cell (with an optional bold label such as ``**Rule:**``) and opening quotes."""
_BLOCK_START = re.compile(_MARKER + r"[ \t]")
"""A line that starts a new block: list item, heading, quotation or table row."""
_NEXT_BLOCK = re.compile(r"[ \t]*(?:\n[ \t]*(?:\n|[-*+][ \t]|\d{1,3}[.)][ \t]|#{1,6}[ \t]|>|\|)|\n?\Z|\|)")
"""After an excerpt: the end of a table cell, or a line break followed by a blank line, a new list
item, a heading, a quotation or a table row, or the end of the text."""


@functools.lru_cache(maxsize=256)
def _nfc(s: str) -> str:
    # cached: one agent's rendered document is searched for every excerpt of every scenario
    return nfc(s)


_SPACE_RUN = re.compile(r"\s+")
"""A whitespace run: ``\\s`` of a str pattern is Unicode whitespace, as ``str.isspace``."""


_LONG_SPACE_RUN = re.compile(r"\s{2,}")
"""A whitespace run of two characters or more: the runs that drop characters when squashed."""


@functools.lru_cache(maxsize=64)
def _squash(text: str) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """``text`` with every whitespace run read as one space, with what :func:`_source_index` needs
    to map a character of the result to the one it came from (a run maps to its first character):
    for each run that drops characters, the index in the result just after its space and the
    characters dropped up to it (a one-character run drops none and moves nothing, so it needs no
    entry). Cached: the same rendered document is squashed for each of its excerpts."""
    after: list[int] = []
    dropped: list[int] = []
    gone = 0
    for m in _LONG_SPACE_RUN.finditer(text):
        s, e = m.span()
        after.append(s - gone + 1)
        gone += e - s - 1
        dropped.append(gone)
    return _SPACE_RUN.sub(" ", text), tuple(after), tuple(dropped)


def _source_index(k: int, after: tuple[int, ...], dropped: tuple[int, ...]) -> int:
    """The index in the original text of character ``k`` of :func:`_squash`'s result."""
    i = bisect.bisect_right(after, k) - 1
    return k + (dropped[i] if i >= 0 else 0)


def locate_excerpt(rendered: str, excerpt: str, *, rendered_is_nfc: bool = False) -> tuple[int, int] | None:
    """``(start, end)`` character offsets in ``rendered`` of the first occurrence of ``excerpt``
    (both NFC; whitespace runs equal, see the module docstring), or None when it does not occur or
    is blank. ``rendered[start:end]`` is the matched text, without surrounding whitespace.
    ``rendered_is_nfc``: the caller knows ``rendered`` is NFC (``render_instructions`` returns NFC
    text), so it is not checked again."""
    text, ex = (rendered if rendered_is_nfc else _nfc(rendered)), _nfc(excerpt).strip()
    if not ex:
        return None
    i = text.find(ex)
    if i >= 0:
        return i, i + len(ex)
    squashed, after, dropped = _squash(text)
    sq_ex = " ".join(ex.split())
    j = squashed.find(sq_ex)
    if j < 0:
        return None
    last = _source_index(j + len(sq_ex) - 1, after, dropped)
    return _source_index(j, after, dropped), last + 1


def _ends_clause(before: str) -> bool:
    b = before.rstrip()
    return b[-1:] in TERMINATORS or b.rstrip(_CLOSERS)[-1:] in TERMINATORS


def _starts_whole(text: str, start: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    head = text[line_start:start]
    if _BLOCK_HEAD.fullmatch(head):
        return True
    if head.strip(" \t" + _OPENERS):
        return _ends_clause(head.rstrip(" \t" + _OPENERS))
    # At the start of a line: a new paragraph, unless the previous line runs on into this one.
    if line_start == 0:
        return True
    prev_start = text.rfind("\n", 0, line_start - 1) + 1
    prev = text[prev_start:line_start - 1]
    return not prev.strip() or prev.lstrip().startswith("#") or is_heading(prev) or _ends_clause(prev)


def _ends_whole(text: str, end: int) -> bool:
    matched = text[:end].rstrip()
    if matched.rstrip(_CLOSERS)[-1:] in TERMINATORS:
        return True
    rest = text[end:]
    nxt = rest.lstrip(" \t" + _CLOSERS)[:1]
    if nxt in TERMINATORS and nxt != "":
        return True
    return _NEXT_BLOCK.match(rest) is not None


def excerpt_cut(rendered: str, excerpt: str, *, rendered_is_nfc: bool = False) -> str | None:
    """Why ``excerpt`` is not a whole sentence or clause of ``rendered`` ("starts mid-sentence",
    "ends mid-sentence", or both joined by "and"), or None when it is whole or does not occur
    (that is :func:`locate_excerpt`'s problem). Rules in the module docstring. ``rendered_is_nfc``
    as for :func:`locate_excerpt`."""
    text = rendered if rendered_is_nfc else _nfc(rendered)
    span = locate_excerpt(text, excerpt, rendered_is_nfc=True)
    if span is None:
        return None
    start, end = span
    ex = text[start:end]
    whys = []
    if not (_BLOCK_START.match(ex) or _starts_whole(text, start)):
        whys.append("starts mid-sentence")
    if not _ends_whole(text, end):
        whys.append("ends mid-sentence")
    return " and ".join(whys) or None
