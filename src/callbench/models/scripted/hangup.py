"""The base of the scripted candidates and callers, and ``scripted:hangup`` (the candidate that
only greets and hangs up; see :mod:`callbench.models.scripted.models` for every spec).

Kept apart from :mod:`callbench.models.scripted.models` because the gaming candidates
(:mod:`callbench.models.scripted.gaming`) build on the hang-up candidate while the factory in
``models`` creates the gaming candidates: both import this module, neither imports the other back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.models.base import (
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolSchema,
    Usage,
)


class ScriptedBase:
    """What the scripted candidates and callers share: the spec, settings and bundle they were made
    with, the scenario of a request (raises ``ModelOutputError`` when it is not in the bundle), and
    a one-call reply."""

    embedded_smoke_test_model = False

    def __init__(self, spec: str, settings: ModelSettings | None, bundle: Bundle | None) -> None:
        self.spec = spec
        self.settings = settings or ModelSettings()
        self.bundle = bundle
        self._by_id: dict[str, tuple[LoadedAgent, Scenario]] | None = None

    def _scenario(self, request: ModelRequest) -> tuple[LoadedAgent, Scenario]:
        if self.bundle is None:
            raise ModelOutputError(f"{self.spec}: no bundle given to find the scenario")
        if self._by_id is None:  # looked up on every request: indexed once
            self._by_id = {s.id: (a, s) for a, s in self.bundle.scenarios()}
        hit = self._by_id.get(request.context.scenario_id)
        if hit is not None:
            return hit
        try:
            return self.bundle.scenario(request.context.scenario_id)
        except KeyError as e:
            raise ModelOutputError(f"{self.spec}: {e.args[0]}") from None

    def _reply(self, content: str | None, calls: list[ToolCall] | None = None) -> ModelResponse:
        calls = calls or []
        return ModelResponse(
            content=content,
            tool_calls=calls,
            usage=Usage(calls=1),
            model=self.spec,
            finish_reason="tool_calls" if calls else "stop",
        )

    async def aclose(self) -> None:
        return None


def minimal_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """The smallest arguments object ``schema`` accepts for its required fields (see ``scripted:hangup``)."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    out: dict[str, Any] = {}
    for name in schema.get("required", []) if isinstance(schema, dict) else []:
        p = props.get(name, {}) if isinstance(props, dict) else {}
        if isinstance(p, dict) and p.get("enum"):
            out[name] = p["enum"][0]
            continue
        t = p.get("type") if isinstance(p, dict) else None
        t = t[0] if isinstance(t, list) and t else t
        out[name] = {
            "string": "",
            "integer": 0,
            "number": 0,
            "boolean": False,
            "array": [],
            "object": {},
        }.get(str(t), "")
    return out


_PLAIN_END = re.compile(r"end|hang|close|finish|disconnect|goodbye", re.IGNORECASE)


class HangupCandidate(ScriptedBase):
    """``scripted:hangup`` (see the module docstring)."""

    GREETING = "Hello, this is {name}. How can I help you?"
    GOODBYE = "Thank you for calling. Goodbye."

    def _ending_tool(self, request: ModelRequest) -> ToolSchema | None:
        by_name = {t.name: t for t in request.tools}
        names: list[str] = []
        if self.bundle is not None:
            try:
                agent, _ = self.bundle.scenario(request.context.scenario_id)
                names = [c.tool for c in agent.config.call_ending_tools if c.tool in by_name]
            except KeyError:
                names = []
        if not names:
            names = [
                t.name for t in request.tools if "concluding_message" in t.parameters.get("properties", {})
            ]
        plain = [n for n in names if _PLAIN_END.search(n)]
        chosen = plain or names
        return by_name[chosen[0]] if chosen else None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        name = "the service"
        if self.bundle is not None and request.context.agent_id in self.bundle.agents:
            name = self.bundle.agents[request.context.agent_id].config.name
        if request.context.turn == 0:
            return self._reply(self.GREETING.format(name=name))
        if request.messages and request.messages[-1].role == "tool":
            return self._reply("Goodbye.")
        tool = self._ending_tool(request)
        if tool is None:
            return self._reply(self.GOODBYE)
        args = minimal_arguments(tool.parameters)
        call = ToolCall(id=f"hangup_{request.context.turn}", name=tool.name, arguments=json.dumps(args))
        return self._reply(self.GOODBYE, [call])
