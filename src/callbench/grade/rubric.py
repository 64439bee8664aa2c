"""The conversation judge's rating rubric: five 1-5 ratings, each with anchors and a weight.

Paper: "The conversation half asks what the call was like to sit through, so it looks at memory
across turns, speech around tool calls, and whether the replies could be spoken as written";
DESIGN.md "Scores": ratings g in 1..5 map to r = (g - 1) / 4 and carry a weight w in {1, 2, 3}.

The default rubric below is the project's choice (recorded in docs/decisions.md): anchors describe
what a 1, a 3 and a 5 look like (2 and 4 lie between them); weights are 2 for the four behaviours
that shape most of a call and 1 for the closing, which is a single moment. A rubric can be replaced
with a YAML/JSON file (``callbench grade --rubric FILE``); the rubric used is stored in the grade
set's manifest, so grade sets made with different rubrics are never confused.

``applies`` makes a rating not applicable by the trace alone, without asking the judge:
``tool_calls`` applies only when the candidate called at least one tool; ``multi_turn`` only when
the caller spoke at least twice. Not-applicable ratings enter neither sum.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from callbench.bundle.models import ID_PATTERN, Diagnostic
from callbench.trace import Trace


class RatingAnchors(BaseModel):
    """What a rating of 1, 3 and 5 looks like (2 and 4 lie between)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    one: str = Field(alias="1", min_length=1)
    three: str = Field(alias="3", min_length=1)
    five: str = Field(alias="5", min_length=1)


class RatingSpec(BaseModel):
    """One rating: id (the key the judge answers under), diagnostic, weight, question, anchors."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=ID_PATTERN)
    diagnostic: Diagnostic
    weight: int = Field(ge=1, le=3)
    question: str = Field(min_length=1)
    anchors: RatingAnchors
    applies: Literal["always", "tool_calls", "multi_turn"] = "always"

    def applicable(self, trace: Trace) -> tuple[bool, str]:
        """Whether this rating applies to ``trace``, and why not when it does not."""
        if self.applies == "tool_calls" and not trace.tool_events:
            return False, "the agent called no tool, so there was no speech around tool calls to rate"
        if self.applies == "multi_turn" and len(trace.caller_turns) < 2:
            return (
                False,
                "the caller spoke fewer than two turns, so there was nothing to remember across turns",
            )
        return True, ""


class Rubric(BaseModel):
    """A versioned list of ratings with unique ids."""

    model_config = ConfigDict(extra="forbid")
    version: str = Field(min_length=1)
    ratings: list[RatingSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        ids = [r.id for r in self.ratings]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate rating ids: {', '.join(dup)}")
        return self

    def sha256(self) -> str:
        """Hash of the rubric's canonical JSON (part of the grade set id)."""
        text = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


def _rating(
    id_: str,
    diagnostic: Diagnostic,
    weight: int,
    question: str,
    one: str,
    three: str,
    five: str,
    applies: Literal["always", "tool_calls", "multi_turn"] = "always",
) -> RatingSpec:
    anchors = RatingAnchors.model_validate({"1": one, "3": three, "5": five})
    return RatingSpec(
        id=id_, diagnostic=diagnostic, weight=weight, question=question, anchors=anchors, applies=applies
    )


DEFAULT_RUBRIC = Rubric(
    version="callbench-rubric-1",
    ratings=[
        _rating(
            "memory",
            Diagnostic.MEMORY,
            2,
            "Does the agent remember what the caller already said and what tools already returned, "
            "across the whole call?",
            "Asks again for information the caller already gave, contradicts earlier turns, or "
            "forgets a tool result it relied on.",
            "Mostly keeps track, with one lapse (one repeated question or one detail lost) that "
            "the caller had to correct or repeat.",
            "Never asks for anything twice and carries every detail the caller gave and every "
            "tool result forward correctly.",
            applies="multi_turn",
        ),
        _rating(
            "speech_around_tools",
            Diagnostic.SPEECH_AROUND_TOOLS,
            2,
            "Does the agent tell the caller what is happening around tool calls (a short 'let me "
            "check' before, a clear account of the result after), without silences or read-outs of "
            "raw data?",
            "Goes silent around tool calls, or dumps raw fields, codes or JSON on the caller, or "
            "never says what a lookup or action produced.",
            "Usually announces and explains tool use, but at least once leaves the caller without "
            "a word during a lookup or reports a result unclearly.",
            "Every tool use is announced briefly and its result explained in plain words the "
            "caller can act on.",
            applies="tool_calls",
        ),
        _rating(
            "speakability",
            Diagnostic.SPEAKABILITY,
            2,
            "Could each agent turn be spoken aloud as written: no markdown, lists or symbols, "
            "numbers written as they would be said, short turns?",
            "Turns read like a document: markdown, bullet lists, tables, URLs or long digit "
            "strings, or turns far too long to follow by ear.",
            "Mostly speakable, with some turns too long or a few written-form numbers or symbols.",
            "Every turn is short, natural speech, with numbers and codes given the way a person "
            "would say them.",
        ),
        _rating(
            "language_and_script",
            Diagnostic.LANGUAGE_AND_SCRIPT,
            2,
            "Does the agent speak the caller's language in its native script throughout, switching "
            "only when the caller does?",
            "Answers in the wrong language or script (for example romanised or English text for "
            "a caller speaking another language) for much of the call.",
            "Mostly in the right language and script, with some turns or phrases in another "
            "language or script the caller did not use.",
            "Every turn is in the caller's language and native script (names, codes and terms "
            "the caller used themselves excepted).",
        ),
        _rating(
            "closing",
            Diagnostic.CHANNEL_AND_CLOSING,
            1,
            "Does the call end well: an audible goodbye that tells the caller what happens next, "
            "with no abrupt hang-up and no dragging on after the caller is done?",
            "The call ends abruptly with no goodbye, or the agent hangs up mid-conversation, or "
            "keeps talking long after the caller ended.",
            "There is a goodbye, but it is curt, misses what happens next, or comes at an awkward moment.",
            "A brief, warm goodbye at the right moment that confirms what was done and what happens next.",
        ),
    ],
)
"""The default rubric (weights: memory 2, speech_around_tools 2, speakability 2,
language_and_script 2, closing 1)."""


def load_rubric(path: str | Path) -> Rubric:
    """Load a rubric from a YAML (safe_load) or JSON file; raises ``ValueError`` naming the file and
    the field path on bad content."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"{p}: cannot read rubric: {e}") from None
    try:
        return Rubric.model_validate(raw)
    except ValidationError as e:
        details = "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or '(root)'}: {err['msg']}"
            for err in e.errors(include_url=False)
        )
        raise ValueError(f"{p}: invalid rubric: {details}") from None
