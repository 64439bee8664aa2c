"""Word- and line-level differences for the trace viewer (standard library :mod:`difflib`).

- :func:`word_diff`: what the channel changed in a caller turn. Words are maximal runs of
  non-space characters, each kept with its trailing whitespace; the intended text and the
  observed fragments (joined in order) are compared word by word with
  :class:`difflib.SequenceMatcher` (``autojunk=False``). Intended words that were dropped or
  replaced are marked ``changed`` in the intended segments; observed words that were inserted or
  replaced are marked ``changed`` in the observed fragment they fall in. Unchanged words are
  never marked, so one substituted word marks one word. The words both texts share at their
  start and end are set aside before matching (unchanged), as diff tools do.
- :func:`line_ops`: the line edits turning a base document into another (for operating
  instructions that differ between scenarios only in a few lines); the common leading and
  trailing lines are set aside before matching, so the cost follows the differing part.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

Segment = tuple[str, bool]  # (text, changed)
_WORD = re.compile(r"\S+\s*|\s+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _merge(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for text, changed in segments:
        if out and out[-1][1] == changed:
            out[-1] = (out[-1][0] + text, changed)
        else:
            out.append((text, changed))
    return out


def _common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """How many items ``a`` and ``b`` share at their start, and then at their end (not overlapping)."""
    limit = min(len(a), len(b))
    head = 0
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    return head, tail


def word_diff(intended: str, observed: list[str]) -> tuple[list[Segment], list[list[Segment]]]:
    """``(intended segments, segments per observed fragment)``; concatenating a side's segment
    texts gives back that side's text exactly (module docstring for the rule)."""
    if observed == [intended]:  # heard as said (most turns): one unchanged segment each side
        same: list[Segment] = [(intended, False)] if intended else []
        return same, [list(same)]
    a = _words(intended)
    frags = [_words(o) for o in observed]
    b = [w for f in frags for w in f]
    owner = [k for k, f in enumerate(frags) for _ in f]
    a_words, b_words = [w.strip() for w in a], [w.strip() for w in b]
    if a_words == b_words:  # nothing changed (the common case): the one matching block is all
        a_changed, b_changed = [False] * len(a), [False] * len(b)
    else:  # words both share at the start and end are unchanged; the rest is matched
        head, tail = _common_ends(a_words, b_words)
        a_changed = [False] * head + [True] * (len(a) - head - tail) + [False] * tail
        b_changed = [False] * head + [True] * (len(b) - head - tail) + [False] * tail
        matcher = SequenceMatcher(
            None, a_words[head : len(a) - tail], b_words[head : len(b) - tail], autojunk=False
        )
        for block in matcher.get_matching_blocks():
            for i in range(block.size):
                a_changed[head + block.a + i] = False
                b_changed[head + block.b + i] = False
    # whitespace-only tokens (leading space) are never "changed"
    a_seg = _merge([(w, c and bool(w.strip())) for w, c in zip(a, a_changed, strict=True)])
    b_seg: list[list[Segment]] = [[] for _ in frags]
    for w, c, k in zip(b, b_changed, owner, strict=True):
        b_seg[k].append((w, c and bool(w.strip())))
    return a_seg, [_merge(s) for s in b_seg]


LineOp = tuple[int, int, list[str]]  # replace base lines [start, end) with these lines


def line_ops(base: str, other: str) -> list[LineOp]:
    """The edits turning ``base`` into ``other``, as ``(start, end, new_lines)`` on base line
    indices (0-based, end exclusive), in increasing order; applying them all gives ``other``'s
    lines (:func:`apply_line_ops`)."""
    a, b = base.split("\n"), other.split("\n")
    # the lines both share at the start and at the end are left out of the matching (as diff
    # tools do): documents that differ in a few lines are matched on those lines only
    head, tail = _common_ends(a, b)
    a_mid, b_mid = a[head : len(a) - tail], b[head : len(b) - tail]
    matcher = SequenceMatcher(None, a_mid, b_mid, autojunk=False)
    return [
        (head + i1, head + i2, b_mid[j1:j2])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def apply_line_ops(base: str, ops: list[LineOp]) -> str:
    """The document ``line_ops(base, other)`` was computed for (``other``)."""
    lines = base.split("\n")
    out: list[str] = []
    pos = 0
    for start, end, new in ops:
        out.extend(lines[pos:start])
        out.extend(new)
        pos = end
    out.extend(lines[pos:])
    return "\n".join(out)
