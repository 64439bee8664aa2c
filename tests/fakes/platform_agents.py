"""Loopback fakes of the Vapi and Retell chat APIs, speaking their wire formats (see
:mod:`callbench.models.deployed.vapi` and :mod:`callbench.models.deployed.retell` for the pages
they follow). Each runs a "brain" (``brain(messages, tools, session) -> {content, tool_calls}``,
as the reference agent's) and calls its tools on a webhook URL the way the platform would: a Vapi
``tool-calls`` server message carrying the chat's ``sessionId``, or a signed Retell custom-function
request carrying ``call.chat_id``. ``webhook_url`` is set once callbench's webhook listens;
``status`` (HTTP code) makes every chat request fail, for fault tests; ``assistant`` is what
``GET /assistant/{id}`` (Vapi) or the agent + LLM endpoints (Retell) return."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import aiohttp
from aiohttp import web

from callbench.sim.webhook.formats import retell_signature

Brain = Any


class _Fake:
    def __init__(self, brain: Brain, scenario_id: str, key: str) -> None:
        self.brain = brain
        self.scenario_id = scenario_id
        self.key = key
        self.webhook_url = ""
        self.status: int | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.auth_seen: list[str] = []
        self.tools: list[dict[str, Any]] = []

    def _authorized(self, request: web.Request) -> bool:
        self.auth_seen.append(request.headers.get("Authorization", ""))
        return request.headers.get("Authorization") == f"Bearer {self.key}"

    async def _run(self, s: dict[str, Any], text: str | None) -> tuple[list[str], bool]:
        if text is not None:
            s["messages"].append({"role": "user", "content": text})
        said, ended = [], False
        for _ in range(10):
            out = await self.brain(s["messages"], self.tools, s)
            calls = out.get("tool_calls") or []
            s["messages"].append(
                {
                    "role": "assistant",
                    "content": out.get("content"),
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls
                    ]
                    or None,
                }
            )
            if out.get("content"):
                said.append(out["content"])
            for c in calls:
                result, done = await self.tool(s, c)
                ended = ended or done
                s["messages"].append({"role": "tool", "tool_call_id": c["id"], "content": result})
            if not calls or ended:
                break
        return said, ended

    async def tool(self, s: dict[str, Any], call: dict[str, Any]) -> tuple[str, bool]:
        raise NotImplementedError


class VapiFake(_Fake):
    """``POST /session``, ``POST /chat``, ``DELETE /session/{id}``, ``GET /assistant/{id}``."""

    def __init__(
        self, brain: Brain, scenario_id: str, key: str, assistant: dict[str, Any] | None = None
    ) -> None:
        super().__init__(brain, scenario_id, key)
        self.assistant = assistant or {"id": "asst_1", "model": {"tools": []}}

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.post("/session", self.open),
                web.post("/chat", self.chat),
                web.delete("/session/{sid}", self.close),
                web.get("/assistant/{aid}", self.get),
            ]
        )
        return app

    async def open(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        body = await request.json()
        sid = f"sess_{uuid.uuid4().hex[:12]}"
        self.sessions[sid] = {
            "episode_id": body.get("name", ""),
            "agent_id": "",
            "scenario_id": self.scenario_id,
            "turn": 0,
            "messages": [{"role": "system", "content": "deployed prompt"}],
        }
        return web.json_response({"id": sid, "assistantId": body["assistantId"]}, status=201)

    async def chat(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        if self.status is not None:
            return web.json_response({"message": "platform trouble"}, status=self.status)
        body = await request.json()
        s = self.sessions[body["sessionId"]]
        s["turn"] += 1
        s["chat_id"] = f"chat_{uuid.uuid4().hex[:8]}"
        said, ended = await self._run(s, body["input"])
        output = [{"role": "assistant", "content": t} for t in said]
        if ended:
            output.append({"role": "assistant", "tool_calls": [{"function": {"name": "endCall"}}]})
        return web.json_response({"id": s["chat_id"], "sessionId": body["sessionId"], "output": output})

    async def close(self, request: web.Request) -> web.Response:
        self.sessions.pop(request.match_info["sid"], None)
        return web.json_response({})

    async def get(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response(self.assistant)

    async def tool(self, s: dict[str, Any], call: dict[str, Any]) -> tuple[str, bool]:
        sid = next(k for k, v in self.sessions.items() if v is s)
        msg = {
            "message": {
                "type": "tool-calls",
                "timestamp": int(time.time() * 1000),
                "chat": {"id": s["chat_id"], "sessionId": sid},
                "toolCallList": [
                    {"id": call["id"], "name": call["name"], "arguments": json.loads(call["arguments"])}
                ],
            }
        }
        async with aiohttp.ClientSession() as http, http.post(self.webhook_url, json=msg) as r:
            body = await r.json()
        res = body["results"][0]
        return res.get("result", res.get("error", "")), False  # Vapi results do not say the call ended


class RetellFake(_Fake):
    """``POST /create-chat``, ``POST /create-chat-completion``, ``PATCH /end-chat/{id}``,
    ``GET /get-agent/{id}``, ``GET /get-retell-llm/{id}``."""

    def __init__(self, brain: Brain, scenario_id: str, key: str, llm: dict[str, Any] | None = None) -> None:
        super().__init__(brain, scenario_id, key)
        self.llm = llm or {"llm_id": "llm_1", "general_tools": []}
        self.ended_chats: list[str] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.post("/create-chat", self.open),
                web.post("/create-chat-completion", self.chat),
                web.patch("/end-chat/{cid}", self.close),
                web.get("/get-agent/{aid}", self.agent),
                web.get("/get-retell-llm/{lid}", self.get_llm),
            ]
        )
        return app

    async def open(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        body = await request.json()
        cid = uuid.uuid4().hex
        s = self.sessions[cid] = {
            "episode_id": body.get("metadata", {}).get("episode_id", ""),
            "agent_id": "",
            "scenario_id": self.scenario_id,
            "turn": 0,
            "chat_id": cid,
            "messages": [{"role": "system", "content": "deployed prompt"}],
        }
        said, _ = await self._run(s, None)
        return web.json_response(
            {
                "chat_id": cid,
                "agent_id": body["agent_id"],
                "chat_status": "ongoing",
                "message_with_tool_calls": [{"role": "agent", "content": t} for t in said],
            },
            status=201,
        )

    async def chat(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        if self.status is not None:
            return web.json_response({"message": "platform trouble"}, status=self.status)
        body = await request.json()
        s = self.sessions[body["chat_id"]]
        s["turn"] += 1
        said, ended = await self._run(s, body["content"])
        msgs: list[dict[str, Any]] = [{"role": "agent", "content": t} for t in said]
        if ended:
            msgs.append({"role": "tool_call_invocation", "name": "end_call", "arguments": "{}"})
        return web.json_response({"messages": msgs}, status=201)

    async def close(self, request: web.Request) -> web.Response:
        self.ended_chats.append(request.match_info["cid"])
        return web.json_response({})

    async def agent(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response(
            {
                "agent_id": request.match_info["aid"],
                "response_engine": {"type": "retell-llm", "llm_id": self.llm["llm_id"]},
            }
        )

    async def get_llm(self, request: web.Request) -> web.Response:
        return web.json_response(self.llm)

    async def tool(self, s: dict[str, Any], call: dict[str, Any]) -> tuple[str, bool]:
        body = json.dumps(
            {"name": call["name"], "call": {"chat_id": s["chat_id"]}, "args": json.loads(call["arguments"])}
        ).encode()
        sig = retell_signature(body, self.key, int(time.time() * 1000))
        headers = {"Content-Type": "application/json", "X-Retell-Signature": sig}
        async with (
            aiohttp.ClientSession() as http,
            http.post(self.webhook_url, data=body, headers=headers) as r,
        ):
            return await r.text(), False
