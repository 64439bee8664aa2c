"""The conversation loop with a deployed candidate: the same caller, channel, backend and end
rules as :class:`~callbench.sim.conversation.Conversation`, but the candidate is a session
(:mod:`callbench.models.deployed`) and its tool calls arrive out of band on the webhook
(:mod:`callbench.sim.webhook`).

Trace order: the caller's fragments, then each batch of tool calls as it arrives (an assistant
message holding the calls, then one tool message per result, exactly as a model candidate's are
recorded, so the action checks and the state engine read them the same way), then the agent's
reply messages. The agent is sent the caller's observed fragments of the turn joined by a space.
A call that arrives between turns is recorded in the turn it follows. Tool-call limits and
"after the call ended" refusals are the model loop's. The agent or platform ending the call
without a call-ending tool ends the episode as ``call_ended`` with ``ended_by_agent`` set.
"""

from __future__ import annotations

import time
from typing import Any

from callbench.models.base import ModelResponse, ToolCall
from callbench.models.deployed.base import UNOBSERVED, DeployedCandidate, DeployedSession, SessionInfo
from callbench.sim.conversation import Conversation
from callbench.sim.webhook import CallAnswer, EpisodeHook, IncomingCall, webhook_for
from callbench.trace import DeployedRecord, DeployedTurn, EndReason, ToolRoundTrip


class DeployedConversation(Conversation):
    """A :class:`Conversation` whose candidate is ``deployed`` (module docstring). ``record``
    collects the adapter, timings and late calls for the trace."""

    def __init__(self, *, deployed: DeployedCandidate, **kw: Any) -> None:
        super().__init__(**kw)
        self.deployed = deployed
        self.record = DeployedRecord(
            adapter=deployed.adapter, unobserved=list(UNOBSERVED), config_sha256=deployed.config_sha256
        )
        self._turn = 0
        self._turn_start = time.monotonic()
        self._executed = 0
        self._ended = False
        self._refusal_round = False
        self._timing: DeployedTurn | None = None
        self._session: DeployedSession | None = None
        self._hook: EpisodeHook | None = None

    # ------------------------------------------------------------------ webhook side

    def answer_calls(self, calls: list[IncomingCall], route: str, arrived: float) -> list[CallAnswer]:
        """Answer one webhook request's calls from this episode's backend and record them in the
        trace (an assistant message with the calls, then the tool messages)."""
        turn = self._turn
        tool_calls = [ToolCall(id=c.call_id, name=c.name, arguments=c.raw_arguments) for c in calls]
        unique = self._unique_ids(tool_calls, turn)
        msg = self._add("assistant", content=None, tool_calls=[c for c, _ in unique], candidate_turn=turn)
        answers = []
        for call, original in unique:
            runs = not self._ended and self._executed < self.max_tool_calls
            ev = self.answer_call(call, original, turn, msg.index, ended=self._ended, executed=self._executed)
            if runs:
                self._executed += 1
                self._ended = ev.ended_call
            answers.append(CallAnswer(result=ev.result, ended_call=ev.ended_call))
            if self._timing is not None:
                self._timing.tool_round_trips.append(
                    ToolRoundTrip(
                        tool_event=ev.index,
                        arrived_s=round(arrived - self._turn_start, 6),
                        answer_s=round(time.monotonic() - arrived, 6),
                    )
                )
        return answers

    # ------------------------------------------------------------------ candidate side

    async def candidate_turn(self, turn: int) -> bool:
        """Send the caller's observed text of turn ``turn`` (None for the greeting) and record the
        reply; True when the call ended (a call-ending tool succeeded, or the agent hung up)."""
        assert self._session is not None
        text = None
        if turn > 0:
            observed = self.caller_turns[-1].observed if self.caller_turns else []
            text = " ".join(f for f in observed if f)
        self._turn, self._executed = turn, 0
        self._timing = DeployedTurn(candidate_turn=turn, reply_s=0.0)
        self._turn_start = time.monotonic()
        began = self.latency.begin()
        reply = await self._session.send(text)
        self._timing.reply_s = round(time.monotonic() - self._turn_start, 6)
        self.record.turns.append(self._timing)
        # the reply's wall time over the adapter feeds the latency figures like a model's turn (not
        # streamed: the first word is the whole reply; tool round trips happen inside it)
        said = " ".join(m for m in reply.messages if m) or None
        self.latency.record(role="candidate", turn=turn, attempt=0, began=began,
                            response=ModelResponse(content=said), timing=None)
        for said in reply.messages:
            self._add("assistant", content=said, candidate_turn=turn)
        if not reply.messages and not any(
            m.candidate_turn == turn and m.role == "assistant" for m in self.messages
        ):
            self._add("assistant", content=None, candidate_turn=turn)  # silence, recorded as a turn
        if self._ended:
            return True
        if reply.ended:
            self.record.ended_by_agent = True
            return True
        return False

    async def run(self) -> EndReason:
        """Open the agent's session with a hook on the webhook, run the loop of the base class,
        and close both; the hook stays known so a late call is recorded (module docstring)."""
        server = await webhook_for(self.deployed)
        hook = EpisodeHook(episode_id=self.episode_id, handler=self.answer_calls)
        server.registry.register(hook)
        server.tools_of[hook.token] = list(self.tools)
        self._hook = hook
        info = SessionInfo(
            episode_id=self.episode_id,
            agent_id=self.agent_id,
            scenario_id=self.scenario.id,
            tools=list(self.tools),
            **server.urls(hook),
        )
        self._turn_start = time.monotonic()
        try:
            self._session = await self.deployed.open(info)
            for pid in self._session.platform_ids:
                server.registry.bind(hook, pid)
            return await self._loop(server, hook)
        finally:
            server.registry.retire(hook)
            server.tools_of.pop(hook.token, None)
            if self._session is not None:
                await self._session.close()
            self.record.late_tool_calls = list(hook.late)

    async def _loop(self, server: Any, hook: EpisodeHook) -> EndReason:
        if self.first_user_message is not None:
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
            assert self._session is not None
            for pid in self._session.platform_ids:  # a platform may report new ids per turn
                if pid not in hook.platform_ids:
                    server.registry.bind(hook, pid)
            ended = await self.candidate_turn(t)
            await self.speak_agent(t)
            if ended:
                return EndReason.CALL_ENDED
        return EndReason.MAX_TURNS
