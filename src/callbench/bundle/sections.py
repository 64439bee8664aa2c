"""The sections of an operating document.

Sections are the headings of the rendered document, outside fenced code blocks: Markdown ATX
headings (``#`` to ``######`` at the start of a line) and, as voice-agent platforms write them
(Vapi, Retell), bracketed headings: a line holding only ``[Title]`` (optionally followed by a
colon), which counts as level 1. A section runs from its heading to the next heading of any level,
and text before the first heading is the section ``(preamble)`` when it is not blank. A title
used by more than one heading (``1. Greet`` in the booking flow and in the cancellation flow) is
qualified by its enclosing headings until it is unique: ``Booking flow > 1. Greet``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_BRACKETED = re.compile(r"^[ \t]*\[([^\[\]\n]*[^\[\]\s][^\[\]\n]*)\][ \t]*:?[ \t]*$")
QUALIFIER = " > "
"""Joins an enclosing heading's title to a repeated title (``Booking flow > 1. Greet``)."""
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
PREAMBLE = "(preamble)"


class Section(BaseModel):
    """One section of a document: heading ``title`` (without the ``#``), heading ``level`` (0 for
    the preamble), and its ``start``/``end`` character offsets in the text."""

    title: str
    level: int
    start: int
    end: int


def document_sections(text: str) -> list[Section]:
    """The sections of a Markdown document (rules in the module docstring), in order."""
    heads: list[tuple[int, int, str]] = []
    offset = 0
    fenced = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            m = _HEADING.match(line.rstrip("\r\n"))
            b = _BRACKETED.match(line.rstrip("\r\n")) if m is None else None
            if m:
                heads.append((offset, len(m.group(1)), m.group(2).strip()))
            elif b:
                heads.append((offset, 1, b.group(1).strip()))
        offset += len(line)
    heads = _qualified(heads)
    out: list[Section] = []
    first = heads[0][0] if heads else len(text)
    if text[:first].strip():
        out.append(Section(title=PREAMBLE, level=0, start=0, end=first))
    for i, (start, level, title) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
        out.append(Section(title=title, level=level, start=start, end=end))
    return out


def _qualified(heads: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """``heads`` with every repeated title prefixed by its enclosing headings' titles (nearest
    first, as many as make it unique, or all there are)."""
    parents: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    for _, level, title in heads:
        while stack and stack[-1][0] >= level:
            stack.pop()
        parents.append([t for _, t in reversed(stack)])
        stack.append((level, title))
    titles = [t for _, _, t in heads]
    out = []
    for i, (start, level, title) in enumerate(heads):
        name = title
        depth = 0
        while titles.count(title) > 1 and depth < len(parents[i]):
            depth += 1
            name = QUALIFIER.join([*reversed(parents[i][:depth]), title])
            if sum(1 for j in range(len(heads)) if titles[j] == title and _name(parents[j], title, depth)
                   == name) == 1:
                break
        out.append((start, level, name))
    return out


def _name(parents: list[str], title: str, depth: int) -> str:
    return QUALIFIER.join([*reversed(parents[:depth]), title])


def is_heading(line: str) -> bool:
    """Whether ``line`` (without its line break) is a heading: Markdown ATX or ``[Bracketed]``."""
    return _HEADING.match(line) is not None or _BRACKETED.match(line) is not None


def section_at(sections: list[Section], pos: int) -> int | None:
    """The index of the section holding character ``pos``, or None."""
    for i, sec in enumerate(sections):
        if sec.start <= pos < sec.end:
            return i
    return None


def names_word(text: str, word: str) -> bool:
    """Whether ``text`` holds ``word`` as a whole identifier (not inside a longer one of letters,
    digits and underscores): ``book_tanker`` is named by "with book_tanker." but not by
    "rebook_tanker"."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", text) is not None


PREAMBLE_MIN_LINES = 3
"""Text before the first heading is planned like a section when it has more lines than this (a
prompt's rules often come before any heading; a one-line title does not need a scenario)."""


CALL_VALUES = ("{{date}}", "{{time}}", "{{weekday}}", "{{now}}")
"""What the call's own values render as in the neutral document
(:func:`callbench.bundle.loader.render_instructions` without a scenario)."""


def call_data_only(body: str) -> bool:
    """Whether a section's ``body`` (neutral rendering, heading line excluded) is only the call's
    own values: every non-blank line holds one of :data:`CALL_VALUES` ("Today is {{weekday}},
    {{date}}"). Such a section (docs/authoring.md "Call context") states no rule to test, so the
    plan does not assign it and coverage does not count it."""
    lines = [x for x in body.splitlines() if x.strip()]
    return bool(lines) and all(any(v in x for v in CALL_VALUES) for x in lines)


CONTEXT_TITLE = re.compile(r"\bcall context\b|^(?:[0-9]+[A-Z]?[.)]?\s+)?(?:more\s+)?worked examples\b", re.I)
"""A heading that names a context-only section: ``Call context`` (the call's own values: date,
time, the number shown by the network) or ``Worked examples`` (good turns shown for tone)."""

NOT_RECITED = re.compile(
    r"not to be recited|never to be recited|do not recite|examples only|for tone\b", re.I
)
"""A mark, in a section's heading or first line of body text, that the section shows examples and
sets no rule: "(for tone, not to be recited)", "the names in them are examples only"."""


def context_only(title: str, body: str) -> bool:
    """Whether a section (heading ``title``, ``body`` text without the heading line) only sets
    context and states no rule a scenario could test: only call data (:func:`call_data_only`), a
    heading naming the call's context or worked examples (:data:`CONTEXT_TITLE`), or a heading or
    first body line marked as examples not to be recited (:data:`NOT_RECITED`). A plan does not
    assign such a section and coverage does not count it: a scenario asked to test the examples
    of good turns would have to grade the agent on reciting them, which the document forbids."""
    first = next((x for x in body.splitlines() if x.strip()), "")
    return (
        call_data_only(body)
        or CONTEXT_TITLE.search(title) is not None
        or NOT_RECITED.search(title) is not None
        or NOT_RECITED.search(first) is not None
    )


def plannable(rendered: str, section: Section) -> bool:
    """Whether ``section`` of the neutral document ``rendered`` states something to test, so a
    generation plan assigns it and coverage counts it: it has more than one line (more than
    :data:`PREAMBLE_MIN_LINES` for the preamble; a heading with no body, such as ``[Booking
    Flow]`` right before its steps, has nothing to test) and does not only set context
    (:func:`context_only`)."""
    text = rendered[section.start : section.end]
    if text.count("\n") <= (PREAMBLE_MIN_LINES if section.title == PREAMBLE else 1):
        return False
    body = text if section.title == PREAMBLE else text.partition("\n")[2]
    title = "" if section.title == PREAMBLE else section.title
    return not context_only(title, body)


def testable_sections(rendered: str) -> list[Section]:
    """The sections of the neutral document ``rendered`` that a generation plan assigns and
    coverage counts: the :func:`plannable` ones, or, when none is, every section that does not
    only set context (a short document still gets its sections tested)."""
    every = document_sections(rendered)
    return [s for s in every if plannable(rendered, s)] or [
        s for s in every
        if not context_only("" if s.title == PREAMBLE else s.title,
                            rendered[s.start : s.end].partition("\n")[2])
    ]
