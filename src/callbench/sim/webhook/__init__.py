"""The webhook server that exposes an episode's backend to a deployed agent
(:mod:`.server`), its per-episode routing (:mod:`.hooks`) and wire formats (:mod:`.formats`)."""

from callbench.sim.webhook.hooks import CallAnswer, EpisodeHook, HookRegistry, IncomingCall
from callbench.sim.webhook.server import WebhookServer, webhook_for

__all__ = ["CallAnswer", "EpisodeHook", "HookRegistry", "IncomingCall", "WebhookServer", "webhook_for"]
