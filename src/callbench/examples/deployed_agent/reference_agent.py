"""A reference deployed agent speaking callbench's generic protocol, over HTTP and over a
WebSocket (docs/deployed.md).

Run it, then benchmark it:  python reference_agent.py --port 8700
    callbench run --candidate deployed:http:http://127.0.0.1:8700 ...
    callbench run --candidate deployed:ws:ws://127.0.0.1:8700/ws ...
Its "brain" is any OpenAI-compatible chat endpoint (OPENAI_BASE_URL, OPENAI_API_KEY, AGENT_MODEL,
and your own prompt in AGENT_PROMPT_FILE); tests plug in a scripted brain instead. Its tools are
callbench's mock backend: each tool call is POSTed to the session's tools_url. Adapt `brain` and
`call_tool` to your stack; keep the routes.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

Brain = Callable[[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_STEPS = 10  # tool rounds per caller turn


async def openai_brain(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], session: dict[str, Any]
) -> dict[str, Any]:
    """One chat completion from an OpenAI-compatible server: {"content", "tool_calls"}."""
    body = {
        "model": os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
        "messages": messages,
        "tools": [{"type": "function", "function": t} for t in tools],
    }
    headers = {"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"}
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/chat/completions", json=body, headers=headers) as r,
    ):
        msg = (await r.json())["choices"][0]["message"]
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in msg.get("tool_calls") or []
    ]
    return {"content": msg.get("content"), "tool_calls": calls}


async def call_tool(tools_url: str, name: str, arguments: str, call_id: str) -> dict[str, Any]:
    """POST the raw arguments to callbench's webhook: {"result", "call_ended"}."""
    headers = {"Content-Type": "application/json", "X-Tool-Call-Id": call_id}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{tools_url}/{name}", data=arguments, headers=headers) as r,
    ):
        return await r.json()


def make_app(brain: Brain = openai_brain, prompt: str = "") -> web.Application:
    sessions: dict[str, dict[str, Any]] = {}

    async def respond(s: dict[str, Any]) -> dict[str, Any]:
        said, ended = [], False
        for _ in range(MAX_STEPS):
            out = await brain(s["messages"], s["tools"], s)
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
                answer = await call_tool(s["tools_url"], c["name"], c["arguments"], c["id"])
                ended = ended or bool(answer.get("call_ended"))
                s["messages"].append(
                    {"role": "tool", "tool_call_id": c["id"], "content": json.dumps(answer.get("result"))}
                )
            if not calls or ended:
                break
        return {"messages": said, "ended": ended}

    async def open_session(request: web.Request) -> web.Response:
        info = await request.json()
        sid = uuid.uuid4().hex
        s = sessions[sid] = {**info, "turn": 0, "messages": [{"role": "system", "content": prompt}]}
        return web.json_response({"session_id": sid, **await respond(s)})

    async def turn(request: web.Request) -> web.Response:
        s = sessions.get(request.match_info["sid"])
        if s is None:
            return web.json_response({"error": "no such session"}, status=404)
        s["turn"] += 1
        s["messages"].append({"role": "user", "content": (await request.json())["text"]})
        return web.json_response(await respond(s))

    async def close(request: web.Request) -> web.Response:
        sessions.pop(request.match_info["sid"], None)
        return web.json_response({})

    async def socket(request: web.Request) -> web.WebSocketResponse:
        """One call per socket: "start" (the greeting), then "turn"s, until "end"."""
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        s: dict[str, Any] = {}
        async for msg in ws:
            frame = json.loads(msg.data)
            if frame["type"] == "start":
                s = {**frame, "turn": 0, "messages": [{"role": "system", "content": prompt}]}
            elif frame["type"] == "turn" and s:
                s["turn"] += 1
                s["messages"].append({"role": "user", "content": frame["text"]})
            elif frame["type"] == "end":
                break
            else:
                await ws.send_json({"type": "error", "error": "send start first"})
                continue
            await ws.send_json({"type": "reply", **await respond(s)})
        await ws.close()
        return ws

    app = web.Application()
    app.add_routes(
        [
            web.post("/sessions", open_session),
            web.post("/sessions/{sid}/turns", turn),
            web.delete("/sessions/{sid}", close),
            web.get("/ws", socket),
        ]
    )
    return app


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8700)
    args = ap.parse_args()
    prompt_file = os.environ.get("AGENT_PROMPT_FILE")
    prompt = Path(prompt_file).read_text(encoding="utf-8") if prompt_file else "You are a phone agent."
    web.run_app(make_app(prompt=prompt), host="127.0.0.1", port=args.port)
