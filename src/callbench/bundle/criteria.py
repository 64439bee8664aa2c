"""What a scenario is graded on (paper: the action checks A_s and criteria C_s): executable action
checks, state checks against the reference path's final state, and judged criteria with their
anchors. Re-exported by :mod:`callbench.bundle.models`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from callbench.bundle.matchers import Matcher
from callbench.bundle.vocabulary import (
    ID_PATTERN,
    ContrastKind,
    Diagnostic,
    Expectation,
    Importance,
    Pillar,
    Strict,
)


class CountBounds(Strict):
    min: int = Field(default=1, ge=0)
    max: int | None = Field(default=None, ge=0)


class ActionCheck(Strict):
    """An executable expected action (A_s): a call of ``tool`` whose arguments satisfy ``args``,
    made between ``count.min`` and ``count.max`` times, each counted call after every check in
    ``after`` was first met. ``count: {min: 0, max: 0}`` asserts the tool is never called.

    ``applies_after`` guards the check: it is not applicable (enters neither sum, neither met nor
    not met) unless every listed check of the same scenario is met at the end of the call, i.e. the
    call reached the point where the action is tempting. Guard a negative check
    ("never call X") that a do-nothing agent would otherwise meet."""

    id: str = Field(pattern=ID_PATTERN)
    description: str = Field(default="", max_length=2000)
    tool: str
    args: dict[str, Matcher] = Field(default_factory=dict)
    count: CountBounds = Field(default_factory=CountBounds)
    after: list[str] = Field(default_factory=list)
    applies_after: list[str] = Field(
        default_factory=list,
        max_length=20,
        description=(
            "Guard: ids of action checks of this scenario that must all be met for this check to "
            "apply; until then it is not applicable (neither met nor not met)."
        ),
    )
    importance: Importance = 2
    diagnostic: Diagnostic = Diagnostic.TOOL_CHOICE
    critical: bool | None = Field(
        default=None,
        description=(
            "Outcome-critical: the episode's outcome is met only when every applicable critical item "
            "is met. Default: critical when the diagnostic is outcome_reached, else not."
        ),
    )

    @property
    def is_critical(self) -> bool:
        """Whether the check decides the episode's outcome: ``critical`` when the author set it,
        else True exactly for ``diagnostic: outcome_reached`` (docs/authoring.md "Outcome")."""
        return self.diagnostic == Diagnostic.OUTCOME_REACHED if self.critical is None else self.critical


class StateCheck(Strict):
    """A state check (needs an agent with ``state``): the call's final state equals
    the state produced by replaying the scenario's reference path on the initial state, optionally
    restricted to ``tables`` and to ``fields`` (``table.dotted.path`` prefixes, e.g.
    ``orders.status``). Graded like an action check (met / not met, with a readable difference)."""

    id: str = Field(pattern=ID_PATTERN)
    description: str = Field(default="", max_length=2000)
    tables: list[str] = Field(default_factory=list, max_length=50)
    fields: list[str] = Field(default_factory=list, max_length=100)
    applies_after: list[str] = Field(
        default_factory=list, max_length=20,
        description="Guard: ids of action checks that must all be met for this check to apply (a "
        "reference path that changes nothing makes the check one a do-nothing call would meet).",
    )
    importance: Importance = 3
    diagnostic: Diagnostic = Diagnostic.OUTCOME_REACHED
    critical: bool = Field(
        default=True,
        description="Outcome-critical (default true): the episode's outcome is met only when every "
        "applicable critical item is met.",
    )

    @property
    def is_critical(self) -> bool:
        """Whether the check decides the episode's outcome (``critical``, true unless the author
        says otherwise)."""
        return self.critical


class Anchors(Strict):
    met: str = Field(min_length=1, max_length=2000)
    partial: str = Field(min_length=1, max_length=2000)
    not_met: str = Field(min_length=1, max_length=2000)


class Criterion(Strict):
    """A judged item (C_s): importance, statement, scenario-specific anchors, optional verbatim
    excerpts of the rendered instructions (checked against its hash at load time)."""

    id: str = Field(pattern=ID_PATTERN)
    pillar: Pillar
    importance: Importance = 2
    statement: str = Field(min_length=1, max_length=2000)
    anchors: Anchors
    excerpts: list[str] = Field(default_factory=list, max_length=10)
    diagnostic: Diagnostic
    null_floor: Literal["not_met", "met", "any"] = Field(
        default="not_met",
        description="The label a do-nothing candidate's call earns (callbench audit --judges checks "
        "the judges against it): not_met (the default), met (e.g. 'never reads out the card number'), "
        "or any (no known answer).",
    )
    contrast: dict[ContrastKind, Expectation] = Field(
        default_factory=dict,
        description="The label this criterion earns on each contrastive audit trace (no_tools, "
        "wrong_argument, cut_short), overriding bundle.yaml's per-diagnostic contrast entry; any: "
        "not scored on that kind.",
    )
