"""A LiveKit Agents bot run in process (``deployed:livekit:<module or file.py>:<factory>``).

The target names a callable of the team's own code: ``factory(episode)`` (``episode`` is a
:class:`LiveKitEpisode`; the callable may be async) returns the bot as an ``Agent`` or as an
``(AgentSession, Agent)`` pair; a bare ``Agent`` gets a default ``AgentSession()``, so its LLM is
the agent's own. ``<module>`` is a dotted module on ``sys.path``; a target ending in ``.py`` before
the colon is a file path (relative to the working directory).

Each episode builds a fresh bot and drives it through LiveKit's own text interface, as LiveKit's
testing guide does (https://docs.livekit.io/testing/unit-tests.md): ``session.start(agent,
capture_run=True)`` for the start of the call (the greeting, e.g. ``generate_reply()`` in
``on_enter``), then ``session.run(user_input=...)`` per caller turn; the agent's messages are the
assistant messages of each run, and the session closing (the bot shut itself down) is the agent
ending the call. No room, STT, TTS or VAD is involved.

The bot keeps its instructions, LLM and tool declarations (name, description, JSON Schema), but
every function tool's body is replaced with a call to callbench's webhook on loopback (the
episode's generic route, :mod:`callbench.sim.webhook`), so its tool calls reach the same
dispatcher, fixtures, state engine and checks as a model's and nothing reaches the team's
backend. The calls of one reply are sent one at a time in the order the LLM emitted them (LiveKit
runs them concurrently; the trace must not depend on which request lands first). Provider-side
tools (hosted search and the like) cannot be answered by callbench and are removed; a tool that
hands off to another agent is answered by the backend like any other call (no handoff happens).

The deployed configuration (instructions, function tool schemas, the LLM's class and model, the
LiveKit Agents version) is read from a bot built with empty episode ids before the run and
compared with the bundle like a hosted platform's (:mod:`callbench.runs.deployment`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from callbench.models.base import InfrastructureError, ModelSettings, ToolSchema
from callbench.models.deployed.base import AgentReply, DeployedCandidate, SessionInfo, WebhookConfig
from callbench.models.faults import note_fault, note_request

TARGET_RE = re.compile(r"^(?P<where>[^:]+):(?P<attr>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$")
INSTALL = "pip install 'callbench[deployed]' (livekit-agents)"


@dataclass(frozen=True)
class LiveKitEpisode:
    """What the factory is told about the episode it builds a bot for (all ``""`` for the
    configuration read before the run)."""

    episode_id: str
    agent_id: str
    scenario_id: str


def check_target(spec: str, target: str) -> None:
    """Raise ValueError naming ``spec`` unless ``target`` is ``<module or file.py>:<attribute>``."""
    if TARGET_RE.match(target) is None:
        raise ValueError(
            f"model spec {spec!r}: expected deployed:livekit:<module or path.py>:<factory>, "
            "e.g. deployed:livekit:my_bot.agent:make_agent"
        )


def load_factory(spec: str, target: str) -> Any:
    """The callable ``target`` names. Raises ValueError naming ``spec`` when LiveKit Agents is not
    installed, the module or file cannot be imported, or the attribute is missing or not callable."""
    check_target(spec, target)
    if importlib.util.find_spec("livekit.agents") is None:
        raise ValueError(f"{spec}: LiveKit Agents is not installed; {INSTALL}")
    m = TARGET_RE.match(target)
    assert m is not None
    where, attr = m.group("where"), m.group("attr")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ValueError(f"{spec}: no file {where}")
            mspec = importlib.util.spec_from_file_location(f"callbench_livekit_{path.stem}", path)
            assert mspec is not None and mspec.loader is not None
            module = importlib.util.module_from_spec(mspec)
            mspec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ValueError:
        raise
    except Exception as e:  # the team's module: any import failure is reported, located
        raise ValueError(f"{spec}: cannot import {where}: {type(e).__name__}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if not callable(obj):
        raise ValueError(f"{spec}: {where} has no callable {attr}")
    return obj


def _fault(spec: str, message: str, kind: str = "client_error") -> InfrastructureError:
    note_fault("candidate", kind)
    return InfrastructureError(f"{spec}: {message}", kind=kind, role="candidate", retryable=False)


def function_schemas(agent: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """``(function tools as {name, description, parameters}, ids of other tools)`` of a LiveKit
    agent (typed ``@function_tool`` methods and ``raw_schema`` tools alike)."""
    from livekit.agents import llm
    from livekit.agents.llm.utils import build_legacy_openai_schema

    ctx = llm.ToolContext(agent.tools)
    out = []
    for name, tool in ctx.function_tools.items():
        if llm.tool_context.is_raw_function_tool(tool):
            raw = tool.info.raw_schema
            desc, params = raw.get("description", ""), raw.get("parameters", {})
        else:
            fn = build_legacy_openai_schema(tool)["function"]  # type: ignore[arg-type]
            desc, params = fn["description"], fn["parameters"]
        out.append({"name": name, "description": desc, "parameters": params})
    others = [t.id for t in ctx.flatten() if t.id not in ctx.function_tools]
    return out, others


class LiveKitSession:
    """One episode's bot (module docstring)."""

    def __init__(self, owner: LiveKitDeployed, session: Any, agent: Any) -> None:
        self.owner = owner
        self.session = session
        self.agent = agent
        self.platform_ids: list[str] = []
        self.started = False
        self.closed = False
        session.on("close", self._on_close)

    def _on_close(self, _event: Any) -> None:
        self.closed = True

    async def send(self, text: str | None) -> AgentReply:
        spec, timeout = self.owner.spec, self.owner.settings.timeout_s
        note_request("candidate")
        if self.closed:
            return AgentReply(ended=True)
        try:
            if not self.started:
                self.started = True
                run = await asyncio.wait_for(self.session.start(self.agent, capture_run=True), timeout)
                if text is not None:  # a bot that does not greet still answers the first words
                    run = await asyncio.wait_for(self.session.run(user_input=text), timeout)
            else:
                run = await asyncio.wait_for(self.session.run(user_input=text or ""), timeout)
            if run is not None and not run.done():
                await asyncio.wait_for(run, timeout)
        except TimeoutError:
            raise _fault(spec, f"no reply within {timeout:g} s", "timeout") from None
        except InfrastructureError:
            raise
        except Exception as e:  # the bot's own failure: reported, the episode skipped
            raise _fault(spec, f"the bot failed: {type(e).__name__}: {e}") from None
        said = [
            ev.item.text_content
            for ev in (run.events if run is not None else [])
            if ev.type == "message" and ev.item.role == "assistant" and (ev.item.text_content or "").strip()
        ]
        return AgentReply(messages=said, ended=self.closed)

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # the episode is over; a bot that fails to close is its own
            await self.session.aclose()


class LiveKitDeployed(DeployedCandidate):
    """``deployed:livekit:<module or file.py>:<factory>`` (module docstring)."""

    adapter = "livekit"

    def __init__(
        self, spec: str, settings: ModelSettings, target: str, webhook: WebhookConfig | None = None
    ) -> None:
        super().__init__(spec, settings, target, webhook)
        check_target(spec, target)
        self._factory: Any = None
        self._http: aiohttp.ClientSession | None = None

    async def build(self, episode: LiveKitEpisode) -> tuple[Any, Any]:
        """``(AgentSession, Agent)`` from the factory. Raises InfrastructureError (``client_error``)
        for a factory that fails or returns something else (so the episode is skipped, not graded)."""
        from livekit.agents import Agent, AgentSession

        try:
            if self._factory is None:
                self._factory = load_factory(self.spec, self.target)
            built = self._factory(episode)
            if inspect.isawaitable(built):
                built = await built
        except Exception as e:  # the team's factory: reported, located
            raise _fault(self.spec, f"the factory failed: {type(e).__name__}: {e}") from None
        if isinstance(built, Agent):
            return AgentSession(), built
        if (
            isinstance(built, tuple)
            and len(built) == 2
            and isinstance(built[0], AgentSession)
            and isinstance(built[1], Agent)
        ):
            return built
        raise _fault(
            self.spec,
            f"the factory returned {type(built).__name__}; expected an Agent or (AgentSession, Agent)",
        )

    async def http(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
            self.on_close(self._http.close)
        return self._http

    def backend_tool(self, schema: dict[str, Any], tools_url: str, lock: asyncio.Lock) -> Any:
        """A LiveKit raw function tool declared as ``schema`` whose body asks callbench's webhook.
        The URL holds the run's secret, so no error raised here names it."""
        from livekit.agents import RunContext, function_tool, llm

        name = schema["name"]

        async def call(raw_arguments: dict[str, Any], context: Any) -> str:
            body = json.dumps(raw_arguments, ensure_ascii=False).encode()
            headers = {"Content-Type": "application/json", "X-Tool-Call-Id": context.function_call.call_id}
            async with lock:
                if not tools_url:
                    raise llm.ToolError(f"{name}: no backend in this session")
                try:
                    http = await self.http()
                    async with http.post(f"{tools_url}/{name}", data=body, headers=headers) as r:
                        answer = await r.json(content_type=None)
                except (aiohttp.ClientError, ValueError):
                    raise llm.ToolError(f"{name}: the backend did not answer") from None
            if r.status != 200 or not isinstance(answer, dict) or "result" not in answer:
                err = answer.get("error") if isinstance(answer, dict) else None
                raise llm.ToolError(f"{name}: {err or f'HTTP {r.status}'}")
            return json.dumps(answer["result"], ensure_ascii=False)

        # LiveKit injects the call's context by the parameter's type hint, read with
        # get_type_hints: this module imports LiveKit lazily, so the hint is set as an object
        call.__annotations__ = {"raw_arguments": dict[str, Any], "context": RunContext, "return": str}
        return function_tool(call, raw_schema={**schema, "name": name})

    async def open(self, info: SessionInfo) -> LiveKitSession:
        session, agent = await self.build(LiveKitEpisode(info.episode_id, info.agent_id, info.scenario_id))
        schemas, _ = function_schemas(agent)
        lock = asyncio.Lock()
        await agent.update_tools([self.backend_tool(s, info.tools_url, lock) for s in schemas])
        return LiveKitSession(self, session, agent)

    async def deployed_config(self) -> dict[str, Any]:
        """The bot's instructions, function tools, other tools, LLM and LiveKit Agents version."""
        from livekit.agents import __version__ as lk_version

        session, agent = await self.build(LiveKitEpisode("", "", ""))
        schemas, others = function_schemas(agent)
        from livekit.agents.utils import is_given

        model = agent.llm if is_given(agent.llm) else session.llm
        instructions = agent.instructions
        return {
            "framework": "livekit-agents",
            "version": lk_version,
            "instructions": instructions if isinstance(instructions, str) else str(instructions),
            "tools": schemas,
            "other_tools": others,
            "llm": {"class": type(model).__name__, "model": getattr(model, "model", None)} if model else None,
        }

    def deployed_tools(self, config: dict[str, Any]) -> list[ToolSchema]:
        return [ToolSchema(**t) for t in config.get("tools", [])]
