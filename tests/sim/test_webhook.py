"""The webhook server on its own: routing by token and platform id, the secret, bad requests,
size bound, Retell signatures, late calls and the OpenAPI document."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from callbench.models.base import ToolSchema
from callbench.models.deployed.base import WebhookConfig
from callbench.sim.webhook import CallAnswer, EpisodeHook, IncomingCall, WebhookServer
from callbench.sim.webhook.formats import retell_signature, retell_verified

SECRET = "s3cret-path-value"
KEY = "retell-key-value"


class Recorder:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.calls: list[tuple[IncomingCall, str]] = []

    def __call__(self, calls: list[IncomingCall], route: str, arrived: float) -> list[CallAnswer]:
        self.calls.extend((c, route) for c in calls)
        return [CallAnswer(result={"episode": self.tag, "tool": c.name}, ended_call=False) for c in calls]


@pytest.fixture
async def server() -> AsyncIterator[WebhookServer]:
    srv = WebhookServer(WebhookConfig(secret=SECRET, retell_key=KEY, max_body_bytes=2048))
    await srv.start()
    yield srv
    await srv.stop()


def _hooks(srv: WebhookServer) -> tuple[EpisodeHook, EpisodeHook, Recorder, Recorder]:
    ra, rb = Recorder("a"), Recorder("b")
    a, b = EpisodeHook("ep-a", ra), EpisodeHook("ep-b", rb)
    for h, pid in ((a, "chat-a"), (b, "chat-b")):
        srv.registry.register(h)
        srv.registry.bind(h, pid)
    return a, b, ra, rb


async def test_loopback_by_default(server: WebhookServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")


async def test_generic_routes_by_token_and_keeps_raw_arguments(server: WebhookServer) -> None:
    a, _b, ra, rb = _hooks(server)
    async with aiohttp.ClientSession() as http:
        r = await http.post(
            f"{server.urls(a)['tools_url']}/lookup", data='{"x": 1,}', headers={"X-Tool-Call-Id": "c1"}
        )
        assert r.status == 200 and await r.json() == {
            "result": {"episode": "a", "tool": "lookup"},
            "call_ended": False,
        }
        bad = await http.post(server.urls(a)["tools_url"].replace(SECRET, "wrong") + "/lookup", data="{}")
        assert bad.status == 404
        unknown = await http.post(f"{server.base_url}/{SECRET}/e/nope/tools/lookup", data="{}")
        assert unknown.status == 404 and "no such episode" in (await unknown.json())["error"]
        big = await http.post(f"{server.urls(a)['tools_url']}/lookup", data="x" * 5000)
        assert big.status == 413
    assert [(c.call_id, c.name, c.raw_arguments, route) for c, route in ra.calls] == [
        ("c1", "lookup", '{"x": 1,}', "generic")
    ]
    assert rb.calls == [] and server.unrouted == 1


async def test_vapi_routes_by_session_id_and_answers_results(server: WebhookServer) -> None:
    _a, _b, ra, rb = _hooks(server)
    msg = {
        "message": {
            "type": "tool-calls",
            "chat": {"id": "x", "sessionId": "chat-b"},
            "toolCallList": [
                {"id": "t1", "name": "find", "arguments": {"q": "é"}},
                {"id": "t2", "function": {"name": "book", "arguments": '{"d": 2}'}},
            ],
        }
    }
    async with aiohttp.ClientSession() as http:
        r = await http.post(f"{server.base_url}/{SECRET}/vapi", json=msg)
        body = await r.json()
        status = await http.post(
            f"{server.base_url}/{SECRET}/vapi", json={"message": {"type": "status-update"}}
        )
        broken = await http.post(f"{server.base_url}/{SECRET}/vapi", data="not json")
        empty = await http.post(f"{server.base_url}/{SECRET}/vapi", json={"message": {"type": "tool-calls"}})
    assert [x["toolCallId"] for x in body["results"]] == ["t1", "t2"]
    assert json.loads(body["results"][1]["result"]) == {"episode": "b", "tool": "book"}
    assert [(c.name, c.raw_arguments) for c, _ in rb.calls] == [("find", '{"q": "é"}'), ("book", '{"d": 2}')]
    assert ra.calls == []
    assert status.status == 200 and await status.json() == {}
    assert broken.status == 400 and "not JSON" in (await broken.json())["error"]
    assert empty.status == 400 and "toolCallList" in (await empty.json())["error"]


async def test_retell_signature_is_verified(server: WebhookServer) -> None:
    _a, _b, ra, rb = _hooks(server)
    body = json.dumps({"name": "find", "call": {"chat_id": "chat-a"}, "args": {"q": 1}}).encode()
    url = f"{server.base_url}/{SECRET}/retell"
    now = int(time.time() * 1000)
    async with aiohttp.ClientSession() as http:
        ok = await http.post(url, data=body, headers={"X-Retell-Signature": retell_signature(body, KEY, now)})
        forged = await http.post(
            url, data=body, headers={"X-Retell-Signature": retell_signature(body, "other", now)}
        )
        unsigned = await http.post(url, data=body)
    assert ok.status == 200 and await ok.json() == {"episode": "a", "tool": "find"}
    assert forged.status == 401 and unsigned.status == 401
    assert len(ra.calls) == 1 and rb.calls == []
    assert not retell_verified(body, KEY, retell_signature(body, KEY, now - 600_000))


async def test_late_calls_are_recorded_and_refused(server: WebhookServer) -> None:
    a, b, ra, rb = _hooks(server)
    server.registry.retire(a)
    msg = {
        "message": {
            "type": "tool-calls",
            "call": {"id": "chat-a"},
            "toolCallList": [{"id": "t9", "name": "cancel", "arguments": {}}],
        }
    }
    async with aiohttp.ClientSession() as http:
        g = await http.post(f"{server.urls(a)['tools_url']}/cancel", data="{}")
        v = await http.post(f"{server.base_url}/{SECRET}/vapi", json=msg)
        vbody = await v.json()
        other = await http.post(f"{server.urls(b)['tools_url']}/find", data="{}")
    assert g.status == 409 and "ended" in (await g.json())["error"]
    assert "error" in vbody["results"][0] and "result" not in vbody["results"][0]
    assert [(c.name, c.route) for c in a.late] == [("cancel", "generic"), ("cancel", "vapi")]
    assert ra.calls == [] and other.status == 200 and len(rb.calls) == 1


async def test_openapi_document_lists_the_episode_tools(server: WebhookServer) -> None:
    a, _, _, _ = _hooks(server)
    server.tools_of[a.token] = [
        ToolSchema(
            name="book",
            description="Book it",
            parameters={"type": "object", "properties": {"d": {"type": "integer"}}},
        )
    ]
    async with aiohttp.ClientSession() as http:
        doc = await (await http.get(server.urls(a)["openapi_url"])).json()
    assert doc["servers"][0]["url"] == server.urls(a)["tools_url"]
    assert list(doc["paths"]) == ["/book"]
    schema = doc["paths"]["/book"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"]["d"] == {"type": "integer"}


def test_one_platform_id_never_routes_to_two_live_episodes() -> None:
    srv = WebhookServer(WebhookConfig())
    a, b = EpisodeHook("a", Recorder("a")), EpisodeHook("b", Recorder("b"))
    srv.registry.bind(a, "id1")
    with pytest.raises(ValueError, match="already belongs to episode a"):
        srv.registry.bind(b, "id1")
