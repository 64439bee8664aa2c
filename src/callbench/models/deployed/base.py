"""Deployed candidates: agents reached over an endpoint, not models we prompt.

A deployed agent keeps its own prompt, model and tools; callbench only sees what it says and the
tool calls it makes on callbench's webhook (:mod:`callbench.sim.webhook`). The interface is one
session per episode (:class:`DeployedCandidate.open`): :meth:`DeployedSession.send` takes the
caller's observed text (``None`` for the start of the call, when the agent greets) and returns an
:class:`AgentReply` (the agent's messages and whether it ended the call); :meth:`DeployedSession.close`
ends it. Tool calls never come back in the reply: the agent makes them on the webhook while
``send`` is in flight, and the episode loop merges them into the trace in arrival order.

A :class:`DeployedCandidate` is also a :class:`~callbench.models.base.ModelClient` (``spec``,
``settings``, ``aclose``) so runs, manifests and candidate ids treat it like any candidate; its
``complete`` refuses, as it cannot be prompted.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from callbench.models.base import ModelRequest, ModelResponse, ModelSettings, ToolSchema

UNOBSERVED = ("system_prompt", "token_usage", "model_reasoning")
"""What no deployed adapter can see of the agent (recorded in every deployed trace)."""
LOOPBACK = "127.0.0.1"


@dataclass
class WebhookConfig:
    """Where callbench's webhook listens and how it is reached. ``host``/``port``: bind address
    (loopback and an ephemeral port by default: ``CALLBENCH_WEBHOOK_HOST``,
    ``CALLBENCH_WEBHOOK_PORT``); ``public_url``: the base URL a hosted platform calls (a tunnel
    to that port, ``CALLBENCH_WEBHOOK_PUBLIC_URL``; None: the local address); ``secret``: the
    per-run path secret (``CALLBENCH_WEBHOOK_SECRET`` for a URL configured once on a platform,
    else random per process; a credential, never saved); ``retell_key``: the Retell API key that
    signs custom-function requests (None: no Retell signature check configured, so Retell
    requests are refused). ``max_body_bytes`` and ``read_timeout_s`` bound each request."""

    host: str = LOOPBACK
    port: int = 0
    public_url: str | None = None
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    retell_key: str | None = field(default=None, repr=False)
    vapi_secret: str | None = field(default=None, repr=False)
    max_body_bytes: int = 256 * 1024
    read_timeout_s: float = 10.0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> WebhookConfig:
        """Read the ``CALLBENCH_WEBHOOK_*`` variables (see the class docstring), ``RETELL_API_KEY``
        and ``VAPI_WEBHOOK_SECRET``. Raises ValueError naming a port that is not a number."""
        env = dict(os.environ if env is None else env)
        port_text = env.get("CALLBENCH_WEBHOOK_PORT", "0")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"CALLBENCH_WEBHOOK_PORT={port_text!r}: expected a port number") from None
        cfg = cls(
            host=env.get("CALLBENCH_WEBHOOK_HOST", LOOPBACK),
            port=port,
            public_url=env.get("CALLBENCH_WEBHOOK_PUBLIC_URL") or None,
            retell_key=env.get("RETELL_API_KEY") or None,
            vapi_secret=env.get("VAPI_WEBHOOK_SECRET") or None,
        )
        if env.get("CALLBENCH_WEBHOOK_SECRET"):
            cfg.secret = env["CALLBENCH_WEBHOOK_SECRET"]
        return cfg


class SessionInfo(BaseModel):
    """What an adapter gets to open one episode's session: ids (metadata the agent may log), the
    bundle agent's tools as callbench offers them, and the webhook addresses of this episode:
    ``tools_url`` (generic route; ``POST {tools_url}/{tool name}`` with the arguments object),
    ``openapi_url`` (the OpenAPI document of those routes), ``vapi_url`` and ``retell_url``
    (platform routes, shared by the run and routed by the platform's call or chat id).
    The URLs hold the run's secret: adapters send them to the agent, never to a saved file."""

    episode_id: str
    agent_id: str
    scenario_id: str
    tools: list[ToolSchema] = Field(default_factory=list)
    tools_url: str = ""
    openapi_url: str = ""
    vapi_url: str = ""
    retell_url: str = ""


class AgentReply(BaseModel):
    """One answer of the agent: ``messages`` it said, in order (empty: silence), and ``ended``
    (the agent or platform ended the call)."""

    messages: list[str] = Field(default_factory=list)
    ended: bool = False


class DeployedSession(Protocol):
    """One episode's conversation with a deployed agent. ``platform_ids``: the ids the platform
    puts on its webhook requests for this conversation (call id, chat id, session id), filled by
    :meth:`send` or at open, read by the webhook router to find the episode."""

    platform_ids: list[str]

    async def send(self, text: str | None) -> AgentReply:
        """Send the caller's observed text (None: the call starts) and return the agent's reply.
        Raises :class:`~callbench.models.base.InfrastructureError` for platform faults."""
        ...

    async def close(self) -> None:
        """End the conversation on the platform (never raises for a platform fault)."""
        ...


class DeployedCandidate:
    """Base of every deployed adapter. ``spec`` (``deployed:<adapter>:<target>``), ``settings``
    (``base_url`` overrides a platform's API address, ``timeout_s`` bounds each request,
    ``max_attempts`` the tries of a session open), ``adapter`` (its name in traces), ``target``
    (URL or platform id), ``webhook`` (:class:`WebhookConfig`). Subclasses implement
    :meth:`open` and, where the platform lets us read the deployed configuration,
    :meth:`deployed_config`."""

    adapter = "deployed"
    embedded_smoke_test_model = False

    def __init__(
        self, spec: str, settings: ModelSettings, target: str, webhook: WebhookConfig | None = None
    ) -> None:
        self.spec = spec
        self.settings = settings
        self.target = target
        self.webhook = webhook or WebhookConfig.from_env()
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self.config_sha256: str | None = None
        """SHA-256 of the deployed configuration as read before the run (None: not readable)."""

    async def open(self, info: SessionInfo) -> DeployedSession:
        """Open one episode's session. Raises InfrastructureError for platform faults."""
        raise NotImplementedError

    async def deployed_config(self) -> dict[str, Any] | None:
        """The deployed agent's configuration as the platform reports it (None: not readable)."""
        return None

    def deployed_tools(self, config: dict[str, Any]) -> list[ToolSchema] | None:
        """The function tools of a configuration :meth:`deployed_config` returned (None: this
        adapter cannot list them, so they are not compared with the bundle)."""
        return None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Refused: a deployed agent is driven through :meth:`open`, not prompted."""
        raise TypeError(f"{self.spec}: a deployed candidate is driven by sessions, not completion requests")

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Run ``closer`` when the candidate closes (the webhook server started for it)."""
        self._closers.append(closer)

    async def aclose(self) -> None:
        """Close what was started for this candidate (webhook servers, HTTP sessions)."""
        closers, self._closers = self._closers, []
        for c in closers:
            await c()


def as_deployed(client: Any) -> DeployedCandidate | None:
    """The :class:`DeployedCandidate` under ``client`` (through wrappers' ``inner``), or None."""
    for _ in range(6):
        if isinstance(client, DeployedCandidate):
            return client
        client = getattr(client, "inner", None)
        if client is None:
            return None
    return None
