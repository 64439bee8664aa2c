"""The bundle's shared vocabulary: ids, the strict base of every bundle object, the ten
diagnostics and two pillars of DESIGN.md, importance, and the contrastive audit's kinds and
expectations. Re-exported by :mod:`callbench.bundle.models`."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
"""Ids of agents, scenarios, tools, steps, checks and criteria: safe as file names and in messages."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Diagnostic(StrEnum):
    """The ten diagnostics of DESIGN.md; every check, criterion and rating maps to exactly one."""

    TOOL_CHOICE = "tool_choice"
    ARGUMENT_ACCURACY = "argument_accuracy"
    OUTCOME_REACHED = "outcome_reached"
    POLICY_COMPLIANCE = "policy_compliance"
    GROUNDING = "grounding"
    MEMORY = "memory"
    SPEECH_AROUND_TOOLS = "speech_around_tools"
    SPEAKABILITY = "speakability"
    LANGUAGE_AND_SCRIPT = "language_and_script"
    CHANNEL_AND_CLOSING = "channel_and_closing"


DIAGNOSTIC_LABELS: dict[Diagnostic, str] = {
    Diagnostic.TOOL_CHOICE: "tool choice",
    Diagnostic.ARGUMENT_ACCURACY: "argument accuracy",
    Diagnostic.OUTCOME_REACHED: "outcome reached",
    Diagnostic.POLICY_COMPLIANCE: "policy compliance",
    Diagnostic.GROUNDING: "grounding (claims match tool results)",
    Diagnostic.MEMORY: "memory across turns",
    Diagnostic.SPEECH_AROUND_TOOLS: "speech around tool calls",
    Diagnostic.SPEAKABILITY: "speakability",
    Diagnostic.LANGUAGE_AND_SCRIPT: "language and script",
    Diagnostic.CHANNEL_AND_CLOSING: "channel robustness and closing",
}


class Pillar(StrEnum):
    TASK = "task"
    CONVERSATION = "conversation"


Importance = Literal[1, 2, 3]


ContrastKind = Literal["no_tools", "wrong_argument", "cut_short"]
"""The contrastive known-answer traces ``callbench audit --judges`` derives from each reference
replay (:mod:`callbench.audit.contrast`): ``no_tools`` its words without its tool
calls and results, ``wrong_argument`` one key argument of a tool call changed to a wrong value (the
backend answers with its mismatch or default response), ``cut_short`` the call cut after the
candidate's first answer to the caller."""
CONTRAST_KINDS: tuple[ContrastKind, ...] = ("no_tools", "wrong_argument", "cut_short")
Expectation = Literal["met", "not_met", "any"]
"""A criterion's known label on an audit trace: met, not_met, or any (no known answer: not scored)."""


# ---------------------------------------------------------------- bundle and agent
