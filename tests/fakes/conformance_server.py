"""A conformance fake on loopback: OpenAI Chat Completions
(``POST .../chat/completions``, base URL :attr:`ConformanceServer.url`) and the Anthropic Messages
API (``POST /v1/messages``, base URL :attr:`ConformanceServer.root`) that enforce the providers'
documented request rules (:mod:`callbench.models.remote.rules`,
:mod:`callbench.models.remote.request_rules`) on every request.

A request a provider would reject gets that provider's 400 body:

- OpenAI: ``{"error": {"message", "type": "invalid_request_error", "param", "code"}}`` with code
  ``invalid_function_parameters`` for a tool's parameter schema (the message as the API words
  it: "Invalid schema for function 'x': ..."), ``invalid_value`` for a tool name, null otherwise;
- Anthropic: ``{"type": "error", "error": {"type": "invalid_request_error", "message":
  "<param>: <message>"}}``;
- with ``gemini=True`` the OpenAI route impersonates a strict Gemini-style OpenAI-compatible
  endpoint: the Gemini schema subset is enforced on tools (unless ``gemini_tools=False``: then
  tools get OpenAI's rules) and on ``response_format`` schemas (strict or not), and a rejection
  is Gemini's body, a list holding
  ``{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name ...",
  "status": "INVALID_ARGUMENT"}}``, whose wording names neither ``response_format`` nor
  ``json_schema``.

A valid request is answered as the role it plays:

- the candidate (a request with tools that forces none) replays the scenario's reference path,
  as ``scripted:reference`` does: turn k is its ``before_tools`` text with every tool call, then,
  once the tool results are in, its ``speech``. The scenario, the turn and whether the request
  ends with tool results come from the headers ``x-callbench-scenario``, ``x-callbench-turn`` and
  ``x-callbench-after-tools``, which the test's transport sets from the request being sent
  (:class:`HintedClient`, :class:`HintTransport`): the oracle a real model does not need. A
  request without them (the preflight) calls its first tool with no arguments;
- any other request (structured output: ``response_format`` or a forced tool) is answered as
  :mod:`fakes.fault_server` answers it: the caller (schema ``caller_turn``) expresses the next open
  plan step and says goodbye once the schema allows only null, the judges label every criterion
  met and rate 5, and any other schema gets its smallest instance.

A request that asks for a stream (``stream: true``) is answered in the provider's event-stream
format (:mod:`fakes.streaming_wire`), with the seeded delays of ``latency`` when given.

Bounded: at most ``max_requests`` requests are answered (later ones get 503) and the server shuts
itself down after ``lifetime_s`` seconds. :attr:`ConformanceServer.log` has one
:class:`Exchange` per request; :meth:`ConformanceServer.rejected` those answered 400.
"""

from __future__ import annotations

import contextvars
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2

from callbench.bundle.models import Bundle, Scenario
from callbench.models.base import ModelRequest, ModelResponse
from callbench.models.remote.request_rules import anthropic_request_problems, openai_request_problems
from callbench.models.remote.rules import ANTHROPIC, GEMINI, OPENAI
from fakes.fault_server import role_of, structured_answer
from fakes.streaming_wire import LatencyProfile, write_answer

HINT: contextvars.ContextVar[tuple[str, int, bool] | None] = contextvars.ContextVar("hint", default=None)


class HintedClient:
    """A ModelClient around ``inner`` that puts the request's (scenario id, turn, ends with tool
    results) in :data:`HINT` while ``inner`` sends it; everything else is ``inner``'s."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        after = bool(request.messages) and request.messages[-1].role == "tool"
        token = HINT.set((request.context.scenario_id, request.context.turn, after))
        try:
            return await self.inner.complete(request)
        finally:
            HINT.reset(token)

    async def aclose(self) -> None:
        await self.inner.aclose()


class HintTransport(httpx2.AsyncBaseTransport):
    """A transport (httpx2's own by default, or ``inner``: e.g. the openai SDK's aiohttp one)
    adding the ``x-callbench-*`` headers from :data:`HINT`."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        hint = HINT.get()
        if hint is not None:
            request.headers["x-callbench-scenario"] = hint[0]
            request.headers["x-callbench-turn"] = str(hint[1])
            request.headers["x-callbench-after-tools"] = "1" if hint[2] else "0"
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class Exchange:
    """One request: the API it spoke, its role (``fault_server.role_of``: candidate, caller,
    task_judge, conversation_judge or probe; ``?`` when rejected), the HTTP status and, for a
    rejection, the problems found."""

    dialect: str
    role: str
    status: int
    problems: list[tuple[str, str]] = field(default_factory=list)


def _param_anthropic(param: str) -> str:
    return param.replace("[", ".").replace("]", "")


def _gemini_where(param: str) -> str:
    if param.startswith("response_format.json_schema.schema"):
        return "generation_config.response_schema" + param[len("response_format.json_schema.schema"):]
    return param.replace(".function.parameters", ".function_declarations[0].parameters")


class ConformanceServer:
    """The server (see the module docstring). Use as a context manager."""

    def __init__(self, bundle: Bundle | None = None, *, gemini: bool = False, gemini_tools: bool = True,
                 max_requests: int = 20000, lifetime_s: float = 600.0,
                 latency: LatencyProfile | None = None) -> None:
        self.gemini, self.gemini_tools = gemini, gemini_tools
        self.latency = latency  # seeded delays (fakes.streaming_wire); a streamed request streams anyway
        self.max_requests, self.lifetime_s = max_requests, lifetime_s
        self.log: list[Exchange] = []
        self._scenarios: dict[str, Scenario] = (
            {s.id: s for _, s in bundle.scenarios()} if bundle is not None else {})
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    def __enter__(self) -> ConformanceServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server._handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        timer = threading.Timer(self.lifetime_s, self.close)
        timer.daemon = True
        timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving (idempotent)."""
        if self._httpd is not None:
            httpd, self._httpd = self._httpd, None
            httpd.shutdown()
            httpd.server_close()

    @property
    def root(self) -> str:
        """The Anthropic base URL (the SDK adds ``/v1/messages``)."""
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (``.../v1``)."""
        return f"{self.root}/v1"

    def rejected(self) -> list[Exchange]:
        """The requests answered 400 (a rule broken)."""
        return [e for e in self.log if e.status == 400]

    # ------------------------------------------------------------------ checks
    def problems(self, body: dict[str, Any], dialect: str) -> list[tuple[str, str]]:
        """What the impersonated provider would reject in ``body``."""
        if dialect == "anthropic":
            return anthropic_request_problems(body, ANTHROPIC)
        if not self.gemini:
            return openai_request_problems(body, OPENAI)
        found = openai_request_problems(body, GEMINI)
        if not self.gemini_tools:  # only the structured-output schemas in Gemini's subset
            keep = openai_request_problems(body, OPENAI)
            found = [p for p in found if not p[0].startswith("tools")] + [
                p for p in keep if p[0].startswith("tools")]
        return found

    def error_body(self, body: dict[str, Any], dialect: str, problems: list[tuple[str, str]]) -> Any:
        """The provider's 400 body for the first of ``problems``."""
        param, message = problems[0]
        if dialect == "anthropic":
            return {"type": "error", "error": {"type": "invalid_request_error",
                                               "message": f"{_param_anthropic(param)}: {message}"}}
        if self.gemini:
            key = param.rsplit(".", 1)[-1]
            text = (f"Invalid JSON payload received. Unknown name \"{key}\" at '{_gemini_where(param)}': "
                    "Cannot find field." if "does not support the keyword" in message
                    else f"* GenerateContentRequest.{_gemini_where(param)}: {message}")
            return [{"error": {"code": 400, "message": text, "status": "INVALID_ARGUMENT"}}]
        code = None
        if ".function.parameters" in param:
            index = int(param.split("[", 1)[1].split("]", 1)[0])
            name = body["tools"][index]["function"].get("name")
            message, code = f"Invalid schema for function '{name}': {message}", "invalid_function_parameters"
            param = param.split(".parameters", 1)[0] + ".parameters"
        elif param.endswith(".name"):
            code = "invalid_value"
        return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}

    # ------------------------------------------------------------------ answers
    def _turn(self, headers: Any) -> tuple[list[dict[str, Any]], str | None] | None:
        """(tool calls as (name, arguments) dicts, text) of the reference turn, or None (no hint)."""
        sid = headers.get("x-callbench-scenario")
        if sid is None:
            return None
        scen = self._scenarios[sid]
        path = scen.reference_path or []
        k = int(headers.get("x-callbench-turn", "0"))
        turn = path[min(k, len(path) - 1)]
        if headers.get("x-callbench-after-tools") == "1" or not turn.tool_calls:
            return [], turn.speech
        return [{"name": c.name, "arguments": c.arguments} for c in turn.tool_calls], turn.before_tools

    def _openai_reply(self, body: dict[str, Any], headers: Any, n: int) -> tuple[str, dict[str, Any]]:
        role = role_of(body, "openai")
        if body.get("tools") and "response_format" not in body:
            turn = self._turn(headers)
            calls, text = turn if turn is not None else (
                [{"name": body["tools"][0]["function"]["name"], "arguments": {}}], None)
            message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
            if calls:
                message["tool_calls"] = [
                    {"id": f"call_{n}_{i}", "type": "function",
                     "function": {"name": c["name"],
                                  "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                    for i, c in enumerate(calls)]
        else:
            fmt = body.get("response_format") or {}
            schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else {}
            answer = structured_answer(role, schema or {}, body)
            message = {"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)}
        return role, {
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _anthropic_reply(self, body: dict[str, Any], headers: Any, n: int) -> tuple[str, dict[str, Any]]:
        choice = body.get("tool_choice")
        blocks: list[dict[str, Any]] = []
        role = role_of(body, "anthropic")
        if isinstance(choice, dict) and choice.get("type") == "tool":
            tool = next(t for t in body["tools"] if t.get("name") == choice.get("name"))
            blocks.append({"type": "tool_use", "id": f"toolu_{n}", "name": tool["name"],
                           "input": structured_answer(role, tool.get("input_schema", {}), body)})
        else:
            turn = self._turn(headers)
            calls, text = turn if turn is not None else (
                [{"name": body["tools"][0]["name"], "arguments": {}}] if body.get("tools") else [], None)
            if text:
                blocks.append({"type": "text", "text": text})
            blocks += [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c["name"],
                        "input": c["arguments"]} for i, c in enumerate(calls)]
            if not blocks:
                blocks.append({"type": "text", "text": ""})
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return role, {"id": f"msg_{n}", "type": "message", "role": "assistant",
                      "model": body.get("model", ""), "content": blocks, "stop_reason": stop,
                      "stop_sequence": None,
                      "usage": {"input_tokens": 10, "output_tokens": 5}}

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        dialect = "anthropic" if h.path.rstrip("/").endswith("/messages") else "openai"
        with self._lock:
            n = len(self.log)
            over = n >= self.max_requests
            entry = Exchange(dialect=dialect, role="?", status=503 if over else 200)
            self.log.append(entry)
        if over:
            return self._send(h, 503, {"error": {"message": "request budget spent", "type": "server_error"}})
        body = json.loads(raw)
        problems = self.problems(body, dialect)
        if problems:
            entry.status, entry.problems = 400, problems
            return self._send(h, 400, self.error_body(body, dialect, problems))
        reply = self._anthropic_reply if dialect == "anthropic" else self._openai_reply
        entry.role, answer = reply(body, h.headers, n)
        if body.get("stream") or self.latency is not None:  # the provider's own event stream
            usage = dialect == "anthropic" or bool((body.get("stream_options") or {}).get("include_usage"))
            write_answer(h, dialect, answer, stream=bool(body.get("stream")), usage=usage,
                         profile=self.latency or LatencyProfile(), n=n)
            return None
        return self._send(h, 200, answer)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
