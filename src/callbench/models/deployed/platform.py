"""Shared parts of the hosted-platform adapters (Vapi, Retell): the API key from the
environment, an HTTP session, and the deployed configuration's tools and hash."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import aiohttp

from callbench.models.base import ModelSettings, ToolSchema
from callbench.models.deployed.base import DeployedCandidate, WebhookConfig
from callbench.models.remote.secrets import Redactor, resolve_headers


def config_sha256(config: Any) -> str:
    """SHA-256 (hex) of a configuration as canonical JSON (sorted keys, compact)."""
    text = json.dumps(config, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class PlatformDeployed(DeployedCandidate):
    """A hosted platform reached with a bearer key read from ``key_env`` (never saved: it is
    registered with the adapter's redactor, so no error message shows it). ``default_base``: the
    platform's API address (``settings.base_url`` overrides it, e.g. a loopback fake)."""

    key_env = ""
    default_base = ""

    def __init__(
        self,
        spec: str,
        settings: ModelSettings,
        target: str,
        webhook: WebhookConfig | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(spec, settings, target, webhook)
        env = dict(os.environ if env is None else env)
        key = env.get(self.key_env)
        if not key:
            raise ValueError(f"{spec}: set {self.key_env} to the platform's API key")
        self.redactor = Redactor()
        self.redactor.add(key)
        self.redactor.add(self.webhook.secret)
        self._headers = {
            "Authorization": f"Bearer {key}",
            **resolve_headers(settings.extra_headers, self.redactor),
        }
        self.base = (settings.base_url or self.default_base).rstrip("/")
        self._http: aiohttp.ClientSession | None = None

    def headers(self) -> dict[str, str]:
        return dict(self._headers)

    async def http(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
            self.on_close(self._http.close)
        return self._http

    def deployed_tools(self, config: dict[str, Any]) -> list[ToolSchema] | None:
        """The function tools of a deployed configuration (subclasses read their format)."""
        raise NotImplementedError


def tool_schema(name: Any, description: Any, parameters: Any) -> ToolSchema | None:
    """A :class:`ToolSchema` from a platform's tool entry, or None when it has no string name."""
    if not isinstance(name, str) or not name:
        return None
    return ToolSchema(
        name=name,
        description=description if isinstance(description, str) else "",
        parameters=parameters if isinstance(parameters, dict) else {},
    )
