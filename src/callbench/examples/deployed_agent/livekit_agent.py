"""A LiveKit Agents bot that callbench can benchmark in process (docs/deployed.md).

    callbench run --candidate deployed:livekit:examples/deployed_agent/livekit_agent.py:make_agent ...

callbench imports this file, calls ``make_agent(episode)`` once per episode (``episode`` has
``episode_id``, ``agent_id``, ``scenario_id``) and drives the returned ``AgentSession`` through
LiveKit's own text interface (``session.start`` for the greeting, ``session.run(user_input=...)``
per caller turn). It keeps the bot's instructions, LLM and tool declarations, and replaces each
tool's body with a call to callbench's mock backend, so nothing here reaches a real backend.

In production this bot's tools call the team's backend (``BACKEND_URL``); its tool declarations
are read from ``AGENT_TOOLS_FILE`` (a JSON list of ``{name, description, parameters}``) and its
instructions from ``AGENT_PROMPT_FILE``. Its LLM is LiveKit's inference gateway
(``AGENT_MODEL``, ``LIVEKIT_API_KEY``/``LIVEKIT_API_SECRET``); tests pass a scripted LLM instead.
Adapt ``build`` to your own bot: return your ``AgentSession`` and ``Agent``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import aiohttp
from livekit.agents import Agent, AgentSession, RunContext, function_tool, llm


def backend_tool(schema: dict[str, Any]) -> llm.RawFunctionTool:
    """A tool of the bot: POSTs its arguments to ``BACKEND_URL/{name}`` and returns the answer."""

    async def call(raw_arguments: dict[str, Any], context: RunContext) -> Any:
        url = f"{os.environ['BACKEND_URL'].rstrip('/')}/{schema['name']}"
        async with aiohttp.ClientSession() as http, http.post(url, json=raw_arguments) as r:
            return await r.json()

    return function_tool(call, raw_schema=schema)


class PhoneAgent(Agent):
    """Greets on entering the call, then answers each caller turn with its LLM and tools."""

    async def on_enter(self) -> None:
        self.session.generate_reply()


def build(
    instructions: str, tools: list[dict[str, Any]], model: llm.LLM | None = None
) -> tuple[AgentSession, Agent]:
    """The bot: a text session (no STT, TTS or VAD: callbench speaks text) and its agent."""
    from livekit.agents import inference

    session: AgentSession = AgentSession(
        llm=model or inference.LLM(model=os.environ.get("AGENT_MODEL", "openai/gpt-4.1-mini")),
        max_tool_steps=10,
    )
    agent = PhoneAgent(instructions=instructions, tools=[backend_tool(t) for t in tools])
    return session, agent


def make_agent(episode: Any) -> tuple[AgentSession, Agent]:
    """callbench's entry point: one bot per episode, configured from the environment."""
    prompt_file, tools_file = os.environ.get("AGENT_PROMPT_FILE"), os.environ.get("AGENT_TOOLS_FILE")
    instructions = Path(prompt_file).read_text(encoding="utf-8") if prompt_file else "You are a phone agent."
    tools = json.loads(Path(tools_file).read_text(encoding="utf-8")) if tools_file else []
    return build(instructions, tools)
