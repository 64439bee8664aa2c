"""The WebSocket variant of the generic protocol: the reference agent of ``examples/deployed_agent``
driven over ``/ws`` is graded exactly as the model making the same calls, concurrent episodes keep
their backends apart, and a socket that fails is a candidate fault, never the agent's score."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from tests.sim.deployed_helpers import reference_agent_module, scripted_brain, serve, starter
from tests.sim.test_deployed import SCENARIOS, _calls, _episode, _graded

from callbench.models.base import InfrastructureError, ModelSettings
from callbench.models.deployed import create_deployed
from callbench.models.deployed.base import SessionInfo, WebhookConfig
from callbench.models.faults import collect_faults
from callbench.models.scripted.models import create_scripted
from callbench.trace import EndReason
from waiting import scale


def _ws(url: str, **settings: object) -> object:
    target = url.replace("http://", "ws://", 1) + "/ws"
    return create_deployed(
        f"deployed:ws:{target}", f"ws:{target}", ModelSettings(**settings), WebhookConfig()
    )


async def test_ws_agent_graded_as_the_model_and_episodes_kept_apart() -> None:
    bundle = starter()
    ref = reference_agent_module()
    runs = [(sid, i) for i in range(2) for sid in SCENARIOS]
    async with serve(ref.make_app(scripted_brain(bundle))) as url:
        cand = _ws(url)
        try:
            traces = await asyncio.gather(*[_episode(cand, sid, f"w{i}-{sid}") for sid, i in runs])
        finally:
            await cand.aclose()  # type: ignore[attr-defined]
    for tr in traces:
        model = await _episode(
            create_scripted("scripted:reference", None, bundle), tr.scenario_id, tr.episode_id
        )
        assert model.tool_events and tr.end_reason == model.end_reason, tr.skip_reason
        assert _calls(tr) == _calls(model)
        assert _graded(tr) == _graded(model)
        assert tr.state == model.state
        assert tr.deployed is not None and tr.deployed.adapter == "ws"
        said = [m.content for m in tr.messages if m.role == "assistant" and m.content]
        assert said == [m.content for m in model.messages if m.role == "assistant" and m.content]


Handler = Callable[[web.WebSocketResponse], Awaitable[None]]


def _agent(on_turn: Handler) -> web.Application:
    """A WebSocket agent that greets, then lets ``on_turn`` answer the first caller turn."""

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.json()["type"] == "start":
                await ws.send_json({"type": "reply", "messages": ["Hello, clinic."], "ended": False})
            else:
                await on_turn(ws)
                break
        return ws

    app = web.Application()
    app.add_routes([web.get("/ws", socket)])
    return app


async def _hang_up(ws: web.WebSocketResponse) -> None:
    await ws.close()


async def _error_frame(ws: web.WebSocketResponse) -> None:
    await ws.send_json({"type": "error", "error": "brain unavailable"})


RELEASE: dict[int, asyncio.Event] = {}
"""The slow agent's answer is held until the test releases it (keyed by the running loop)."""
SLOW_LIMIT_S = round(2.0 * scale(), 3)
"""The candidate's timeout in the slow-agent case; every other case keeps the default (60 s), so a
loaded machine never turns a greeting late into a timeout."""


async def _slow(ws: web.WebSocketResponse) -> None:
    await RELEASE[id(asyncio.get_running_loop())].wait()


async def _not_a_reply(ws: web.WebSocketResponse) -> None:
    await ws.send_str("not json")


@pytest.mark.parametrize(
    ("on_turn", "kind", "message"),
    [
        (_hang_up, "reset", "the socket closed before the reply"),
        (_error_frame, "malformed_body", "the agent answered an error: brain unavailable"),
        (_slow, "timeout", f"no reply within {SLOW_LIMIT_S:g} s"),
        (_not_a_reply, "malformed_body", "a reply frame is not JSON"),
    ],
)
async def test_a_failing_socket_is_a_candidate_fault(on_turn: Handler, kind: str, message: str) -> None:
    release = RELEASE.setdefault(id(asyncio.get_running_loop()), asyncio.Event())
    async with serve(_agent(on_turn)) as url:
        cand = _ws(url, **({"timeout_s": SLOW_LIMIT_S} if on_turn is _slow else {}))
        try:
            with collect_faults() as ledger:
                trace = await _episode(cand, SCENARIOS[0], "f-r0")
        finally:
            release.set()
            await cand.aclose()  # type: ignore[attr-defined]
    RELEASE.pop(id(asyncio.get_running_loop()), None)
    assert trace.end_reason == EndReason.SKIPPED
    assert trace.skip_reason is not None and message in trace.skip_reason
    assert (ledger.skip_role, ledger.skip_kind) == ("candidate", kind)
    assert trace.messages[1].content == "Hello, clinic."  # the greeting arrived before the fault


async def test_a_refused_handshake_is_an_auth_fault_without_the_header() -> None:
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": "bad token"}, status=401)

    app = web.Application()
    app.add_routes([web.get("/ws", refuse)])
    async with serve(app) as url:
        target = url.replace("http://", "ws://") + "/ws"
        cand = create_deployed(
            f"deployed:ws:{target}",
            f"ws:{target}",
            ModelSettings(extra_headers={"Authorization": "env:CB_TEST_WS_TOKEN"}),
            WebhookConfig(),
        )
        try:
            with pytest.raises(InfrastructureError) as err:
                await cand.open(SessionInfo(episode_id="e", agent_id="a", scenario_id="s"))  # type: ignore[attr-defined]
        finally:
            await cand.aclose()  # type: ignore[attr-defined]
    assert err.value.kind == "auth" and "handshake answered HTTP 401" in str(err.value)
    assert "canary-ws-token" not in str(err.value)


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CB_TEST_WS_TOKEN", "Bearer canary-ws-token")
