"""Near-duplicate rejection: a generated scenario with the same intent and the same facts as an
existing one is not written.

Two similarities, each a Jaccard index (|A ∩ B| / |A ∪ B|, 1.0 for two empty sets):

* *intent*: word sets (Unicode ``\\w+`` after NFC and casefolding, words of 3+ characters) of the
  title, goal and the brief's reason;
* *facts*: the sets of the brief's known-fact values (NFC, casefolded, whitespace collapsed; nested
  values flattened to their leaves).

A candidate is a near-duplicate of a scenario when intent >= :data:`INTENT_THRESHOLD` and
facts >= :data:`FACTS_THRESHOLD`: the same call about the same person. Another intent with the same
caller, or the same intent with other facts, is a new test.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from pydantic import BaseModel

from callbench.bundle.models import Scenario

INTENT_THRESHOLD = 0.5
FACTS_THRESHOLD = 0.5
_WORD = re.compile(r"\w{3,}")


class DuplicateMatch(BaseModel):
    """The scenario a candidate duplicates and the two similarities (0..1)."""

    scenario_id: str
    intent: float
    facts: float


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def intent_words(s: Scenario) -> set[str]:
    """The intent word set of ``s`` (see the module docstring)."""
    return set(_WORD.findall(_norm(f"{s.title} {s.goal} {s.brief.reason}")))


def _leaves(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return [x for val in v.values() for x in _leaves(val)]
    if isinstance(v, list):
        return [x for val in v for x in _leaves(val)]
    return [v]


def fact_values(s: Scenario) -> set[str]:
    """The normalised known-fact values of ``s``."""
    return {_norm(str(v)) for v in _leaves(s.brief.known_facts) if v is not None and str(v).strip()}


def jaccard(a: set[str], b: set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 1.0 when both are empty."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def near_duplicate(candidate: Scenario, others: list[Scenario]) -> DuplicateMatch | None:
    """The most similar scenario of ``others`` (other ids) that ``candidate`` near-duplicates, or
    None. Ties go to the scenario listed first."""
    words, facts = intent_words(candidate), fact_values(candidate)
    best: DuplicateMatch | None = None
    for other in others:
        if other.id == candidate.id and other is candidate:
            continue
        m = DuplicateMatch(
            scenario_id=other.id,
            intent=round(jaccard(words, intent_words(other)), 3),
            facts=round(jaccard(facts, fact_values(other)), 3),
        )
        if (
            m.intent >= INTENT_THRESHOLD
            and m.facts >= FACTS_THRESHOLD
            and (best is None or m.intent + m.facts > best.intent + best.facts)
        ):
            best = m
    return best
