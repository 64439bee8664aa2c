"""The WebSocket variant of the generic protocol (``deployed:ws:<ws:// or wss:// URL>``), documented
in ``docs/deployed.md`` and served by the reference agent of ``examples/deployed_agent/``.

One WebSocket per episode to the URL (``settings.extra_headers`` are sent on the handshake, e.g.
``Authorization: env:AGENT_KEY``); every frame is a JSON text frame, and the agent answers each
request frame with exactly one ``reply`` frame, in order:

``{"type": "start", "episode_id", "agent_id", "scenario_id", "tools", "tools_url", "openapi_url"}``
    the call starts: answered ``{"type": "reply", "messages": [str], "ended": bool}`` (its greeting).
``{"type": "turn", "text": str}``
    the caller's words as the agent would hear them: answered with a ``reply``.
``{"type": "end"}``
    the episode is over; callbench closes the socket without waiting for an answer.

An agent that cannot answer sends ``{"type": "error", "error": str}``. Tool calls are made on the
webhook as in the HTTP protocol (``POST {tools_url}/{tool name}``) while a request is in flight.
Faults are the fault ledger's, for the candidate role: ``connection`` (the handshake fails),
``auth``/``not_found``/``server_error``/``client_error`` (the handshake's HTTP status),
``timeout`` (no reply in ``settings.timeout_s``), ``reset`` (the socket closes before the reply),
``malformed_body`` (a frame that is not a JSON reply, or an ``error`` frame).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from callbench.models.base import InfrastructureError, ModelSettings
from callbench.models.deployed.base import AgentReply, DeployedCandidate, SessionInfo, WebhookConfig
from callbench.models.deployed.generic import reply_from
from callbench.models.deployed.http import status_kind
from callbench.models.faults import note_fault, note_request
from callbench.models.remote.secrets import Redactor, resolve_headers

MAX_FRAME_BYTES = 4 * 1024 * 1024


class WsSession:
    """One episode's socket (module docstring)."""

    def __init__(self, owner: WsDeployed, ws: aiohttp.ClientWebSocketResponse, info: SessionInfo) -> None:
        self.owner = owner
        self.ws = ws
        self.info = info
        self.platform_ids: list[str] = []
        self.started = False

    def _fault(self, message: str, kind: str) -> InfrastructureError:
        note_fault("candidate", kind)
        text = self.owner.redactor.clean(f"{self.owner.spec}: {message}")
        return InfrastructureError(text, kind=kind, role="candidate", retryable=False)

    async def send(self, text: str | None) -> AgentReply:
        if not self.started:
            self.started = True
            i = self.info
            first: dict[str, Any] = {
                "type": "start",
                "episode_id": i.episode_id,
                "agent_id": i.agent_id,
                "scenario_id": i.scenario_id,
                "tools": [t.model_dump() for t in i.tools],
                "tools_url": i.tools_url,
                "openapi_url": i.openapi_url,
            }
            greeting = await self._request(first)
            if text is None or greeting.ended:
                return greeting
            reply = await self._request({"type": "turn", "text": text})
            return AgentReply(messages=greeting.messages + reply.messages, ended=reply.ended)
        return await self._request({"type": "turn", "text": text or ""})

    async def _request(self, frame: dict[str, Any]) -> AgentReply:
        note_request("candidate")
        timeout = self.owner.settings.timeout_s
        try:
            await self.ws.send_str(json.dumps(frame, ensure_ascii=False))
            msg = await asyncio.wait_for(self.ws.receive(), timeout)
        except TimeoutError:
            raise self._fault(f"no reply within {timeout:g} s", "timeout") from None
        except (aiohttp.ClientError, ConnectionError):
            raise self._fault("the socket closed before the reply", "reset") from None
        if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
            raise self._fault("the socket closed before the reply", "reset")
        if msg.type == aiohttp.WSMsgType.ERROR:
            raise self._fault("the socket failed before the reply", "reset")
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise self._fault("expected a JSON text frame", "malformed_body")
        try:
            data = json.loads(msg.data)
        except ValueError:
            raise self._fault("a reply frame is not JSON", "malformed_body") from None
        if isinstance(data, dict) and data.get("type") == "error":
            raise self._fault(
                f"the agent answered an error: {str(data.get('error'))[:200]}", "malformed_body"
            )
        if not isinstance(data, dict) or data.get("type") != "reply":
            raise self._fault('expected a frame {"type": "reply", ...}', "malformed_body")
        try:
            return reply_from(data, f"{self.owner.spec}: reply frame")
        except InfrastructureError as e:
            note_fault("candidate", e.kind)
            raise

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # the episode is over; the agent's socket is its own to end
            if not self.ws.closed:
                await self.ws.send_str(json.dumps({"type": "end"}))
            await self.ws.close()


class WsDeployed(DeployedCandidate):
    """``deployed:ws:<URL>``: the WebSocket protocol (module docstring)."""

    adapter = "ws"

    def __init__(
        self, spec: str, settings: ModelSettings, target: str, webhook: WebhookConfig | None = None
    ) -> None:
        super().__init__(spec, settings, target, webhook)
        self.url = target
        self.redactor = Redactor()
        self.redactor.add(self.webhook.secret)
        self._headers = resolve_headers(settings.extra_headers, self.redactor)
        self._http: aiohttp.ClientSession | None = None

    async def http(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
            self.on_close(self._http.close)
        return self._http

    async def open(self, info: SessionInfo) -> WsSession:
        """Connect the episode's socket (the first frame is sent by the first ``send``). Raises
        InfrastructureError: ``connection``, ``timeout`` or the handshake status's kind."""
        parts = urlsplit(self.url)
        port = f":{parts.port}" if parts.port else ""
        where = f"{self.spec}: {parts.scheme}://{parts.hostname}{port}{parts.path}"
        note_request("candidate")
        kind, message = "connection", "the handshake failed"
        try:
            connect = (await self.http()).ws_connect(
                self.url,
                headers=dict(self._headers),
                timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
                max_msg_size=MAX_FRAME_BYTES,
                autoping=True,
            )
            ws = await asyncio.wait_for(connect, self.settings.timeout_s)
            return WsSession(self, ws, info)
        except aiohttp.WSServerHandshakeError as e:
            kind, message = status_kind(e.status), f"handshake answered HTTP {e.status}"
        except TimeoutError:
            kind, message = "timeout", "no handshake in time"
        except (aiohttp.ClientError, OSError) as e:
            message = f"the handshake failed: {type(e).__name__}"
        note_fault("candidate", kind)
        raise InfrastructureError(
            f"{where}: {message}",
            kind=kind,
            role="candidate",
            retryable=kind in ("rate_limit", "server_error"),
        )
