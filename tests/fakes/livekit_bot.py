"""The example LiveKit Agents bot (``examples/deployed_agent/livekit_agent.py``) with a scripted LLM
inside: a LiveKit ``llm.LLM`` whose every completion is asked of ``scripted:reference`` (the
scenario's reference path), so the bot makes exactly the reference path's tool calls. Its tool
declarations are the starter agent's, as a team would declare them in its own bot.

``clinic`` and ``bank`` are the factories of two bots (the starter's clinic and bank agents), named
by specs such as ``deployed:livekit:tests.fakes.livekit_bot:clinic``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from livekit.agents import llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr

from callbench.bundle.loader import load_bundle_collect
from callbench.bundle.models import Bundle
from callbench.models.base import ChatMessage, ModelClient, ModelRequest, RequestContext, ToolCall
from callbench.models.scripted.models import create_scripted

ROOT = Path(__file__).parents[2]
STARTER = ROOT / "src" / "callbench" / "examples" / "starter"
EXAMPLE = ROOT / "examples" / "deployed_agent" / "livekit_agent.py"
_cache: dict[str, Any] = {}


def starter() -> Bundle:
    if "bundle" not in _cache:
        _cache["bundle"], _ = load_bundle_collect(STARTER)
    bundle: Bundle = _cache["bundle"]
    return bundle


def example() -> Any:
    """The example bot module, loaded from its file (``examples/`` is not a package on the path)."""
    if "example" not in _cache:
        spec = importlib.util.spec_from_file_location("livekit_example_agent", EXAMPLE)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _cache["example"] = mod
    return _cache["example"]


def to_chat(items: list[Any]) -> list[ChatMessage]:
    """LiveKit chat items as callbench chat messages (a function call is an assistant message
    holding it, its output a tool message)."""
    out: list[ChatMessage] = []
    for item in items:
        if item.type == "message" and item.role in ("user", "assistant", "system"):
            out.append(ChatMessage(role=item.role, content=item.text_content))
        elif item.type == "function_call":
            out.append(
                ChatMessage(
                    role="assistant",
                    tool_calls=[ToolCall(id=item.call_id, name=item.name, arguments=item.arguments)],
                )
            )
        elif item.type == "function_call_output":
            out.append(ChatMessage(role="tool", content=item.output, tool_call_id=item.call_id))
    return out


class ScriptedLLM(llm.LLM):
    """A LiveKit LLM answering from a callbench scripted model for one episode. Candidate turn k is
    the number of user messages in the chat context (0: the greeting)."""

    def __init__(self, model: ModelClient, episode: Any) -> None:
        super().__init__()
        self.scripted = model
        self.episode = episode

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        return _Stream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _Stream(llm.LLMStream):
    def __init__(self, owner: ScriptedLLM, **kw: Any) -> None:
        super().__init__(owner, **kw)
        self.owner = owner

    async def _run(self) -> None:
        messages = to_chat(list(self.chat_ctx.items))
        ep = self.owner.episode
        if not ep.scenario_id:  # a preflight: no scenario to replay, a plain greeting
            self._event_ch.send_nowait(
                llm.ChatChunk(id="preflight", delta=llm.ChoiceDelta(role="assistant", content="Hello."))
            )
            return
        request = ModelRequest(
            messages=messages,
            context=RequestContext(
                role="candidate",
                episode_id=ep.episode_id,
                agent_id=ep.agent_id,
                scenario_id=ep.scenario_id,
                turn=sum(1 for m in messages if m.role == "user"),
            ),
        )
        resp = await self.owner.scripted.complete(request)
        calls = [
            llm.FunctionToolCall(name=c.name, arguments=c.arguments, call_id=c.id) for c in resp.tool_calls
        ]
        self._event_ch.send_nowait(
            llm.ChatChunk(
                id=f"scripted-{request.context.turn}",
                delta=llm.ChoiceDelta(role="assistant", content=resp.content or None, tool_calls=calls),
            )
        )


def tools_of(agent_id: str) -> list[dict[str, Any]]:
    """The starter agent's tool declarations as the bot's ``AGENT_TOOLS_FILE`` would hold them."""
    agent = starter().agents[agent_id]
    return [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in agent.config.tools
    ]


def bot(agent_id: str, episode: Any) -> Any:
    """The bot of starter agent ``agent_id`` with a scripted LLM replaying the reference path."""
    model = create_scripted("scripted:reference", None, starter())
    return example().build("You are a phone agent.", tools_of(agent_id), ScriptedLLM(model, episode))


def clinic(episode: Any) -> Any:
    return bot("clinic_appointments", episode)


def bank(episode: Any) -> Any:
    return bot("bank_card_services", episode)
