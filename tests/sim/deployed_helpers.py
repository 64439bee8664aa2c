"""Shared pieces of the deployed-candidate tests: the starter bundle, the reference agent of
``examples/deployed_agent`` with a brain that replays ``scripted:reference``, and a loopback runner."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from callbench.bundle.loader import load_bundle_collect
from callbench.bundle.models import Bundle
from callbench.models.base import ChatMessage, ModelRequest, RequestContext, ToolCall
from callbench.models.scripted.models import create_scripted

ROOT = Path(__file__).parents[2]
STARTER = ROOT / "src" / "callbench" / "examples" / "starter"
_bundle: Bundle | None = None


def starter() -> Bundle:
    global _bundle
    if _bundle is None:
        _bundle, _ = load_bundle_collect(STARTER)
    return _bundle


def reference_agent_module() -> Any:
    path = ROOT / "examples" / "deployed_agent" / "reference_agent.py"
    spec = importlib.util.spec_from_file_location("reference_agent", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def scripted_brain(bundle: Bundle) -> Any:
    """A brain for the reference agent that asks ``scripted:reference`` what to do, turn by turn."""
    model = create_scripted("scripted:reference", None, bundle)

    async def brain(
        messages: list[dict[str, Any]], tools: list[dict[str, Any]], s: dict[str, Any]
    ) -> dict[str, Any]:
        chat = [
            ChatMessage(
                role=m["role"],
                content=m.get("content"),
                tool_call_id=m.get("tool_call_id"),
                tool_calls=[
                    ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
                    for c in m.get("tool_calls") or []
                ],
            )
            for m in messages
        ]
        req = ModelRequest(
            messages=chat,
            context=RequestContext(
                role="candidate",
                episode_id=s["episode_id"],
                agent_id=s["agent_id"],
                scenario_id=s["scenario_id"],
                turn=s["turn"],
            ),
        )
        resp = await model.complete(req)
        return {
            "content": resp.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in resp.tool_calls],
        }

    return brain


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Run ``app`` on a loopback ephemeral port; yields its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()
