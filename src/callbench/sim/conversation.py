"""One run of the conversation loop (paper, "The candidate model speaks first ... Then the loop
begins"); :mod:`callbench.sim.episode` reruns it when the caller simulator fails validation.

A conversation owns fresh backend, channel and trace lists. Requests are built from those lists
through :mod:`callbench.sim.views`, so the trace is by construction what each party saw.
"""

from __future__ import annotations

import asyncio
from typing import Any

from callbench.bundle.models import Scenario
from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelClient,
    ModelOutputError,
    ModelRequest,
    RequestContext,
    ToolCall,
    ToolSchema,
    Usage,
)
from callbench.models.output_limits import safe_error_text, safe_response, safe_text
from callbench.sim.backend import Backend, CallSite, dump_result
from callbench.sim.caller import SCHEMA_NAME, CallerOutput, Verdict, caller_schema, validate_turn
from callbench.sim.channel import Channel
from callbench.sim.latency import LatencyRecorder
from callbench.sim.text import nfc, tidy
from callbench.sim.views import REPLY_SEP, caller_messages, candidate_messages, speech_parts, with_retry_note
from callbench.sim.voice.score import speakable
from callbench.trace import AgentSpeech, CallerTurn, EndReason, ToolEvent, TraceMessage

_RAW_SHOWN = 300


class CallerFailed(Exception):
    """The caller simulator produced no valid turn within its attempts."""

    def __init__(self, turn: int, rejections: list[str]) -> None:
        self.turn = turn
        self.rejections = rejections
        last = rejections[-1] if rejections else "no reply"
        super().__init__(f"caller turn {turn} rejected {len(rejections)} times; last: {last}")


class Conversation:
    """State of one conversation attempt. ``usage`` is shared across attempts (by role)."""

    def __init__(
        self,
        *,
        scenario: Scenario,
        agent_id: str,
        episode_id: str,
        instructions: str,
        tools: list[ToolSchema],
        caller_prompt: str,
        backend: Backend,
        channel: Channel,
        candidate: ModelClient,
        caller: ModelClient,
        usage: dict[str, Usage],
        max_caller_turns: int,
        max_tool_calls: int,
        first_user_message: str | None,
        caller_attempts: int,
        static_system_chars: int = 0,
    ) -> None:
        self.scenario = scenario
        self.agent_id = agent_id
        self.episode_id = episode_id
        self.tools = tools
        self.caller_prompt = caller_prompt
        self.backend = backend
        self.channel = channel
        self.candidate = candidate
        self.caller = caller
        self.usage = usage
        self.max_caller_turns = max_caller_turns
        self.max_tool_calls = max_tool_calls
        self.first_user_message = first_user_message
        self.caller_attempts = caller_attempts
        self.static_system_chars = static_system_chars
        self.messages: list[TraceMessage] = []
        self.caller_turns: list[CallerTurn] = []
        self.tool_events: list[ToolEvent] = []
        self.expressed: list[str] = []
        self.agent_speech: list[AgentSpeech] = []  # the candidate's side as the voice channel spoke it
        self._ids: set[str] = set()
        self._chat: list[ChatMessage] = []  # candidate_messages(self.messages[:self._chat_upto])
        self._chat_upto = 0
        self.latency = LatencyRecorder(scenario.language)  # timings: measurements, not content
        self._add("system", content=instructions)

    # ------------------------------------------------------------------ helpers

    def _add(self, role: str, **kw: Any) -> TraceMessage:
        m = TraceMessage(index=len(self.messages), role=role, **kw)
        self.messages.append(m)
        return m

    def _candidate_messages(self) -> list[ChatMessage]:
        """``candidate_messages(self.messages)``, converting only the messages added since the last
        call (trace messages are never changed once added; the view is message by message)."""
        self._chat.extend(candidate_messages(self.messages[self._chat_upto :]))
        self._chat_upto = len(self.messages)
        return list(self._chat)

    def _charge(self, role: str, usage: Usage | None) -> None:
        if usage is not None:
            self.usage[role] = self.usage.get(role, Usage()) + usage

    def _context(self, role: str, turn: int, attempt: int = 0) -> RequestContext:
        return RequestContext(
            role=role,
            episode_id=self.episode_id,
            agent_id=self.agent_id,
            scenario_id=self.scenario.id,
            turn=turn,
            attempt=attempt,
        )

    def _unique_ids(self, calls: list[ToolCall], turn: int) -> list[tuple[ToolCall, str | None]]:
        """Give every call an id unused so far in the conversation; returns (call, original id if changed)."""
        out: list[tuple[ToolCall, str | None]] = []
        for pos, call in enumerate(calls):
            new = call.id
            if not new or new in self._ids:
                stem = call.id or f"call_t{turn}_{pos}"
                new, n = stem, 1
                while new in self._ids:
                    new = f"{stem}~{n}"
                    n += 1
            self._ids.add(new)
            out.append((call.model_copy(update={"id": new}), call.id if new != call.id else None))
        return out

    # ------------------------------------------------------------------ candidate

    async def candidate_turn(self, turn: int) -> bool:
        """Run candidate turn ``turn`` until it answers without tool calls; True if the call ended.

        Up to ``max_tool_calls`` calls are executed in the turn; later calls get a ``limit_reached``
        result, and after the first message with such a call the candidate gets one more request,
        whose tool calls (if any) are refused too and end the turn. A candidate
        :class:`ModelOutputError` is recorded as an assistant message with ``error`` and ends the turn.
        """
        executed = 0
        refusal_rounds = 0
        while True:
            self.latency.segment()
            req = ModelRequest(
                messages=self._candidate_messages(),
                tools=self.tools,
                context=self._context("candidate", turn),
                static_system_chars=self.static_system_chars,
            )
            began = self.latency.begin()
            try:
                resp = safe_response(await self.candidate.complete(req))
            except ModelOutputError as e:
                self.latency.record(role="candidate", turn=turn, attempt=0, began=began, response=None,
                                    timing=e.timing)
                self._charge("candidate", e.usage)
                err = safe_text(str(e) or type(e).__name__)
                if e.raw:
                    err += f" | raw output: {safe_text(e.raw[:2000])}"
                self._add("assistant", candidate_turn=turn, error=err)
                return False
            timed = self.latency.record(role="candidate", turn=turn, attempt=0, began=began, response=resp,
                                        timing=resp.timing, cached=resp.cached)
            self._charge("candidate", resp.usage)
            calls = self._unique_ids(resp.tool_calls, turn)
            msg = self._add(
                "assistant", content=resp.content, tool_calls=[c for c, _ in calls], candidate_turn=turn
            )
            timed.message_index = msg.index
            if not calls:
                return False
            ended = refused = False
            for call, original in calls:
                over = not ended and executed >= self.max_tool_calls
                ev = self.answer_call(call, original, turn, msg.index, ended=ended, executed=executed)
                if over:
                    refused = True
                elif not ended:
                    executed += 1
                    ended = ev.ended_call
            if ended:
                return True
            if refused:
                refusal_rounds += 1
                if refusal_rounds >= 2:
                    return False

    def answer_call(self, call: ToolCall, original: str | None, turn: int, message_index: int, *,
                    ended: bool, executed: int) -> ToolEvent:
        """Answer one tool call of candidate turn ``turn`` (made in message ``message_index``) and
        record it: refused when the call had already ended (``after_call_ended``) or the turn's
        ``executed`` calls reached the limit (``limit_reached``), else dispatched to the backend;
        the event goes into ``tool_events`` and its result into a tool message. Shared by model
        candidates and deployed ones (whose calls arrive on the webhook)."""
        site = CallSite(
            index=len(self.tool_events),
            candidate_turn=turn,
            message_index=message_index,
            result_message_index=len(self.messages),
            tool_call_id=call.id,
            original_tool_call_id=original,
            name=call.name,
            raw_arguments=call.arguments,
        )
        if ended:
            ev = self.backend.refuse(site, "after_call_ended")
        elif executed >= self.max_tool_calls:
            ev = self.backend.refuse(site, "limit_reached", limit=self.max_tool_calls)
        else:
            ev = self.backend.dispatch(site)
        self.tool_events.append(ev)
        self._add("tool", content=dump_result(ev.result), tool_call_id=call.id, name=call.name,
                  tool_event=ev.index, candidate_turn=turn)
        return ev

    # ------------------------------------------------------------------ caller

    async def caller_turn(self, turn: int) -> CallerOutput:
        """Get caller turn ``turn`` (1-based), validate it, render it through the channel and add its
        fragments as user messages. Raises :class:`CallerFailed` after ``caller_attempts`` rejections."""
        brief = self.scenario.brief
        schema = caller_schema(brief, list(self.expressed))
        rejections: list[str] = []
        output: CallerOutput | None = None
        for attempt in range(self.caller_attempts):
            self.latency.segment()
            msgs = caller_messages(self.caller_prompt, self.messages, self.tool_events, self.caller_turns,
                                   heard=self._heard())
            if rejections:
                msgs = with_retry_note(msgs, rejections[-1])
            req = ModelRequest(
                messages=msgs,
                response_schema=schema,
                response_schema_name=SCHEMA_NAME,
                context=self._context("caller", turn, attempt),
            )
            raw: str | None
            began = self.latency.begin()
            try:
                resp = safe_response(await self.caller.complete(req))
                self.latency.record(role="caller", turn=turn, attempt=attempt, began=began, response=resp,
                                    timing=resp.timing, cached=resp.cached)
                self._charge("caller", resp.usage)
                raw = resp.content
                verdict = validate_turn(raw, brief, self.expressed)
            except ModelOutputError as e:
                self.latency.record(role="caller", turn=turn, attempt=attempt, began=began, response=None,
                                    timing=e.timing)
                self._charge("caller", e.usage)
                if e.kind == "empty_reply":  # the provider's anomaly, not the simulator's: skip as
                    # infrastructure (rerun on resume), decisions.md "Fault attribution"
                    raise InfrastructureError(
                        f"caller: {e}", retryable=False, kind="empty_reply", role="caller"
                    ) from None
                raw = safe_error_text(e.raw)
                verdict = Verdict(rejection=f"invalid_json: {safe_text(str(e))}")
            if verdict.output is not None:
                output = verdict.output
                break
            shown = (raw or "")[:_RAW_SHOWN]
            rejections.append(f"{verdict.rejection}{REPLY_SEP}{shown}")
        if output is None:
            self.caller_turns.append(
                CallerTurn(
                    index=turn,
                    intended="",
                    observed=[],
                    message_indices=[],
                    attempts=self.caller_attempts,
                    rejections=rejections,
                )
            )
            raise CallerFailed(turn, rejections)
        steps = [output.expressed_step] if output.expressed_step else []
        self.expressed.extend(steps)
        if self.channel.voice is not None:  # synthesis and recognition take CPU seconds: off the loop
            rendered = await asyncio.to_thread(self.latency.cpu.in_thread, self.channel.render, output.speech,
                                               turn, steps)
        else:
            rendered = self.channel.render(output.speech, turn, steps)
        indices = [
            self._add("user", content=frag, caller_turn=turn, fragment=i).index
            for i, frag in enumerate(rendered.fragments)
        ]
        self.caller_turns.append(
            CallerTurn(
                index=turn,
                intended=output.speech,
                observed=rendered.fragments,
                message_indices=indices,
                expressed_steps=steps,
                done=output.done,
                channel_events=rendered.events,
                voice=rendered.voice,
                attempts=len(rejections) + 1,
                rejections=rejections,
            )
        )
        return output

    # ------------------------------------------------------------------ the agent's side spoken

    def _heard(self) -> dict[int, str] | None:
        """What the caller heard of each candidate turn that went over the line (None: none did)."""
        out = {a.turn: tidy(nfc(a.heard.observed)) or "..." for a in self.agent_speech if a.heard is not None}
        return out or None

    async def speak_agent(self, turn: int) -> None:
        """Speak candidate turn ``turn`` through the voice channel when the run asks for it
        (``Channel.speaks_agent``): its measured duration becomes the turn's spoken time, and in
        ``line`` mode the caller hears what the recogniser made of it. A silent turn is not spoken."""
        if not self.channel.speaks_agent:
            return
        parts = speech_parts(self.messages, self.tool_events).get(turn)
        if not parts:
            return
        # CPU seconds: off the loop, and counted as harness CPU (of the turn's last request) as the
        # caller's rendering is
        spoken = await asyncio.to_thread(self.latency.cpu.in_thread, self.channel.speak_agent, parts, turn)
        self.agent_speech.append(spoken)
        for part in spoken.parts:
            if part.spoken == speakable(part.text):  # a part cut short keeps its estimate (agent.py)
                self.latency.measured[part.text] = part.audio_seconds

    # ------------------------------------------------------------------ loop

    async def run(self) -> EndReason:
        """The loop: candidate greets, then caller turn / candidate turn until an end condition,
        its CPU counted by the latency recorder's meter (harness CPU per request).

        Raises :class:`CallerFailed` or :class:`~callbench.models.base.InfrastructureError`.
        """
        return await self.latency.cpu.drive(self._converse())

    async def _converse(self) -> EndReason:
        if self.first_user_message is not None:  # recorded: a user message no caller spoke
            self._add("user", content=self.first_user_message)
        ended = await self.candidate_turn(0)
        await self.speak_agent(0)
        if ended:
            return EndReason.CALL_ENDED
        for t in range(1, self.max_caller_turns + 1):
            out = await self.caller_turn(t)
            if out.done:
                open_steps = [s.id for s in self.scenario.brief.plan if s.id not in self.expressed]
                return EndReason.CALLER_DONE_EARLY if open_steps else EndReason.CALLER_DONE
            ended = await self.candidate_turn(t)
            await self.speak_agent(t)
            if ended:
                return EndReason.CALL_ENDED
        return EndReason.MAX_TURNS
