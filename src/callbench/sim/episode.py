"""One episode: one complete simulated phone call, returned as a :class:`~callbench.trace.Trace`.

Paper: "One episode is one complete simulated phone call, saved as an indexed trace and scored as a
whole." The loop itself is :class:`callbench.sim.conversation.Conversation`; this module adds what
surrounds it: the candidate's tool schemas (with ``concluding_message`` on call-ending tools), the
caller prompt, seeds, conversation reruns after caller-validation failures, skipping, and the
assembly of the trace. Saving is the runner's job; this returns complete traces only.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from callbench.bundle.fixtures import ResolvedFixtures
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.personas import Persona
from callbench.bundle.render import render_instructions, static_prefix_chars
from callbench.bundle.state.engine import StateStore
from callbench.models.base import InfrastructureError, ModelClient, ToolSchema, Usage, first_user_message
from callbench.models.deployed.base import as_deployed
from callbench.models.faults import note_skip
from callbench.sim.backend import Backend
from callbench.sim.caller import build_caller_prompt
from callbench.sim.channel import Channel
from callbench.sim.conversation import CallerFailed, Conversation
from callbench.sim.seeds import episode_seeds
from callbench.sim.tools import candidate_tools
from callbench.sim.voice.pipeline import VoiceLine
from callbench.trace import CallerView, CandidateView, EndReason, RoleInfo, Trace


class LoopLimits(BaseModel):
    """Limits of the episode loop (paper: "up to ten tool calls", "at most thirty turns", "one more
    attempt", "rerun up to three times")."""

    model_config = ConfigDict(extra="forbid")
    max_caller_turns: int = Field(default=30, ge=1, le=500)
    max_tool_calls_per_turn: int = Field(default=10, ge=0, le=200)
    empty_first_user_message: bool = Field(
        default=False,
        description="Send an empty user message before the greeting (chat templates that need one); "
        "overrides the candidate's first_user_message setting.",
    )
    caller_turn_attempts: int = Field(default=2, ge=1, le=10)
    conversation_reruns: int = Field(default=3, ge=0, le=10)


@dataclass(frozen=True)
class EpisodeConstants:
    """What every episode of one (agent, scenario) pair computes before its first request, the
    same whatever the seed or repeat: the rendered operating document and its SHA-256 (hex), the
    count of its leading characters shared by every scenario (:func:`static_prefix_chars`), the
    candidate's tools (:func:`candidate_tools`), the caller's system prompt and the scenario's
    resolved fixtures. Shared by the episodes of a run: nothing here may be mutated."""

    instructions: str
    instructions_sha256: str
    static_chars: int
    tools: list[ToolSchema]
    caller_prompt: str
    fixtures: ResolvedFixtures


MAX_CACHED_PAIRS = 4096
"""(agent, scenario) pairs whose :class:`EpisodeConstants` are kept (least recently used dropped);
a paper-shaped run has 490 scenarios."""
_constants_lock = threading.Lock()
_constants: OrderedDict[tuple[int, int], tuple[LoadedAgent, Scenario, EpisodeConstants]] = OrderedDict()


def episode_constants(agent: LoadedAgent, scenario: Scenario) -> EpisodeConstants:
    """The :class:`EpisodeConstants` of ``scenario`` under ``agent``, computed once per pair of
    objects (keyed by identity: a loaded bundle is not modified while it runs; the cache holds the
    two objects so their ids are not reused while cached). Raises ``ValueError`` as
    :func:`render_instructions` does and :class:`callbench.bundle.references.ReferenceError_` for
    a fixture reference that does not resolve (nothing is cached then)."""
    key = (id(agent), id(scenario))
    with _constants_lock:
        hit = _constants.get(key)
        if hit is not None and hit[0] is agent and hit[1] is scenario:
            _constants.move_to_end(key)
            return hit[2]
    instructions = render_instructions(agent, scenario)
    made = EpisodeConstants(
        instructions=instructions,
        instructions_sha256=hashlib.sha256(instructions.encode()).hexdigest(),
        static_chars=static_prefix_chars(agent, instructions),
        tools=candidate_tools(agent.config),
        caller_prompt=build_caller_prompt(scenario.brief),
        fixtures=ResolvedFixtures(agent.config, scenario),
    )
    with _constants_lock:
        _constants[key] = (agent, scenario, made)
        while len(_constants) > MAX_CACHED_PAIRS:
            _constants.popitem(last=False)
    return made


def new_state_store(agent: LoadedAgent) -> StateStore | None:
    """A fresh state for one conversation of ``agent`` (None when the agent declares no state):
    the loaded tables are shared read-only, each call's changes are its own. Raises ``ValueError``
    when the agent declares a state whose tables did not load (a bundle error)."""
    if agent.config.state is None:
        return None
    if agent.state_tables is None:
        raise ValueError(f"agent {agent.config.id!r}: its state tables are not loaded")
    return StateStore(agent.state_tables, agent.config.state, agent.state_sha256 or "")


def role_info(client: ModelClient) -> RoleInfo:
    """Which model played a role. ``embedded_smoke_test_model`` is the client's own attribute when it
    has one, else true for the bare ``local`` spec (the embedded default weights)."""
    embedded = getattr(client, "embedded_smoke_test_model", client.spec == "local")
    return RoleInfo(spec=client.spec, settings=client.settings, embedded_smoke_test_model=bool(embedded))


async def run_episode(
    agent: LoadedAgent,
    scenario: Scenario,
    *,
    candidate: ModelClient,
    caller: ModelClient,
    bundle_name: str,
    bundle_version: str,
    bundle_hash: str,
    episode_id: str,
    run_seed: int,
    repeat: int,
    limits: LoopLimits | None = None,
    code_version: str = "",
    voice: VoiceLine | None = None,
    persona: Persona | None = None,
) -> Trace:
    """Run one episode of ``scenario`` with ``candidate`` as the agent and ``caller`` as the caller.

    Never raises for model or provider failures: an :class:`InfrastructureError` that escapes a
    client ends the episode as ``SKIPPED`` with ``skip_reason`` ``"infrastructure: ..."``; a caller
    that fails validation in every conversation (1 + ``conversation_reruns``) ends as ``SKIPPED``
    with ``"caller_validation: ..."``. A skipped trace keeps its last conversation for diagnosis.
    Usage sums every request of the episode, reruns included, by role (``candidate``, ``caller``).

    Raises ``ValueError`` (before any model call) for bundle errors: instructions that do not render,
    or a fixture reference that does not resolve; validation (``callbench validate``) catches both.

    A deployed candidate (:mod:`callbench.models.deployed`) is driven through its session by
    :class:`~callbench.sim.deployed.DeployedConversation`; it is sent no first user message (its
    platform starts the call), and the trace's ``deployed`` record says which adapter drove it,
    what it could not observe and how long each reply took.

    ``voice`` makes the channel a voice channel (:mod:`callbench.sim.voice`): each caller turn is
    spoken, carried over the line and recognised, and its ``CallerTurn.voice`` records how.

    ``persona`` (a persona sweep) gives the caller the persona's wording for the scenario's
    language in place of the brief's own manner (:func:`build_caller_prompt`), derives the seeds
    with the persona id (:func:`episode_seeds`) and records the id in the trace. Raises
    ``ValueError`` when the persona has no wording for the scenario's language.
    """
    limits = limits or LoopLimits()
    # rendered instructions, tools, caller prompt and resolved fixtures (a bundle error raises here)
    const = episode_constants(agent, scenario)
    instructions, tools, caller_prompt = const.instructions, const.tools, const.caller_prompt
    if persona is not None:
        wording = persona.wording_for(scenario.language)
        if wording is None:
            raise ValueError(f"persona {persona.id!r} has no wording for {scenario.language} "
                             f"(scenario {agent.config.id}/{scenario.id})")
        caller_prompt = build_caller_prompt(scenario.brief, wording)
    seeds = episode_seeds(run_seed, scenario.id, repeat, persona.id if persona is not None else None)
    usage: dict[str, Usage] = {"candidate": Usage(), "caller": Usage()}

    deployed = as_deployed(candidate)

    def new_conversation() -> Conversation:
        kind: type[Conversation] = Conversation
        extra: dict[str, object] = {}
        if deployed is not None:
            from callbench.sim.deployed import DeployedConversation

            kind, extra = DeployedConversation, {"deployed": deployed}
        return kind(
            **extra,
            scenario=scenario,
            agent_id=agent.config.id,
            episode_id=episode_id,
            instructions=instructions,
            tools=tools,
            caller_prompt=caller_prompt,
            backend=Backend(agent.config, scenario, seeds.backend, fixtures=const.fixtures,
                            state=new_state_store(agent), tools=tools),
            channel=Channel(scenario.channel, seeds.channel, scenario.brief.known_facts, voice=voice,
                            language=scenario.language),
            candidate=candidate,
            caller=caller,
            usage=usage,
            max_caller_turns=limits.max_caller_turns,
            max_tool_calls=limits.max_tool_calls_per_turn,
            first_user_message=None if deployed is not None else "" if limits.empty_first_user_message
            else first_user_message(candidate, agent.config.first_user_message,
                                    agent.config.first_user_message_text),
            caller_attempts=limits.caller_turn_attempts,
            static_system_chars=const.static_chars,
        )

    discarded: list[str] = []  # rejections of conversations a rerun replaced

    def trace(conv: Conversation, end: EndReason, reruns: int, skip_reason: str | None = None) -> Trace:
        return Trace(
            episode_id=episode_id,
            bundle_name=bundle_name,
            bundle_version=bundle_version,
            bundle_hash=bundle_hash,
            agent_id=agent.config.id,
            scenario_id=scenario.id,
            language=scenario.language,
            difficulty=scenario.difficulty,
            repeat=repeat,
            seeds=seeds,
            candidate=role_info(candidate),
            caller=role_info(caller),
            candidate_view=CandidateView(
                instructions_sha256=const.instructions_sha256, tools=tools
            ),
            caller_view=CallerView(system_prompt=caller_prompt),
            messages=conv.messages,
            caller_turns=conv.caller_turns,
            tool_events=conv.tool_events,
            unreached_channel_events=conv.channel.unreached(),
            end_reason=end,
            skip_reason=skip_reason,
            reruns=reruns,
            rerun_rejections=list(discarded),
            usage=dict(sorted(usage.items())),
            code_version=code_version,
            settings=limits.model_dump(mode="json"),
            state=conv.backend.state.record() if conv.backend.state is not None else None,
            deployed=getattr(conv, "record", None),
            latency=conv.latency.episode(),
            persona=persona.id if persona is not None else None,
            agent_speech=conv.agent_speech,
        )

    failure: tuple[Conversation, CallerFailed] | None = None
    for rerun in range(limits.conversation_reruns + 1):
        if failure is not None:  # the failed conversation is replaced: keep its rejections
            discarded.extend(r for turn in failure[0].caller_turns for r in turn.rejections)
        conv = new_conversation()
        try:
            end = await conv.run()
        except CallerFailed as e:
            failure = (conv, e)
            continue
        except InfrastructureError as e:
            note_skip(e.role, e.kind)
            return trace(conv, EndReason.SKIPPED, rerun, f"infrastructure: {e}")
        return trace(conv, end, rerun)
    assert failure is not None
    conv, err = failure
    return trace(conv, EndReason.SKIPPED, limits.conversation_reruns, f"caller_validation: {err}")
