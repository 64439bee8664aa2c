"""Typed bundle objects (pydantic v2): the one format every later stage reads.

Mirrors the paper's formal objects: an agent configuration a = (p_a instructions, T_a tools,
success conditions of call-ending tools); a scenario s = (U_s caller brief, W_s hidden backend
state, h_s channel program, A_s action checks, C_s criteria), plus an optional reference path
(the candidate side of one correct call). Field names are the on-disk YAML/JSON keys.
Unknown keys are rejected (``extra="forbid"``) so a typo is a validation error, not a silent default.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from callbench.bundle.audio import AudioChannel
from callbench.bundle.criteria import ActionCheck, Anchors, CountBounds, Criterion, StateCheck
from callbench.bundle.matchers import Matcher
from callbench.bundle.scripts import ALIASES, script_codes
from callbench.bundle.state.models import StateSpec
from callbench.bundle.vocabulary import (
    CONTRAST_KINDS,
    DIAGNOSTIC_LABELS,
    ID_PATTERN,
    ContrastKind,
    Diagnostic,
    Expectation,
    Importance,
    Pillar,
    Strict,
)


class BundleMeta(Strict):
    """``bundle.yaml``: name, version, description, and the bundle's default expectations on the
    contrastive audit traces, per diagnostic (``contrast``)."""

    name: str = Field(min_length=1, max_length=200)
    version: str = Field(min_length=1, max_length=50)
    description: str = Field(default="", max_length=20_000)
    contrast: dict[ContrastKind, dict[Diagnostic, Expectation]] = Field(
        default_factory=dict,
        description="Per contrastive trace kind (no_tools, wrong_argument, cut_short), the label "
        "callbench audit --judges expects of a criterion of each diagnostic on that trace, e.g. "
        "{no_tools: {grounding: not_met}}. A criterion's own contrast entry wins; a criterion whose "
        "null_floor is met, or with no entry here or of its own, is not scored on that kind.",
    )


class ToolSpec(Strict):
    """One tool of the agent's typed interface (OpenAI/Anthropic function-tool shape).

    ``parameters`` is a JSON Schema (draft 2020-12) object schema for the arguments.
    ``default_response`` answers calls when a scenario gives this tool no fixture (else a generic
    ``{"error": "no_data"}``).
    """

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")
    description: str = Field(min_length=1, max_length=4000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    default_response: Any = None
    schema_errors: Literal["reject", "accept"] | None = Field(
        default=None,
        description="This tool's handling of calls whose arguments do not fit `parameters` (default: "
        "the agent's schema_errors). accept needs schema_errors_reason.",
    )
    schema_errors_reason: str | None = Field(
        default=None, min_length=1, max_length=1000,
        description="Why this tool's runtime accepts arguments that do not fit its schema (required "
        "with schema_errors: accept).",
    )

    @model_validator(mode="after")
    def _opt_out_reason(self) -> ToolSpec:
        """A tool that opts out of the schema check says why; a reason without the opt-out is refused
        (it would be silently ignored)."""
        reason = bool(self.schema_errors_reason and self.schema_errors_reason.strip())
        if self.schema_errors == "accept" and not reason:
            raise ValueError(f"tool {self.name!r}: schema_errors: accept needs schema_errors_reason "
                             "(why this tool's runtime accepts arguments outside its schema)")
        if self.schema_errors != "accept" and self.schema_errors_reason is not None:
            raise ValueError(f"tool {self.name!r}: schema_errors_reason is only used with "
                             "schema_errors: accept")
        return self


class CallEndingTool(Strict):
    """A call-ending tool: the episode ends only when the tool's *returned object* satisfies
    ``success`` (field path -> matcher, all must hold), e.g. ``{status: ended}`` (paper, section 4).
    A failed condition hands control back to the candidate."""

    tool: str
    success: dict[str, Matcher] = Field(min_length=1)
    concluding_message: bool = Field(
        default=True,
        description="Offer a concluding_message argument so a model can say goodbye inside the call.",
    )


class AgentConfig(Strict):
    """``agents/<id>/agent.yaml``. ``instructions_file`` (default ``prompt.md``) holds the operating
    document, a template rendered with ``{{date}}``, ``{{time}}``, ``{{weekday}}``, ``{{agent_name}}``
    and the scenario's ``variables`` (jinja2, sandboxed, StrictUndefined)."""

    id: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1, max_length=200)
    domain: str = Field(min_length=1, max_length=100)
    languages: list[str] = Field(min_length=1)
    direction: Literal["inbound", "outbound"]
    active: bool = True
    description: str = Field(default="", max_length=4000)
    instructions_file: str = "prompt.md"
    prompt_sha256: str | None = Field(
        default=None,
        description="Recorded SHA-256 (hex) of the instructions template (UTF-8); validated when present.",
    )
    tools: list[ToolSpec] = Field(default_factory=list, max_length=64)
    call_ending_tools: list[CallEndingTool] = Field(default_factory=list)
    variables: dict[str, str] = Field(default_factory=dict)
    state: StateSpec | None = Field(
        default=None,
        description="A stateful backend: tables loaded from data files and the operation answering "
        "each stateful tool (callbench.bundle.state.models; docs/authoring.md).",
    )
    first_user_message: Literal["none", "empty", "text"] | None = Field(
        default=None,
        description="The agent's first-turn convention: whether a user turn comes before its greeting "
        "(none: the agent speaks first; empty or text: the user does, e.g. a Vapi "
        "assistant-waits-for-user or a Retell begin_message of \"\"). The default of the candidate's "
        "first_user_message role setting when that is auto (docs/decisions.md).",
    )
    first_user_message_text: str | None = Field(default=None, max_length=2000)
    schema_errors: Literal["reject", "accept"] = Field(
        default="reject",
        description="A tool call whose arguments do not fit the tool's JSON Schema: reject (answered "
        "with an invalid_arguments tool error, never executed; what function-calling runtimes do) or "
        "accept (executed, with its schema errors recorded). A tool may opt out of reject with a "
        "reason (its own schema_errors).",
    )

    @model_validator(mode="after")
    def _first_turn(self) -> AgentConfig:
        """``first_user_message: text`` needs a non-blank ``first_user_message_text``, which any
        other value refuses (as the role setting of the same name)."""
        has_text = bool(self.first_user_message_text and self.first_user_message_text.strip())
        if self.first_user_message == "text" and not has_text:
            raise ValueError("first_user_message: text needs first_user_message_text (the text)")
        if self.first_user_message != "text" and self.first_user_message_text is not None:
            raise ValueError("first_user_message_text is only used with first_user_message: text")
        return self


# ---------------------------------------------------------------- scenario: caller brief


class PlanStep(Strict):
    """One intention of the caller: a ``trigger`` (when it may be expressed) and a ``meaning``
    (what to convey, never a line to recite)."""

    id: str = Field(pattern=ID_PATTERN)
    trigger: str = Field(min_length=1, max_length=2000)
    meaning: str = Field(min_length=1, max_length=2000)


class Brief(Strict):
    """What the caller knows (U_s). Never shown to the candidate or mixed with hidden state."""

    context: str = Field(min_length=1, max_length=8000)
    reason: str = Field(min_length=1, max_length=4000, description="Reason for the call.")
    known_facts: dict[str, Any] = Field(default_factory=dict)
    unknown_facts: list[str] = Field(default_factory=list)
    plan: list[PlanStep] = Field(min_length=1, max_length=40)
    language: str = Field(min_length=2, max_length=35, description="BCP 47 tag, e.g. gu-IN.")
    script: str = Field(min_length=2, max_length=40, description="Script name, e.g. Gujarati.")
    datetime: str = Field(
        description="Local date and time of the call, ISO 8601, e.g. 2026-03-14T17:20+05:30"
    )
    persona: str = Field(default="", max_length=4000)

    @field_validator("script")
    @classmethod
    def _known_script(cls, v: str) -> str:
        """The caller's speech is checked against this script (``sim/caller_language.py``), so it
        must name one: a Unicode script name, an ISO 15924 code or an alias (``bundle/scripts.py``)."""
        if script_codes(v) is None:
            raise ValueError(
                f"{v!r} is not a script name: use a Unicode script name (Latin, Devanagari, Bengali, "
                "Gujarati, Tamil, Arabic, Ol Chiki, ...), an ISO 15924 code (Deva, Jpan) or one of "
                + ", ".join(a.title() for a in ALIASES)
            )
        return v


# ---------------------------------------------------------------- scenario: channel


class AsrEvent(Strict):
    """An authored recogniser error at one caller turn: ``drop`` removes ``span``, ``double``
    repeats it, ``substitute`` replaces it with ``replacement``. The turn is given by number
    (1-based caller turn) or by the plan step whose expression turn it is."""

    turn: int | None = Field(default=None, ge=1, le=100)
    step: str | None = None
    kind: Literal["drop", "double", "substitute"]
    span: str = Field(min_length=1, max_length=500)
    replacement: str | None = Field(default=None, max_length=500)


class VadSplit(Strict):
    """Split a caller turn into at most three consecutive messages, after the first occurrence of
    each ``after`` anchor (1 or 2 anchors, in text order), where a real pause would fall."""

    turn: int | None = Field(default=None, ge=1, le=100)
    step: str | None = None
    after: list[str] = Field(min_length=1, max_length=2)


class ChannelProgram(Strict):
    """h_s: what the channel does to caller speech before the candidate sees it."""

    asr_events: list[AsrEvent] = Field(default_factory=list, max_length=50)
    seeded_noise: bool = False
    vad_splits: list[VadSplit] = Field(default_factory=list, max_length=50)
    audio: AudioChannel | None = None  # the voice channel's line (bundle/audio.py); None: text only


# ---------------------------------------------------------------- scenario: backend


class FixtureEntry(Strict):
    """The j-th queue entry of a tool: argument matchers, the authored ``response`` when they all
    hold, and ``mismatch_response`` otherwise (or for unparseable arguments)."""

    args: dict[str, Matcher] = Field(default_factory=dict)
    response: Any
    mismatch_response: Any


class ToolFixtures(Strict):
    """Per-tool ordered queue plus the response to calls beyond the queue."""

    queue: list[FixtureEntry] = Field(default_factory=list, max_length=100)
    default: Any = None


class ReferenceToolCall(Strict):
    """One tool call of a reference turn. ``after_results``: send it (and the calls after it, up to
    the next one marked so) in a new assistant message, after the results of the calls before it
    have come back; a call that uses a value another call returns must wait for that result
    (the audit's ``audit.reference_noncausal``)."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    after_results: bool = False


class ReferenceTurn(Strict):
    """One candidate turn of a correct call. Turn 0 is the greeting; turn k answers caller turn k.

    Replayed as assistant messages: first ``before_tools`` (speech said while calling, e.g. "let me
    check that") together with ``tool_calls`` up to the first one marked ``after_results``; each
    call marked so opens a further message (no speech) sent after the previous message's results;
    then, after the last results, ``speech``. With no tool calls the turn is the single message
    ``speech``.
    """

    def tool_rounds(self) -> list[list[tuple[int, ReferenceToolCall]]]:
        """The turn's tool calls grouped by message, each with its index in ``tool_calls``."""
        rounds: list[list[tuple[int, ReferenceToolCall]]] = []
        for i, c in enumerate(self.tool_calls):
            if not rounds or c.after_results:
                rounds.append([])
            rounds[-1].append((i, c))
        return rounds

    before_tools: str | None = Field(default=None, max_length=4000)
    tool_calls: list[ReferenceToolCall] = Field(default_factory=list, max_length=10)
    speech: str | None = Field(default=None, max_length=4000)


class Scenario(Strict):
    """``agents/<agent>/scenarios/<id>.yaml``: one test call for one agent."""

    id: str = Field(pattern=ID_PATTERN)
    agent: str
    title: str = Field(default="", max_length=300)
    goal: str = Field(
        min_length=1, max_length=4000, description="What a correct call achieves (graders only)."
    )
    language: str = Field(min_length=2, max_length=35)
    difficulty: Literal["medium", "hard"]
    tags: list[str] = Field(default_factory=list)
    variables: dict[str, str] = Field(default_factory=dict, description="Extra prompt template variables.")
    brief: Brief
    hidden_state: dict[str, Any] = Field(default_factory=dict)
    secrets: list[Annotated[str, Field(min_length=1, max_length=400)]] = Field(
        default_factory=list, max_length=100,
        description="Values the candidate must never read in the instructions or tool schemas, "
        "whatever their form (callbench audit's leak check; identifying hidden values are found "
        "without being listed). Seen by no model.",
    )
    caller_known: dict[str, Annotated[str, Field(min_length=1, max_length=400)]] = Field(
        default_factory=dict,
        description="Known facts (key of brief.known_facts -> the reason) that the caller really knows "
        "although the backend holds the same value (their own name or account number); without it a "
        "known fact equal to a hidden or fixture value is an isolation problem. Seen by no model.",
    )
    channel: ChannelProgram = Field(default_factory=ChannelProgram)
    fixtures: dict[str, ToolFixtures] = Field(default_factory=dict)
    action_checks: list[ActionCheck] = Field(default_factory=list, max_length=50)
    state_checks: list[StateCheck] = Field(default_factory=list, max_length=10)
    criteria: list[Criterion] = Field(default_factory=list, max_length=50)
    reference_path: list[ReferenceTurn] | None = None
    no_critical_reason: str = Field(
        default="", max_length=2000,
        description="Why this scenario has no outcome-critical check (for example a call whose right "
        "outcome is only said, never done); without it, a scenario with no critical item is a "
        "validation problem. Its episodes then have no outcome and pass on the overall score alone.",
    )

    @property
    def critical_check_ids(self) -> list[str]:
        """Ids of the action and state checks that decide the outcome, in scenario order."""
        return [c.id for c in self.action_checks if c.is_critical] + [
            c.id for c in self.state_checks if c.is_critical
        ]

    def caller_turns_needed(self) -> int:
        """Caller turns the authored correct call takes: one per reference turn after the greeting
        (``len(reference_path) - 1``), else one per plan step when there is no reference path."""
        if self.reference_path:
            return max(0, len(self.reference_path) - 1)
        return len(self.brief.plan)

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        return sorted(set(v))


class LoadedAgent(BaseModel):
    """An agent with its rendered-instructions template text and its scenarios."""

    config: AgentConfig
    instructions_template: str
    scenarios: list[Scenario] = Field(default_factory=list)
    state_tables: dict[str, Any] | None = Field(
        default=None, description="The initial state tables (table -> key -> record), read-only."
    )
    state_sha256: str | None = None


class Bundle(BaseModel):
    """A loaded bundle: metadata, agents (by id, sorted), content hash and root folder."""

    meta: BundleMeta
    agents: dict[str, LoadedAgent]
    content_hash: str
    root: str

    def scenarios(self) -> list[tuple[LoadedAgent, Scenario]]:
        """All (agent, scenario) pairs in a stable order: agent id, then scenario id."""
        return [
            (a, s) for _, a in sorted(self.agents.items()) for s in sorted(a.scenarios, key=lambda s: s.id)
        ]

    def scenario(self, scenario_id: str) -> tuple[LoadedAgent, Scenario]:
        """Look up a scenario by id; raises ``KeyError`` with the id when absent."""
        for a, s in self.scenarios():
            if s.id == scenario_id:
                return a, s
        raise KeyError(f"no scenario {scenario_id!r} in bundle {self.meta.name!r}")


__all__ = [
    "CONTRAST_KINDS", "DIAGNOSTIC_LABELS", "ID_PATTERN", "ActionCheck", "AgentConfig", "Anchors", "AsrEvent",
    "Brief", "Bundle", "BundleMeta", "CallEndingTool", "ChannelProgram", "ContrastKind", "CountBounds",
    "Criterion", "Diagnostic", "Expectation", "FixtureEntry", "Importance", "LoadedAgent", "Pillar",
    "PlanStep", "ReferenceToolCall", "ReferenceTurn", "Scenario", "StateCheck", "Strict", "ToolFixtures",
    "ToolSpec", "VadSplit",
]
