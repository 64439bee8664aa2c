"""Whitespace-run squashing behind excerpt location (made cheaper for validate's speed): the squashed
text and the map back to the source are exactly those of the run-by-run definition."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle.excerpts import _source_index, _squash, locate_excerpt


def _squash_by_runs(text: str) -> tuple[str, list[int]]:
    """The definition: every ``\\s+`` run one space; for each result character, its source index
    (a run maps to its first character)."""
    out: list[str] = []
    source: list[int] = []
    pos = 0
    for m in re.finditer(r"\s+", text):
        s, e = m.span()
        out.append(text[pos:s])
        source += range(pos, s)
        out.append(" ")
        source.append(s)
        pos = e
    out.append(text[pos:])
    source += range(pos, len(text))
    return "".join(out), source


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \t\n\u00a0\u2009.", max_size=40))
def test_squash_maps_every_character_to_its_source(text: str) -> None:
    squashed, after, dropped = _squash(text)
    expected, source = _squash_by_runs(text)
    assert squashed == expected
    assert [_source_index(k, after, dropped) for k in range(len(squashed))] == source


def test_excerpt_across_reflowed_whitespace() -> None:
    doc = "Intro.\n\n   Refunds   are\n  given within\t\t7 days.  End."
    start, end = locate_excerpt(doc, "Refunds are given within 7 days.")  # type: ignore[misc]
    assert doc[start:end] == "Refunds   are\n  given within\t\t7 days."
