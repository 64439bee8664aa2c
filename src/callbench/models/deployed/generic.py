"""The generic HTTP protocol for home-grown agents (``deployed:http:<base URL>``), documented in
``docs/deployed.md`` with a reference server in ``examples/deployed_agent/``.

Requests (JSON; ``settings.extra_headers`` are sent with each, e.g. ``Authorization: env:AGENT_KEY``):

``POST {base}/sessions``
    ``{"episode_id", "agent_id", "scenario_id", "tools": [{name, description, parameters}],
    "tools_url", "openapi_url"}`` -> ``{"session_id": str, "messages": [str], "ended": bool}``:
    the agent's greeting (``messages`` may be empty).
``POST {base}/sessions/{session_id}/turns``
    ``{"text": str}`` (the caller's words as the agent would hear them) ->
    ``{"messages": [str], "ended": bool}``.
``DELETE {base}/sessions/{session_id}``
    ends the session (any 2xx; failures are ignored).

The agent calls its tools while a request is in flight: ``POST {tools_url}/{tool name}`` with the
arguments object, answered ``{"result": ..., "call_ended": bool}`` (:mod:`callbench.sim.webhook`).
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote

import aiohttp

from callbench.models.base import InfrastructureError, ModelSettings
from callbench.models.deployed.base import AgentReply, DeployedCandidate, SessionInfo, WebhookConfig
from callbench.models.deployed.http import request_json
from callbench.models.remote.secrets import Redactor, resolve_headers


def reply_from(data: Any, where: str) -> AgentReply:
    """An :class:`AgentReply` from a reply body ``{"messages": [str], "ended": bool}``. Raises
    InfrastructureError (``malformed_body``) naming ``where`` for any other shape."""
    if not isinstance(data, dict):
        raise InfrastructureError(
            f"{where}: expected a JSON object with messages and ended",
            kind="malformed_body",
            role="candidate",
            retryable=False,
        )
    msgs, ended = data.get("messages", []), data.get("ended", False)
    if not isinstance(msgs, list) or not all(isinstance(m, str) for m in msgs) or not isinstance(ended, bool):
        raise InfrastructureError(
            f"{where}: messages must be a list of strings and ended a boolean",
            kind="malformed_body",
            role="candidate",
            retryable=False,
        )
    return AgentReply(messages=[m for m in msgs if m.strip()], ended=ended)


class HttpSession:
    """One session of the generic protocol (module docstring)."""

    def __init__(self, owner: HttpDeployed, session_id: str, greeting: AgentReply) -> None:
        self.owner = owner
        self.session_id = session_id
        self.platform_ids: list[str] = []
        self._greeting: AgentReply | None = greeting

    async def send(self, text: str | None) -> AgentReply:
        if text is None and self._greeting is not None:
            greeting, self._greeting = self._greeting, None
            return greeting
        o = self.owner
        data = await request_json(
            await o.http(),
            "POST",
            f"{o.base}/sessions/{quote(self.session_id)}/turns",
            adapter=o.spec,
            body={"text": text or ""},
            headers=o.headers(),
            timeout_s=o.settings.timeout_s,
            redactor=o.redactor,
        )
        return reply_from(data, f"{o.spec}: turn reply")

    async def close(self) -> None:
        o = self.owner
        with contextlib.suppress(
            InfrastructureError
        ):  # the episode is over; a session the agent cannot delete is its own to expire
            await request_json(
                await o.http(),
                "DELETE",
                f"{o.base}/sessions/{quote(self.session_id)}",
                adapter=o.spec,
                headers=o.headers(),
                timeout_s=min(10.0, o.settings.timeout_s),
            )


class HttpDeployed(DeployedCandidate):
    """``deployed:http:<base URL>``: the generic protocol (module docstring)."""

    adapter = "http"

    def __init__(
        self, spec: str, settings: ModelSettings, target: str, webhook: WebhookConfig | None = None
    ) -> None:
        super().__init__(spec, settings, target, webhook)
        self.base = target.rstrip("/")
        self.redactor = Redactor()
        self.redactor.add(self.webhook.secret)
        self._headers = resolve_headers(settings.extra_headers, self.redactor)
        self._http: aiohttp.ClientSession | None = None

    def headers(self) -> dict[str, str]:
        return dict(self._headers)

    async def http(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
            self.on_close(self._http.close)
        return self._http

    async def open(self, info: SessionInfo) -> HttpSession:
        body = {
            "episode_id": info.episode_id,
            "agent_id": info.agent_id,
            "scenario_id": info.scenario_id,
            "tools": [t.model_dump() for t in info.tools],
            "tools_url": info.tools_url,
            "openapi_url": info.openapi_url,
        }
        data = await request_json(
            await self.http(),
            "POST",
            f"{self.base}/sessions",
            adapter=self.spec,
            body=body,
            headers=self.headers(),
            timeout_s=self.settings.timeout_s,
            attempts=self.settings.max_attempts,
            redactor=self.redactor,
        )
        sid = data.get("session_id") if isinstance(data, dict) else None
        if not isinstance(sid, str) or not sid:
            raise InfrastructureError(
                f"{self.spec}: POST /sessions: expected session_id (a string)",
                kind="malformed_body",
                role="candidate",
                retryable=False,
            )
        return HttpSession(self, sid, reply_from(data, f"{self.spec}: POST /sessions"))
