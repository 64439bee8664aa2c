"""Retell chat agents (``deployed:retell:<agent id>``; key: ``RETELL_API_KEY``).

Built from Retell's public API reference:

* ``POST /create-chat`` with ``agent_id`` returns ``chat_id`` and ``message_with_tool_calls``
  (the agent's opening messages) (https://docs.retellai.com/api-references/create-chat);
* ``POST /create-chat-completion`` with ``chat_id`` and ``content`` returns ``messages``, the
  agent's new messages (``role: agent``) and tool invocations
  (https://docs.retellai.com/api-references/create-chat-completion);
* ``PATCH /end-chat/{chat_id}`` ends it (https://docs.retellai.com/api-references/end-chat);
* custom functions whose URL is callbench's ``retell_url`` are posted ``{name, call, args}`` with
  an ``X-Retell-Signature`` header, verified with the API key
  (https://docs.retellai.com/build/custom-function, https://docs.retellai.com/features/secure-webhook);
  ``call.chat_id`` / ``call.call_id`` route them to the episode;
* configuration: ``GET /get-agent/{agent_id}`` then ``GET /get-retell-llm/{llm_id}`` (its
  ``general_tools`` of type ``custom``) are compared with the bundle's agent before the run.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote

from callbench.models.base import InfrastructureError, ToolSchema
from callbench.models.deployed.base import AgentReply, SessionInfo
from callbench.models.deployed.http import request_json
from callbench.models.deployed.platform import PlatformDeployed, tool_schema

END_TOOLS = frozenset({"end_call"})


def agent_reply(items: Any) -> AgentReply:
    """The agent's texts of a Retell message list (``role: agent``) and whether it invoked
    ``end_call``."""
    said: list[str] = []
    ended = False
    for m in items if isinstance(items, list) else []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "agent" and isinstance(m.get("content"), str) and m["content"].strip():
            said.append(m["content"])
        if m.get("role") == "tool_call_invocation" and m.get("name") in END_TOOLS:
            ended = True
    return AgentReply(messages=said, ended=ended)


class RetellSession:
    """One Retell chat (module docstring)."""

    def __init__(self, owner: RetellDeployed, chat_id: str, greeting: AgentReply) -> None:
        self.owner = owner
        self.chat_id = chat_id
        self.platform_ids = [chat_id]
        self._greeting: AgentReply | None = greeting

    async def send(self, text: str | None) -> AgentReply:
        if text is None:
            greeting, self._greeting = self._greeting or AgentReply(), None
            return greeting
        o = self.owner
        data = await request_json(
            await o.http(),
            "POST",
            f"{o.base}/create-chat-completion",
            adapter=o.spec,
            body={"chat_id": self.chat_id, "content": text},
            headers=o.headers(),
            timeout_s=o.settings.timeout_s,
            redactor=o.redactor,
        )
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise InfrastructureError(
                f"{o.spec}: POST /create-chat-completion: expected messages",
                kind="malformed_body",
                role="candidate",
                retryable=False,
            )
        return agent_reply(data["messages"])

    async def close(self) -> None:
        o = self.owner
        with contextlib.suppress(InfrastructureError):  # Retell closes inactive chats on its own
            await request_json(
                await o.http(),
                "PATCH",
                f"{o.base}/end-chat/{quote(self.chat_id)}",
                adapter=o.spec,
                headers=o.headers(),
                timeout_s=min(10.0, o.settings.timeout_s),
            )


class RetellDeployed(PlatformDeployed):
    """``deployed:retell:<agent id>`` (module docstring)."""

    adapter = "retell"
    key_env = "RETELL_API_KEY"
    default_base = "https://api.retellai.com"

    async def open(self, info: SessionInfo) -> RetellSession:
        data = await request_json(
            await self.http(),
            "POST",
            f"{self.base}/create-chat",
            adapter=self.spec,
            body={"agent_id": self.target, "metadata": {"episode_id": info.episode_id}},
            headers=self.headers(),
            timeout_s=self.settings.timeout_s,
            attempts=self.settings.max_attempts,
            redactor=self.redactor,
        )
        cid = data.get("chat_id") if isinstance(data, dict) else None
        if not isinstance(cid, str) or not cid:
            raise InfrastructureError(
                f"{self.spec}: POST /create-chat: expected chat_id",
                kind="malformed_body",
                role="candidate",
                retryable=False,
            )
        return RetellSession(self, cid, agent_reply(data.get("message_with_tool_calls")))

    async def deployed_config(self) -> dict[str, Any] | None:
        agent = await request_json(
            await self.http(),
            "GET",
            f"{self.base}/get-agent/{quote(self.target)}",
            adapter=self.spec,
            headers=self.headers(),
            timeout_s=self.settings.timeout_s,
            attempts=self.settings.max_attempts,
            redactor=self.redactor,
        )
        engine = agent.get("response_engine") if isinstance(agent, dict) else None
        llm_id = engine.get("llm_id") if isinstance(engine, dict) else None
        if not isinstance(llm_id, str):
            return None  # a custom-LLM or flow agent: its tools are not readable here
        llm = await request_json(
            await self.http(),
            "GET",
            f"{self.base}/get-retell-llm/{quote(llm_id)}",
            adapter=self.spec,
            headers=self.headers(),
            timeout_s=self.settings.timeout_s,
            attempts=self.settings.max_attempts,
            redactor=self.redactor,
        )
        return {"agent": agent, "llm": llm}

    def deployed_tools(self, config: dict[str, Any]) -> list[ToolSchema]:
        llm = config.get("llm") if isinstance(config.get("llm"), dict) else {}
        out = []
        for t in (llm or {}).get("general_tools") or []:
            if isinstance(t, dict) and t.get("type") == "custom":
                schema = tool_schema(t.get("name"), t.get("description"), t.get("parameters"))
                if schema is not None:
                    out.append(schema)
        return out
