"""One scenario's backend served on its own, for a long-lived tunnel (``callbench serve-backend``):
a team points its hosted agent's tools at it and calls the agent by hand, with no run.

Every call gets a fresh backend of the scenario (its fixtures' queues and the agent's state start
over): a request with a platform id not seen before (Vapi's call or chat id, Retell's call or
chat id) opens a new call; the generic route serves one call per token, and
:meth:`StandaloneBackend.new_generic` opens another. Within a call, tool calls are answered by the
same :class:`~callbench.sim.backend.Backend` as in a run (matchers, queues, state engine), and
calls after a call-ending tool succeeded are refused as ``after_call_ended``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from callbench.bundle.models import LoadedAgent, Scenario
from callbench.models.base import ToolSchema
from callbench.sim.backend import Backend, CallSite
from callbench.sim.episode import new_state_store
from callbench.sim.webhook.hooks import CallAnswer, EpisodeHook, IncomingCall
from callbench.sim.webhook.server import WebhookServer
from callbench.trace import ToolEvent


@dataclass
class CallLog:
    """One call's backend and the tool events it answered."""

    number: int
    backend: Backend
    events: list[ToolEvent] = field(default_factory=list)
    ended: bool = False


Listener = Callable[[CallLog, str, ToolEvent], None]
"""``listener(call, route, event)``: told of every answered tool call (the command prints it)."""


class StandaloneBackend:
    """The backend of ``scenario`` of ``agent`` on ``server`` (module docstring). ``seed``: the
    backend seed of every call; ``listener`` hears each answered call."""

    def __init__(
        self,
        server: WebhookServer,
        agent: LoadedAgent,
        scenario: Scenario,
        seed: int = 0,
        listener: Listener | None = None,
    ) -> None:
        self.server = server
        self.agent = agent
        self.scenario = scenario
        self.seed = seed
        self.listener = listener
        self.calls: list[CallLog] = []
        server.registry.fallback = self._new_platform_call

    def _hook(self) -> EpisodeHook:
        log = CallLog(
            number=len(self.calls) + 1,
            backend=Backend(self.agent.config, self.scenario, self.seed, state=new_state_store(self.agent)),
        )
        self.calls.append(log)

        def answer(calls: list[IncomingCall], route: str, arrived: float) -> list[CallAnswer]:
            return [self._answer(log, c, route) for c in calls]

        hook = EpisodeHook(episode_id=f"{self.scenario.id}#{log.number}", handler=answer)
        self.server.registry.register(hook)
        self.server.tools_of[hook.token] = [
            ToolSchema(name=t.name, description=t.description, parameters=t.parameters)
            for t in self.agent.config.tools
        ]
        return hook

    def _answer(self, log: CallLog, call: IncomingCall, route: str) -> CallAnswer:
        n = len(log.events)
        site = CallSite(
            index=n,
            candidate_turn=0,
            message_index=n,
            result_message_index=n,
            tool_call_id=call.call_id or f"call_{n}",
            original_tool_call_id=None,
            name=call.name,
            raw_arguments=call.raw_arguments,
        )
        ev = log.backend.refuse(site, "after_call_ended") if log.ended else log.backend.dispatch(site)
        log.ended = log.ended or ev.ended_call
        log.events.append(ev)
        if self.listener is not None:
            self.listener(log, route, ev)
        return CallAnswer(result=ev.result, ended_call=ev.ended_call)

    def new_generic(self) -> dict[str, str]:
        """Open a call on the generic route; returns its webhook URLs (they hold the secret)."""
        return self.server.urls(self._hook())

    def _new_platform_call(self, ids: list[str]) -> EpisodeHook | None:
        if not ids:
            return None
        hook = self._hook()
        for i in ids:
            self.server.registry.bind(hook, i)
        return hook
