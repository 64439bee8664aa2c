"""Candidates that are endpoints, not models: deployed agents driven over their own interface
(:mod:`.base`), with adapters for the generic HTTP protocol (:mod:`.generic`) and its WebSocket
variant (:mod:`.ws`), Vapi
(:mod:`.vapi`), Retell (:mod:`.retell`) and a LiveKit Agents bot run in process (:mod:`.livekit`);
:func:`create_deployed` builds one from its spec."""

from __future__ import annotations

from urllib.parse import urlsplit

from callbench.models.base import ModelSettings
from callbench.models.deployed.base import (
    AgentReply,
    DeployedCandidate,
    DeployedSession,
    SessionInfo,
    WebhookConfig,
    as_deployed,
)

ADAPTERS = ("http", "ws", "vapi", "retell", "livekit")

__all__ = [
    "ADAPTERS",
    "AgentReply",
    "DeployedCandidate",
    "DeployedSession",
    "SessionInfo",
    "WebhookConfig",
    "as_deployed",
    "create_deployed",
    "split_deployed",
]


def split_deployed(spec: str, model: str) -> tuple[str, str]:
    """``(adapter, target)`` of a deployed spec's model part (``http:<URL>``, ``ws:<URL>``,
    ``vapi:<assistant id>``, ``retell:<agent id>``, ``livekit:<module or file.py>:<factory>``).
    Raises ValueError naming the spec for an unknown adapter, a missing target, an ``http`` URL
    that is not http(s) or a ``ws`` URL that is not ws(s), a URL that holds userinfo or a query
    (the spec is saved in the manifest: credentials go in ``extra_headers`` as ``env:VAR``), or a
    ``livekit`` target that is not ``<module or file.py>:<factory>``."""
    adapter, _, target = model.partition(":")
    if adapter not in ADAPTERS:
        raise ValueError(
            f"model spec {spec!r}: unknown deployed adapter {adapter!r}; expected "
            "deployed:http:<URL>, deployed:ws:<URL>, deployed:vapi:<assistant id>, "
            "deployed:retell:<agent id> or deployed:livekit:<module or file.py>:<factory>"
        )
    if not target.strip():
        raise ValueError(f"model spec {spec!r}: deployed:{adapter} needs a target after the colon")
    if adapter in ("http", "ws"):
        schemes = ("http", "https") if adapter == "http" else ("ws", "wss")
        try:
            parts = urlsplit(target)
        except ValueError as e:
            raise ValueError(f"model spec {spec!r}: not a URL ({e})") from None
        if parts.scheme not in schemes or not parts.hostname:
            raise ValueError(
                f"model spec {spec!r}: expected {'an' if adapter == 'http' else 'a'} "
                f"{schemes[0]}:// or {schemes[1]}:// URL "
                f"after deployed:{adapter}:"
            )
        if "@" in parts.netloc or parts.query:
            raise ValueError(
                f"model spec {spec!r}: the URL may hold no user, password or query (the spec "
                "is saved); send credentials as extra_headers with env:VAR values"
            )
    if adapter == "livekit":
        from callbench.models.deployed.livekit import check_target

        check_target(spec, target.strip())
    return adapter, target.strip()


def create_deployed(
    spec: str, model: str, settings: ModelSettings, webhook: WebhookConfig | None = None
) -> DeployedCandidate:
    """The deployed candidate of ``spec`` (its model part ``model``). Raises ValueError as
    :func:`split_deployed` does, or naming the missing platform key variable."""
    adapter, target = split_deployed(spec, model)
    if adapter == "http":
        from callbench.models.deployed.generic import HttpDeployed

        return HttpDeployed(spec, settings, target, webhook)
    if adapter == "ws":
        from callbench.models.deployed.ws import WsDeployed

        return WsDeployed(spec, settings, target, webhook)
    if adapter == "livekit":
        from callbench.models.deployed.livekit import LiveKitDeployed

        return LiveKitDeployed(spec, settings, target, webhook)
    if adapter == "vapi":
        from callbench.models.deployed.vapi import VapiDeployed

        return VapiDeployed(spec, settings, target, webhook)
    from callbench.models.deployed.retell import RetellDeployed

    return RetellDeployed(spec, settings, target, webhook)
