"""Typed bundle objects (pydantic v2): the one format every later stage reads.

Mirrors the paper's formal objects: an agent configuration a = (p_a instructions, T_a tools,
success conditions of call-ending tools); a scenario s = (U_s caller brief, W_s hidden backend
state, h_s channel program, A_s action checks, C_s criteria), plus an optional reference path
(the candidate side of one correct call). Field names are the on-disk YAML/JSON keys.
Unknown keys are rejected (``extra="forbid"``) so a typo is a validation error, not a silent default.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from callbench.bundle.audio import AudioChannel
from callbench.bundle.matchers import Matcher
from callbench.bundle.state.models import StateSpec

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


# ---------------------------------------------------------------- bundle and agent


ContrastKind = Literal["no_tools", "wrong_argument", "cut_short"]
"""The contrastive known-answer traces ``callbench audit --judges`` derives from each reference
replay (:mod:`callbench.audit.contrast`): ``no_tools`` its words without its tool
calls and results, ``wrong_argument`` one key argument of a tool call changed to a wrong value (the
backend answers with its mismatch or default response), ``cut_short`` the call cut after the
candidate's first answer to the caller."""
CONTRAST_KINDS: tuple[ContrastKind, ...] = ("no_tools", "wrong_argument", "cut_short")
Expectation = Literal["met", "not_met", "any"]
"""A criterion's known label on an audit trace: met, not_met, or any (no known answer: not scored)."""


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


# ---------------------------------------------------------------- scenario: grading


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
