"""The trace: the one contract between simulation, grading and reporting (paper: "The saved trace
is the only object anything is graded on").

One JSON file per episode. ``messages`` is exactly the candidate's view of the conversation
(system instructions, observed caller fragments as user messages, its own speech and tool calls,
tool results), each with a stable ``index``. ``caller_turns`` keeps, per caller turn, the intended
text, the observed fragments, the expressed plan steps and the channel events; ``tool_events``
keeps every tool call with its parsed arguments, parse errors, fixture matching and result.
Graders cite ``messages[i].index`` values.
"""

from __future__ import annotations

import hashlib
import json
import os as os  # the modules the atomic writes use (trace/files.py), still reachable here for code
import tempfile as tempfile  # that patched them through this module before it became a package
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from callbench.bundle.state.models import StateChange, StateRecord
from callbench.models.base import ModelSettings, ToolCall, ToolSchema, Usage
from callbench.models.output_limits import safe_json_text
from callbench.textfile import read_text
from callbench.trace.files import atomic_write_bytes, atomic_write_text
from callbench.trace.latency import EpisodeLatency, RequestLatency, TurnLatency
from callbench.trace.voice import AgentSpeech, Entity, SpokenPart, VoiceEvent, WordOp

TRACE_SCHEMA_VERSION = 1


class EndReason(StrEnum):
    """Why an episode ended."""

    CALL_ENDED = "call_ended"  # a call-ending tool result met its success condition
    CALLER_DONE = "caller_done"  # the caller ended the call with every plan step expressed
    # The caller said done with plan steps open. Scored like any other call (the candidate's score:
    # the unmet checks and criteria count against it, as a real caller may hang up); counted per
    # candidate in the simulator ledger (report/model/ledger.py, ``caller_done_early``) so a simulator
    # that quits early is visible beside the scores.
    CALLER_DONE_EARLY = "caller_done_early"
    MAX_TURNS = "max_turns"  # the caller-turn limit was reached
    SKIPPED = "skipped"  # simulator or infrastructure failure: excluded from scores


class TraceMessage(BaseModel):
    """One message as the candidate saw or produced it. ``caller_turn``/``fragment`` locate user
    messages in ``caller_turns``; ``tool_event`` locates tool results in ``tool_events``."""

    index: int
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    caller_turn: int | None = None
    fragment: int | None = None
    tool_event: int | None = None
    candidate_turn: int | None = None
    error: str | None = None  # e.g. a candidate output that violated the protocol (recorded, graded)


class ChannelEvent(BaseModel):
    """One channel transformation: authored ASR event, seeded noise or VAD split."""

    kind: Literal["drop", "double", "substitute", "seeded_substitute", "vad_split"]
    source: Literal["authored", "seeded"]
    turn: int
    span: str = ""
    replacement: str | None = None
    applied: bool
    detail: str = ""  # what changed, or why it did not apply
    program_path: str | None = None  # authored events: scenario field path, e.g. channel.asr_events.2


class CallerTurn(BaseModel):
    """One caller turn: ``intended`` is what the simulator said; ``observed`` what the candidate
    got (one string per fragment); ``message_indices`` the user messages carrying the fragments."""

    index: int  # 1-based caller turn number
    intended: str
    observed: list[str]
    message_indices: list[int]
    expressed_steps: list[str] = Field(default_factory=list)
    done: bool = False
    channel_events: list[ChannelEvent] = Field(default_factory=list)
    voice: VoiceEvent | None = None  # the voice channel's record (None: text channel)
    attempts: int = 1
    rejections: list[str] = Field(default_factory=list)


class MatcherOutcome(BaseModel):
    field: str
    ok: bool
    reason: str


class SchemaError(BaseModel):
    """One way a call's arguments break the tool's JSON Schema: ``path`` (RFC 6901 JSON pointer
    into the arguments; "" is the arguments object), the failing ``keyword`` and the message."""

    path: str
    keyword: str
    message: str


class ToolEvent(BaseModel):
    """One tool call and the backend's answer."""

    index: int
    candidate_turn: int
    message_index: int  # the assistant message that made the call
    result_message_index: int  # the tool message carrying the result
    tool_call_id: str
    original_tool_call_id: str | None = None  # set when a duplicate id was replaced
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None = None
    parse_error: str | None = None
    double_encoded: bool = False
    known_tool: bool = True
    queue_position: int | None = None  # j: prior calls to this tool (0-based)
    outcome: Literal[
        "authored", "mismatch", "default", "unknown_tool", "parse_error", "limit_reached", "after_call_ended",
        "state", "state_error", "schema_error",
    ]  # state / state_error: answered by the agent's stateful backend (ok / refused with an error);
    # schema_error: arguments outside the tool's schema, rejected without running (sim/call_schema.py)
    executed: bool = True  # False: not sent to the backend (tool-call limit reached, the call had ended,
    # or the arguments broke the tool's schema)
    schema_errors: list[SchemaError] = Field(default_factory=list)  # located; kept in accept mode too
    matcher_results: list[MatcherOutcome] = Field(default_factory=list)
    result: Any = None
    call_ending: bool = False
    success_condition_met: bool | None = None
    ended_call: bool = False
    state_changes: list[StateChange] = Field(default_factory=list)  # fields this call changed, in order


class RoleInfo(BaseModel):
    """Which model played a role, with its settings (no secrets)."""

    spec: str
    settings: ModelSettings = Field(default_factory=ModelSettings)
    embedded_smoke_test_model: bool = False


class EpisodeSeeds(BaseModel):
    run: int
    episode: int
    channel: int
    backend: int
    caller: int
    candidate: int


class CandidateView(BaseModel):
    """What the candidate was given besides the messages: rendered instructions and tools."""

    instructions_sha256: str
    tools: list[ToolSchema]


class CallerView(BaseModel):
    """The caller simulator's system prompt (built from the brief only)."""

    system_prompt: str


class ToolRoundTrip(BaseModel):
    """One tool call as the webhook saw it: its event, when it arrived (seconds after the agent
    was sent the caller's turn) and how long the webhook took to answer it (seconds)."""

    tool_event: int
    arrived_s: float
    answer_s: float


class DeployedTurn(BaseModel):
    """One agent reply of a deployed candidate: ``reply_s`` is the wall time from sending the
    caller's text to receiving the reply over the adapter (seconds; tool round trips included)."""

    candidate_turn: int
    reply_s: float
    tool_round_trips: list[ToolRoundTrip] = Field(default_factory=list)


class LateToolCall(BaseModel):
    """A tool call that reached the webhook after its episode ended: answered with an error, never
    sent to the backend."""

    name: str
    raw_arguments: str
    route: str  # vapi, retell or generic


class DeployedRecord(BaseModel):
    """How a deployed candidate was driven: the ``adapter`` (http, vapi, retell...), what it
    could not observe of the agent (``unobserved``: system prompt, token usage...), the SHA-256 of
    the deployed configuration read before the run (None: not readable), whether the agent or
    its platform ended the call without a call-ending tool (``ended_by_agent``), per-reply timings,
    and tool calls that arrived after the episode ended. The candidate's view
    (``instructions_sha256``) is the bundle's document, which a deployed agent was never sent."""

    adapter: str
    unobserved: list[str] = Field(default_factory=list)
    config_sha256: str | None = None
    ended_by_agent: bool = False
    turns: list[DeployedTurn] = Field(default_factory=list)
    late_tool_calls: list[LateToolCall] = Field(default_factory=list)
class Trace(BaseModel):
    """One episode. Saved atomically as ``traces/<episode_id>.json.gz`` (gzip JSON; older runs:
    ``.json``; :mod:`callbench.runfolder.episode_files`)."""

    schema_version: int = TRACE_SCHEMA_VERSION
    episode_id: str
    bundle_name: str
    bundle_version: str
    bundle_hash: str
    agent_id: str
    scenario_id: str
    language: str
    difficulty: str
    repeat: int
    seeds: EpisodeSeeds
    candidate: RoleInfo
    caller: RoleInfo
    candidate_view: CandidateView
    caller_view: CallerView
    messages: list[TraceMessage] = Field(default_factory=list)
    caller_turns: list[CallerTurn] = Field(default_factory=list)
    tool_events: list[ToolEvent] = Field(default_factory=list)
    unreached_channel_events: list[ChannelEvent] = Field(default_factory=list)  # authored, turn never came
    end_reason: EndReason
    skip_reason: str | None = None
    reruns: int = 0  # conversations restarted after caller validation failures
    # caller rejections inside conversations a rerun discarded (the kept conversation's own are in
    # caller_turns[].rejections), oldest first
    rerun_rejections: list[str] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(default_factory=dict)  # by role
    code_version: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)  # loop limits etc.
    state: StateRecord | None = None  # stateful backend: initial hash + final version of changed records
    deployed: DeployedRecord | None = None  # a deployed candidate's adapter, blind spots and timings
    latency: EpisodeLatency | None = None
    """Timings (None in traces saved before they were recorded): left out of :meth:`sha256`."""
    persona: str | None = None
    """The persona library id the caller played in a persona sweep (None: the scenario's own
    manner); its wording is in ``caller_view.system_prompt``."""
    agent_speech: list[AgentSpeech] = Field(default_factory=list)
    """The candidate's speech as the voice channel spoke it, per candidate turn that said
    something (empty: the agent's side was not spoken)."""

    @property
    def skipped(self) -> bool:
        return self.end_reason == EndReason.SKIPPED

    def canonical_json(self, *, content_only: bool = False) -> str:
        """Deterministic JSON (sorted keys, compact separators): equal traces give equal bytes.
        Compact so that the C encoder serialises it (``indent`` falls back to the pure-Python
        encoder, several times slower); readers accept any JSON layout. ``latency`` is left out when
        it is None (a trace saved before timings keeps its bytes) and always with ``content_only``;
        ``deployed`` and ``persona`` are left out when None (traces of model candidates and of runs
        without personas keep their bytes). A
        lone surrogate left in a string is written as the text of its escape
        (:func:`~callbench.models.output_limits.safe_json_text`), so the text always encodes as
        UTF-8 and the hash is over what is stored."""
        exclude = self._left_out()
        if not content_only and self.latency is not None:
            exclude.discard("latency")
        return _canonical(self.model_dump(mode="json", exclude=exclude))

    def _left_out(self) -> set[str]:
        """The top-level fields the content text leaves out: ``latency`` always (timings are not
        content), and the optional records that are empty, so traces saved before each existed keep
        their bytes (``deployed`` for model candidates, ``persona`` outside persona sweeps,
        ``agent_speech`` when the agent's side was not spoken)."""
        exclude = {"latency"}
        if self.deployed is None:
            exclude.add("deployed")
        if self.persona is None:
            exclude.add("persona")
        if not self.agent_speech:
            exclude.add("agent_speech")
        return exclude

    def sha256(self) -> str:
        """SHA-256 of the content: :meth:`canonical_json` without the timings, so a streamed and a
        non-streamed run (or a replay) of the same conversation hash alike."""
        return hashlib.sha256(self.canonical_json(content_only=True).encode()).hexdigest()

    def canonical_texts(self) -> tuple[str, str]:
        """``(canonical_json(), canonical_json(content_only=True))`` from one dump and one
        encoding: the file text a run saves and the text :meth:`sha256` hashes (the same string
        when there are no timings). The top-level keys are sorted, so the file text is the keys
        before ``"latency"``, then ``"latency"``, then the keys after it: the two halves are
        encoded once and joined with and without the timings."""
        data = self.model_dump(mode="json", exclude=self._left_out())
        if self.latency is None:
            text = _canonical(data)
            return text, text
        before = _canonical({k: v for k, v in data.items() if k < "latency"})[1:-1]
        after = _canonical({k: v for k, v in data.items() if k > "latency"})[1:-1]
        timings = '"latency":' + _canonical(self.latency.model_dump(mode="json"))
        return ("{" + ",".join(p for p in (before, timings, after) if p) + "}",
                "{" + ",".join(p for p in (before, after) if p) + "}")


def _canonical(value: Any) -> str:
    """The JSON text :meth:`Trace.canonical_json` writes for ``value`` (sorted keys, compact)."""
    return safe_json_text(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def save_trace(trace: Trace, path: Path) -> None:
    """Atomically save ``trace`` as canonical JSON at ``path``."""
    atomic_write_text(path, trace.canonical_json() + "\n")


def load_trace(path: Path) -> Trace:
    """Load a trace file of either form a run folder holds (gzip ``.json.gz`` or plain ``.json``:
    :mod:`callbench.runfolder.episode_files`, read by :mod:`callbench.textfile`); raises
    ``ValueError`` naming the file on bad content."""
    try:
        return Trace.model_validate_json(read_text(path))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable trace: {e}") from None


__all__ = [
    "TRACE_SCHEMA_VERSION", "AgentSpeech", "CallerTurn", "CallerView", "CandidateView", "ChannelEvent",
    "DeployedRecord", "DeployedTurn", "EndReason", "Entity", "EpisodeLatency", "EpisodeSeeds",
    "LateToolCall", "MatcherOutcome", "RequestLatency", "RoleInfo", "SchemaError", "SpokenPart",
    "ToolEvent", "ToolRoundTrip", "Trace", "TraceMessage", "TurnLatency", "VoiceEvent", "WordOp",
    "atomic_write_bytes", "atomic_write_text", "load_trace", "save_trace",
]
