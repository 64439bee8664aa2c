"""Vapi assistants over Vapi's chat API (``deployed:vapi:<assistant id>``; key: ``VAPI_API_KEY``).

Built from Vapi's public documentation:

* sessions: ``POST /session`` with ``assistantId`` returns the session ``id``; ``POST /chat``
  with ``sessionId`` and ``input`` returns ``{"id", "output": [{"role": "assistant", "content"}]}``
  (https://docs.vapi.ai/chat/session-management, https://docs.vapi.ai/chat/quickstart);
  ``DELETE /session/{id}`` ends it;
* tools: function tools whose server URL is callbench's ``vapi_url`` receive a ``tool-calls``
  server message and are answered ``{"results": [{"toolCallId", "result"}]}``
  (https://docs.vapi.ai/tools/custom-tools); the message's ``chat``/``call``/``session`` ids route
  it to the episode (:mod:`callbench.sim.webhook`);
* configuration: ``GET /assistant/{id}`` (its ``model.tools``) is compared with the bundle's agent
  before the run (https://docs.vapi.ai/api-reference/assistants/get).

A chat starts with the user's input, so the greeting turn is silent: the assistant's
``firstMessage`` is a voice feature that the chat API does not return.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote

from callbench.models.base import InfrastructureError, ToolSchema
from callbench.models.deployed.base import AgentReply, SessionInfo
from callbench.models.deployed.http import request_json
from callbench.models.deployed.platform import PlatformDeployed, tool_schema

END_TOOLS = frozenset({"endCall", "end_call"})


class VapiSession:
    """One Vapi chat session (module docstring)."""

    def __init__(self, owner: VapiDeployed, session_id: str) -> None:
        self.owner = owner
        self.session_id = session_id
        self.platform_ids = [session_id]

    async def send(self, text: str | None) -> AgentReply:
        if text is None:
            return AgentReply()
        o = self.owner
        data = await request_json(
            await o.http(),
            "POST",
            f"{o.base}/chat",
            adapter=o.spec,
            body={"sessionId": self.session_id, "input": text},
            headers=o.headers(),
            timeout_s=o.settings.timeout_s,
            redactor=o.redactor,
        )
        if not isinstance(data, dict) or not isinstance(data.get("output"), list):
            raise InfrastructureError(
                f"{o.spec}: POST /chat: expected an object with an output list",
                kind="malformed_body",
                role="candidate",
                retryable=False,
            )
        if isinstance(data.get("id"), str):
            self.platform_ids.append(data["id"])
        said: list[str] = []
        ended = False
        for item in data["output"]:
            if not isinstance(item, dict):
                continue
            if (
                item.get("role") == "assistant"
                and isinstance(item.get("content"), str)
                and item["content"].strip()
            ):
                said.append(item["content"])
            for call in item.get("tool_calls") or []:
                fn = call.get("function", {}) if isinstance(call, dict) else {}
                ended = ended or fn.get("name") in END_TOOLS
        return AgentReply(messages=said, ended=ended)

    async def close(self) -> None:
        o = self.owner
        with contextlib.suppress(InfrastructureError):  # the platform expires sessions on its own
            await request_json(
                await o.http(),
                "DELETE",
                f"{o.base}/session/{quote(self.session_id)}",
                adapter=o.spec,
                headers=o.headers(),
                timeout_s=min(10.0, o.settings.timeout_s),
            )


class VapiDeployed(PlatformDeployed):
    """``deployed:vapi:<assistant id>`` (module docstring)."""

    adapter = "vapi"
    key_env = "VAPI_API_KEY"
    default_base = "https://api.vapi.ai"

    async def open(self, info: SessionInfo) -> VapiSession:
        data = await request_json(
            await self.http(),
            "POST",
            f"{self.base}/session",
            adapter=self.spec,
            body={"assistantId": self.target, "name": info.episode_id},
            headers=self.headers(),
            timeout_s=self.settings.timeout_s,
            attempts=self.settings.max_attempts,
            redactor=self.redactor,
        )
        sid = data.get("id") if isinstance(data, dict) else None
        if not isinstance(sid, str) or not sid:
            raise InfrastructureError(
                f"{self.spec}: POST /session: expected an id",
                kind="malformed_body",
                role="candidate",
                retryable=False,
            )
        return VapiSession(self, sid)

    async def deployed_config(self) -> dict[str, Any] | None:
        data = await request_json(
            await self.http(),
            "GET",
            f"{self.base}/assistant/{quote(self.target)}",
            adapter=self.spec,
            headers=self.headers(),
            timeout_s=self.settings.timeout_s,
            attempts=self.settings.max_attempts,
            redactor=self.redactor,
        )
        return data if isinstance(data, dict) else None

    def deployed_tools(self, config: dict[str, Any]) -> list[ToolSchema]:
        model = config.get("model") if isinstance(config.get("model"), dict) else {}
        out = []
        for t in (model or {}).get("tools") or []:
            if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict):
                fn = t["function"]
                schema = tool_schema(fn.get("name"), fn.get("description"), fn.get("parameters"))
                if schema is not None:
                    out.append(schema)
        return out
