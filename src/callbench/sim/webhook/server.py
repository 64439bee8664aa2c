"""The mock backend over HTTP: callbench's answer to a deployed agent's tool calls.

Routes (``{secret}``: the run's path secret, :class:`~callbench.models.deployed.base.WebhookConfig`):

``POST /{secret}/e/{token}/tools/{name}``
    generic: the body is the arguments object (optional header ``X-Tool-Call-Id``: the agent's
    own call id); answered ``{"result", "call_ended"}``.
``GET /{secret}/e/{token}/openapi.json``
    the OpenAPI document of the episode's generic routes.
``POST /{secret}/vapi``
    Vapi server messages; ``tool-calls`` answered ``{"results": [{"toolCallId", "result"}]}``,
    other message types acknowledged ``{}``; routed by the message's call, chat or session id.
``POST /{secret}/retell``
    Retell custom functions, signature checked with ``RETELL_API_KEY``; answered with the result;
    routed by ``call.chat_id`` or ``call.call_id``.

Every bad request gets a JSON ``{"error": ...}`` with a 4xx status and touches no episode: a wrong
secret or unknown route 404, an unknown episode 404, a body that is not JSON or not of the format
400, a bad signature 401, a body over the size bound 413, a body that does not arrive in time 408.
A call for an episode that has ended is recorded as late on that episode and answered 409 (Vapi:
``results`` with ``error``). The server binds to loopback unless configured otherwise.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from typing import Any

from aiohttp import web

from callbench.models.base import ToolSchema
from callbench.models.deployed.base import DeployedCandidate, WebhookConfig
from callbench.sim.webhook.formats import (
    BadRequest,
    openapi_document,
    retell_call,
    retell_verified,
    vapi_calls,
    vapi_ids,
)
from callbench.sim.webhook.hooks import CallAnswer, EpisodeHook, HookRegistry, IncomingCall
from callbench.trace import LateToolCall


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class WebhookServer:
    """One listening webhook (module docstring). ``registry`` holds the episodes' hooks;
    ``base_url`` is set by :meth:`start`; ``tools_of`` maps a hook token to the tools offered
    (for the OpenAPI document); ``unrouted`` counts requests no episode claimed."""

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self.registry = HookRegistry()
        self.tools_of: dict[str, list[ToolSchema]] = {}
        self.base_url = ""
        self.unrouted = 0
        self._runner: web.AppRunner | None = None
        self.users = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> str:
        """Listen on the configured host and port; returns the base URL (``public_url`` when set)."""
        app = web.Application(client_max_size=self.config.max_body_bytes)
        app.add_routes(
            [
                web.post("/{secret}/e/{token}/tools/{name}", self._generic),
                web.get("/{secret}/e/{token}/openapi.json", self._openapi),
                web.post("/{secret}/vapi", self._vapi),
                web.post("/{secret}/retell", self._retell),
            ]
        )
        self._runner = web.AppRunner(app, access_log=None)  # access lines would show the secret
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        local = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        self.base_url = (self.config.public_url or local).rstrip("/")
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def urls(self, hook: EpisodeHook) -> dict[str, str]:
        """The webhook addresses of ``hook``'s episode (they hold the secret: never saved)."""
        root = f"{self.base_url}/{self.config.secret}"
        return {
            "tools_url": f"{root}/e/{hook.token}/tools",
            "openapi_url": f"{root}/e/{hook.token}/openapi.json",
            "vapi_url": f"{root}/vapi",
            "retell_url": f"{root}/retell",
        }

    # ------------------------------------------------------------------ helpers

    def _secret_ok(self, request: web.Request) -> bool:
        return hmac.compare_digest(request.match_info["secret"].encode(), self.config.secret.encode())

    async def _body(self, request: web.Request) -> bytes:
        try:
            return await asyncio.wait_for(request.read(), self.config.read_timeout_s)
        except TimeoutError:
            raise web.HTTPRequestTimeout(
                text=json.dumps({"error": "the body did not arrive in time"}), content_type="application/json"
            ) from None
        except web.HTTPRequestEntityTooLarge:
            raise web.HTTPRequestEntityTooLarge(
                max_size=self.config.max_body_bytes,
                actual_size=request.content_length or 0,
                text=json.dumps({"error": f"body over {self.config.max_body_bytes} bytes"}),
                content_type="application/json",
            ) from None

    @staticmethod
    def _json(raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise BadRequest("the body is not JSON") from None

    @staticmethod
    def _answer(
        hook: EpisodeHook, calls: list[IncomingCall], route: str, arrived: float
    ) -> list[CallAnswer] | None:
        """The episode's answers, or None (recorded as late) when it has ended."""
        if hook.ended:
            hook.late.extend(
                LateToolCall(name=c.name, raw_arguments=c.raw_arguments, route=route) for c in calls
            )
            return None
        return hook.handler(calls, route, arrived)

    # ------------------------------------------------------------------ routes

    async def _generic(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        if not self._secret_ok(request):
            return _error(404, "not found")
        hook = self.registry.by_token(request.match_info["token"])
        if hook is None:
            self.unrouted += 1
            return _error(404, "no such episode")
        raw = await self._body(request)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _error(400, "the body is not UTF-8")
        call_id = request.headers.get("X-Tool-Call-Id", "")[:200]
        call = IncomingCall(call_id=call_id, name=request.match_info["name"], raw_arguments=text)
        answers = self._answer(hook, [call], "generic", arrived)
        if answers is None:
            return _error(409, "the episode has ended; the call was not executed")
        return web.json_response({"result": answers[0].result, "call_ended": answers[0].ended_call})

    async def _openapi(self, request: web.Request) -> web.Response:
        if not self._secret_ok(request):
            return _error(404, "not found")
        hook = self.registry.by_token(request.match_info["token"])
        if hook is None:
            return _error(404, "no such episode")
        url = self.urls(hook)["tools_url"]
        return web.json_response(openapi_document(self.tools_of.get(hook.token, []), url))

    async def _vapi(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        if not self._secret_ok(request):
            return _error(404, "not found")
        want = self.config.vapi_secret
        if want is not None and not hmac.compare_digest(
            request.headers.get("X-Vapi-Secret", "").encode(), want.encode()
        ):
            return _error(401, "X-Vapi-Secret does not match VAPI_WEBHOOK_SECRET")
        try:
            message, calls = vapi_calls(self._json(await self._body(request)))
        except BadRequest as e:
            return _error(400, str(e))
        if not calls:
            return web.json_response({})
        hook = self.registry.by_platform(vapi_ids(message))
        if hook is None:
            self.unrouted += 1
            return _error(404, "no episode has this call, chat or session id")
        answers = self._answer(hook, calls, "vapi", arrived)
        if answers is None:
            return web.json_response(
                {
                    "results": [
                        {"toolCallId": c.call_id, "error": "the call has ended; not executed"} for c in calls
                    ]
                }
            )
        return web.json_response(
            {
                "results": [
                    {
                        "toolCallId": c.call_id,
                        "name": c.name,
                        "result": json.dumps(a.result, ensure_ascii=False),
                    }
                    for c, a in zip(calls, answers, strict=True)
                ]
            }
        )

    async def _retell(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        if not self._secret_ok(request):
            return _error(404, "not found")
        raw = await self._body(request)
        key = self.config.retell_key
        if key is None:
            return _error(401, "set RETELL_API_KEY so callbench can verify Retell's signature")
        if not retell_verified(raw, key, request.headers.get("X-Retell-Signature")):
            return _error(401, "X-Retell-Signature does not verify")
        try:
            ids, call = retell_call(self._json(raw))
        except BadRequest as e:
            return _error(400, str(e))
        hook = self.registry.by_platform(ids)
        if hook is None:
            self.unrouted += 1
            return _error(404, "no episode has this chat or call id")
        answers = self._answer(hook, [call], "retell", arrived)
        if answers is None:
            return _error(409, "the call has ended; not executed")
        return web.json_response(answers[0].result)


_servers: dict[tuple[Any, ...], WebhookServer] = {}


async def webhook_for(candidate: DeployedCandidate) -> WebhookServer:
    """The webhook serving ``candidate`` in the running event loop, started on first use and
    stopped when the candidate closes. Candidates configured with the same fixed host, port and
    secret share one server (a platform is configured with one URL)."""
    cfg = candidate.webhook
    loop = asyncio.get_running_loop()
    key: tuple[Any, ...] = (
        (id(loop), cfg.host, cfg.port, cfg.secret) if cfg.port else (id(loop), id(candidate))
    )
    server = _servers.get(key)
    if server is None or server._runner is None:
        server = WebhookServer(cfg)
        await server.start()
        _servers[key] = server
    if getattr(candidate, "_webhook_key", None) != key:
        server.users += 1
        candidate._webhook_key = key  # type: ignore[attr-defined]

        async def release() -> None:
            server.users -= 1
            if server.users <= 0:
                _servers.pop(key, None)
                await server.stop()

        candidate.on_close(release)
    return server
