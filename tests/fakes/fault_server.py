"""A fault-injecting provider on loopback, for tests: OpenAI-compatible Chat
Completions (``POST .../chat/completions``, base URL :attr:`FaultServer.url`) and the Anthropic
Messages API (``POST /v1/messages``, base URL :attr:`FaultServer.root`), in one server.

It plays every role validly, from the request alone (for Anthropic the caller, judges and probes
are recognised by the forced tool of ``tool_choice``, and replies are ``text`` / ``tool_use``
blocks):

- a request with ``tools`` is the candidate: a greeting first, then one call of the first tool
  that does not end the call (minimal arguments for its schema) after the caller's first turn, and
  plain acknowledgements otherwise; every spoken reply carries ``ref <hash of the messages>``, so
  a test can find the exact reply behind each message of a trace, and replies (hence the next
  requests, hence the faults) do not depend on the order in which concurrent requests arrive;
- a ``response_format`` named ``caller_turn`` is the caller: it expresses the next open plan step
  the schema allows (``expressed_step`` enumerates it), and says goodbye with ``done`` once the
  schema allows only null;
- ``task_judgement`` / ``conversation_judgement`` are the judges: every criterion ``met``, every
  rating 5, as the schema enumerates them;
- any other schema gets the smallest instance of it (a preflight probe).

At a seeded rate it injects, instead of the valid reply, one of :data:`FAULT_KINDS`. The choice
is a function of (seed, the request body, how many times that exact body was seen), so it does
not depend on the order in which concurrent episodes reach the server. Every request is logged
(:attr:`FaultServer.log`) with its role, model, fault kind (None for a valid reply) and the reply's
content. The server is bounded: at most ``max_requests`` requests are answered (later ones get
503) and it shuts itself down after ``lifetime_s`` seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMON_KINDS: tuple[str, ...] = (
    "rate_limit",  # 429 with retry-after-ms
    "server_error",  # 500
    "unavailable",  # 503
    "overloaded",  # 529 overloaded_error (Anthropic's)
    "hang",  # no answer before the client's timeout
    "truncated_json",  # 200, application/json, the body cut in half
    "not_utf8",  # 200, application/json, bytes that are not UTF-8
    "html",  # 200, text/html
    "error_body",  # 200 whose body is an error object
    "null_content",  # 200, no content and no tool calls (OpenAI: content null; Anthropic: one empty text)
    "reset",  # the connection closes in the middle of the body
    "unauthorized",  # 401
    "not_found",  # 404 (model not found)
)
OPENAI_KINDS: tuple[str, ...] = (
    "empty_choices",  # 200, "choices": []
    "missing_choices",  # 200, no "choices" key
)
ANTHROPIC_KINDS: tuple[str, ...] = (
    "missing_content",  # 200, a message without "content"
    "empty_content",  # 200, "content": []
    "stop_reason_only",  # 200, {"stop_reason": "end_turn"} and nothing else
)
FAULT_KINDS: tuple[str, ...] = COMMON_KINDS + OPENAI_KINDS + ANTHROPIC_KINDS
DIALECT_KINDS = {
    "openai": frozenset(COMMON_KINDS + OPENAI_KINDS),
    "anthropic": frozenset(COMMON_KINDS + ANTHROPIC_KINDS),
}
RETRYABLE_KINDS = tuple(k for k in FAULT_KINDS if k not in ("unauthorized", "not_found"))
LEDGER_KIND = {
    "rate_limit": "rate_limit",
    "server_error": "server_error",
    "unavailable": "server_error",
    "overloaded": "server_error",
    "hang": "timeout",
    "truncated_json": "malformed_body",
    "not_utf8": "not_utf8",
    "html": "html_body",
    "error_body": "error_body",
    "null_content": "empty_reply",
    "reset": "reset",
    "unauthorized": "auth",
    "not_found": "not_found",
    "empty_choices": "empty_choices",
    "missing_choices": "missing_choices",
    "missing_content": "missing_content",
    "empty_content": "empty_reply",
    "stop_reason_only": "missing_content",
}
"""What callbench's adapters call each injected fault (``callbench.models.faults``)."""


@dataclass
class LogEntry:
    """One request: number (0-based), role, model, injected fault kind (None: valid reply), the API
    it spoke (``openai`` or ``anthropic``)."""

    n: int
    role: str
    model: str
    kind: str | None
    status: int
    dialect: str = "openai"
    headers: dict[str, str] = field(default_factory=dict)  # x-* and ocp-* request headers received
    content: str | None = None
    tool_calls: list[str] = field(default_factory=list)


def smallest_instance(schema: Any) -> Any:
    """The smallest JSON value ``schema`` accepts (objects with their required keys only)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return smallest_instance(schema[key][0])
    t = schema.get("type")
    t = t[0] if isinstance(t, list) and t else t
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: smallest_instance(props.get(k, {})) for k in schema.get("required", [])}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "null": None}.get(str(t))


def _schema_of(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    rf = body.get("response_format")
    if not isinstance(rf, dict) or rf.get("type") != "json_schema":
        return None
    js = rf.get("json_schema", {})
    return str(js.get("name", "")), js.get("schema", {})


_SCHEMA_ROLES = {
    "caller_turn": "caller",
    "task_judgement": "task_judge",
    "conversation_judgement": "conversation_judge",
}


def _forced_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The Anthropic tool that ``tool_choice`` forces (callbench's structured output), if any."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "tool":
        return None
    return next((t for t in body.get("tools") or [] if t.get("name") == choice.get("name")), None)


def role_of(body: dict[str, Any], dialect: str = "openai") -> str:
    """Which role a request body plays: candidate, caller, task_judge, conversation_judge, or probe
    (callbench's preflight requests, and any other schema)."""
    tools = body.get("tools") or []
    if dialect == "anthropic":
        forced = _forced_tool(body)
        if forced is not None:
            return _SCHEMA_ROLES.get(str(forced.get("name")), "probe")
        if tools:
            return "probe" if tools[0].get("name") == "preflight_ping" else "candidate"
        return "probe"
    if tools:
        return "probe" if tools[0].get("function", {}).get("name") == "preflight_ping" else "candidate"
    named = _schema_of(body)
    name = named[0] if named else ""
    return _SCHEMA_ROLES.get(name, "probe")


def _unstreamed(raw: bytes) -> bytes:
    """``raw`` without ``stream`` and ``stream_options`` (this server never streams: a client that
    asked for a stream and got a plain answer sends the same request again without them, and that
    is the same request for counting ``repeats``), re-encoded compactly with sorted keys (the
    SDKs encode a body in different layouts whether it is streamed or not)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(body, dict):
        return raw
    body.pop("stream", None)
    body.pop("stream_options", None)
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode()


class FaultServer:
    """The server. Use as a context manager; :attr:`url` is the ``/v1`` base URL.

    ``rate`` is the share of requests that get a fault (0..1), drawn from those of ``kinds`` that
    the request's API has (:data:`DIALECT_KINDS`); ``keys`` the accepted keys (OpenAI: bearer
    token; Anthropic: ``x-api-key`` or a bearer token; None: any); ``hang_s`` how long a hang
    lasts (make it longer than the client's timeout); ``retry_after_ms`` what a 429 asks to wait;
    ``repeats`` (when set) limits faults to the first ``repeats`` times a request body is seen (a
    retry then gets a valid reply);
    ``roles`` (when set) limits faults to requests of those roles (:func:`role_of`).
    """

    def __init__(
        self,
        *,
        rate: float = 0.0,
        kinds: tuple[str, ...] = FAULT_KINDS,
        seed: int = 0,
        keys: set[str] | None = None,
        hang_s: float = 1.0,
        retry_after_ms: int = 20,
        max_requests: int = 20000,
        lifetime_s: float = 600.0,
        repeats: int | None = None,
        roles: frozenset[str] | None = None,
    ) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}")
        self.rate, self.kinds, self.seed = rate, kinds, seed
        self.keys = keys
        self.hang_s, self.retry_after_ms = hang_s, retry_after_ms
        self.max_requests, self.lifetime_s = max_requests, lifetime_s
        self.repeats = repeats
        self.roles = roles
        self.log: list[LogEntry] = []
        self.outages: dict[str, int] = {}  # model -> HTTP status answered to every request
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ control
    def __enter__(self) -> FaultServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server._handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        timer = threading.Timer(self.lifetime_s, self.close)
        timer.daemon = True
        timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving (idempotent); a hanging handler returns at once."""
        self._stop.set()
        if self._httpd is not None:
            httpd, self._httpd = self._httpd, None
            httpd.shutdown()
            httpd.server_close()

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (``.../v1``)."""
        return f"{self.root}/v1"

    @property
    def root(self) -> str:
        """The Anthropic base URL (the SDK adds ``/v1/messages``)."""
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def faults(self, kind: str | None = None) -> list[LogEntry]:
        """Logged requests that got a fault (of ``kind`` when given)."""
        return [e for e in self.log if e.kind is not None and (kind is None or e.kind == kind)]

    # ------------------------------------------------------------------ decisions
    def _fault_for(self, raw: bytes, dialect: str = "openai") -> str | None:
        digest = hashlib.sha256(_unstreamed(raw)).hexdigest()
        with self._lock:
            seen = self._seen.get(digest, 0)
            self._seen[digest] = seen + 1
        kinds = [k for k in self.kinds if k in DIALECT_KINDS[dialect]]
        if self.rate <= 0 or not kinds or (self.repeats is not None and seen >= self.repeats):
            return None
        h = hashlib.sha256(f"{self.seed}|{digest}|{seen}".encode()).digest()
        if int.from_bytes(h[:8], "big") / 2**64 >= self.rate:
            return None
        return kinds[int.from_bytes(h[8:16], "big") % len(kinds)]

    def valid_message(self, body: dict[str, Any]) -> dict[str, Any]:
        """The valid assistant message for ``body`` (see the module docstring)."""
        role = role_of(body)
        messages = body.get("messages", [])
        if role == "probe" and body.get("tools"):
            fn = body["tools"][0]["function"]
            call = {
                "id": "call_probe",
                "type": "function",
                "function": {"name": fn["name"], "arguments": "{}"},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        if role == "candidate":
            ref = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:10]
            said = [m for m in messages if m.get("role") == "assistant"]
            if not said:
                return {"role": "assistant", "content": f"Hello, thank you for calling, ref {ref}."}
            last = messages[-1].get("role") if messages else None
            called = any(m.get("tool_calls") for m in said)
            plain = [
                t["function"]
                for t in body["tools"]
                if "concluding_message" not in t["function"].get("parameters", {}).get("properties", {})
            ]
            if last == "user" and not called and plain:
                fn = plain[0]
                args = smallest_instance(fn.get("parameters", {}))
                return {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{ref}",
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": json.dumps(args)},
                        }
                    ],
                }
            return {"role": "assistant", "content": f"I understand, let me note that, ref {ref}."}
        named = _schema_of(body)
        return {
            "role": "assistant",
            "content": json.dumps(structured_answer(role, named[1] if named else {}, body),
                                  ensure_ascii=False),
        }

    def valid_anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        """The valid Messages API ``message`` for ``body`` (same behaviour as :meth:`valid_message`)."""
        role = role_of(body, "anthropic")
        messages = body.get("messages", [])
        tools = body.get("tools") or []
        if role == "probe" and not _forced_tool(body) and tools:
            return _anthropic_message(
                body, [{"type": "tool_use", "id": "toolu_probe", "name": tools[0]["name"], "input": {}}]
            )
        if role == "candidate":
            ref = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:10]
            said = [m for m in messages if m.get("role") == "assistant"]
            if not said:
                return _anthropic_message(
                    body, [{"type": "text", "text": f"Hello, thank you for calling, ref {ref}."}]
                )
            blocks = [b for m in said for b in (m.get("content") or []) if isinstance(b, dict)]
            called = any(b.get("type") == "tool_use" for b in blocks)
            last = messages[-1].get("role") if messages else None
            plain = [
                t
                for t in tools
                if "concluding_message" not in t.get("input_schema", {}).get("properties", {})
            ]
            if last == "user" and not called and plain:
                fn = plain[0]
                return _anthropic_message(
                    body,
                    [
                        {
                            "type": "tool_use",
                            "id": f"toolu_{ref}",
                            "name": fn["name"],
                            "input": smallest_instance(fn.get("input_schema", {})) or {},
                        }
                    ],
                )
            return _anthropic_message(
                body, [{"type": "text", "text": f"I understand, let me note that, ref {ref}."}]
            )
        forced = _forced_tool(body) or {}
        answer = structured_answer(role, forced.get("input_schema", {}), body)
        return _anthropic_message(
            body,
            [{"type": "tool_use", "id": "toolu_answer", "name": forced.get("name", ""), "input": answer}],
        )

    # ------------------------------------------------------------------ serving
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        dialect = "anthropic" if h.path.rstrip("/").endswith("/messages") else "openai"
        model, role = str(body.get("model", "")), role_of(body, dialect)
        with self._lock:
            n = len(self.log)
        bearer = h.headers.get("Authorization", "").removeprefix("Bearer ")
        key = (h.headers.get("x-api-key") or bearer) if dialect == "anthropic" else bearer
        status, kind = 200, self._fault_for(raw, dialect)
        if self.roles is not None and role not in self.roles:
            kind = None
        if n >= self.max_requests:
            kind, status = "budget_exhausted", 503
        elif self.keys is not None and key not in self.keys:
            kind = "bad_key"
        elif model in self.outages:
            kind, status = "outage", self.outages[model]
        extra = {
            k: v
            for k, v in h.headers.items()
            if k.lower().startswith(("x-", "ocp-")) and not k.lower().startswith("x-stainless")
        }
        entry = LogEntry(
            n=n, role=role, model=model, kind=kind, status=status, dialect=dialect, headers=extra
        )
        with self._lock:
            self.log.append(entry)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer(h, body, entry)

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        data: bytes,
        ctype: str = "application/json",
        headers: dict[str, str] | None = None,
        length: int | None = None,
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data) if length is None else length))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def _error(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        message: str,
        dialect: str,
        headers: dict[str, str] | None = None,
        error_type: str = "fake",
    ) -> None:
        if dialect == "anthropic":
            body: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
        else:
            body = {"error": {"message": message, "type": error_type, "code": status}}
        self._send(h, status, json.dumps(body).encode(), headers=headers)

    def _completion(self, body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "cmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }

    def _answer(self, h: BaseHTTPRequestHandler, body: dict[str, Any], entry: LogEntry) -> None:
        kind, dialect = entry.kind, entry.dialect
        if kind in ("budget_exhausted", "outage"):
            entry.status = entry.status or 503
            self._error(h, entry.status, f"fake server: {kind}", dialect, error_type="api_error")
        elif kind in ("bad_key", "unauthorized"):
            entry.status = 401
            self._error(h, 401, "Incorrect API key provided", dialect, error_type="authentication_error")
        elif kind == "not_found":
            entry.status = 404
            self._error(
                h, 404, f"The model {entry.model!r} does not exist", dialect, error_type="not_found_error"
            )
        elif kind == "rate_limit":
            entry.status = 429
            self._error(
                h,
                429,
                "Rate limit reached",
                dialect,
                {"retry-after-ms": str(self.retry_after_ms)},
                error_type="rate_limit_error",
            )
        elif kind in ("server_error", "unavailable", "overloaded"):
            entry.status = {"server_error": 500, "unavailable": 503, "overloaded": 529}[kind]
            self._error(
                h,
                entry.status,
                "The server had an error",
                dialect,
                error_type="overloaded_error" if kind == "overloaded" else "api_error",
            )
        elif kind == "hang":
            self._stop.wait(self.hang_s)
            self._error(h, 504, "too late", dialect)
        elif kind == "html":
            self._send(h, 200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")
        elif kind == "not_utf8":
            inner = (
                b'"content": [{"type": "text", "text": "\xff\xfe"}]'
                if dialect == "anthropic"
                else (b'"choices": [{"message": {"content": "\xff\xfe\xfa"}}]')
            )
            self._send(h, 200, b"{" + inner + b"}")
        elif kind == "error_body":
            error = {
                "type": "overloaded_error" if dialect == "anthropic" else "server_error",
                "message": "upstream failed",
            }
            data = {"type": "error", "error": error} if dialect == "anthropic" else {"error": error}
            self._send(h, 200, json.dumps(data).encode())
        else:
            self._reply(h, body, entry)

    def _reply(self, h: BaseHTTPRequestHandler, body: dict[str, Any], entry: LogEntry) -> None:
        kind = entry.kind
        completion: dict[str, Any]
        if entry.dialect == "anthropic":
            completion = self.valid_anthropic(body)
            if kind == "null_content":
                completion["content"] = [{"type": "text", "text": ""}]
            elif kind == "empty_content":
                completion["content"] = []
            elif kind == "missing_content":
                del completion["content"]
            elif kind == "stop_reason_only":
                completion = {"stop_reason": "end_turn"}
            blocks = completion.get("content") or []
            content = "".join(b["text"] for b in blocks if b.get("type") == "text") or None
            calls = [b["name"] for b in blocks if b.get("type") == "tool_use"]
            if role_of(body, "anthropic") not in ("candidate", "probe") and calls:
                content = json.dumps(blocks[0]["input"])  # the structured answer, as callbench reads it
        else:
            message = self.valid_message(body)
            if kind == "null_content":
                message = {"role": "assistant", "content": None}
            completion = self._completion(body, message)
            if kind == "empty_choices":
                completion["choices"] = []
            elif kind == "missing_choices":
                del completion["choices"]
            content = message.get("content")
            calls = [c["function"]["name"] for c in message.get("tool_calls") or []]
        data = json.dumps(completion).encode()
        if kind == "truncated_json":
            self._send(h, 200, data[: len(data) // 2])
        elif kind == "reset":
            self._send(h, 200, data[: len(data) // 2], length=len(data))
            h.close_connection = True
        else:
            if kind is None:
                entry.content, entry.tool_calls = content, calls
            self._send(h, 200, data)


CALLER_SPEECH: dict[str, tuple[str, str]] = {
    "en": ("Yes, and there is one more thing I need.", "Okay, thank you. Bye."),
    "hi": ("हाँ, और मुझे एक और चीज़ चाहिए।", "ठीक है, धन्यवाद। नमस्ते।"),
    "mr": ("हो, आणि मला अजून एक गोष्ट हवी आहे.", "ठीक आहे, धन्यवाद. नमस्कार."),
    "ta": ("ஆம், எனக்கு இன்னொரு விஷயம் வேண்டும்.", "சரி, நன்றி. வணக்கம்."),
    "gu": ("હા, અને મારે એક બીજી વાત જોઈએ છે.", "ઠીક છે, આભાર. આવજો."),
    "bn": ("হ্যাঁ, আর আমার আরও একটা জিনিস দরকার।", "ঠিক আছে, ধন্যবাদ। নমস্কার।"),
}
"""The fake caller's two lines in each language of the starter: a caller must speak the call's
language in its script (the simulator rejects other turns)."""
_LANG_TAG = re.compile(r"\b(en|hi|mr|ta|gu|bn)-IN\b")


def caller_language(body: dict[str, Any] | None) -> str:
    """The language of the call a caller request is for: the first BCP 47 tag of the starter's
    languages in its system prompt (the brief states it), else English."""
    if not body:
        return "en"
    system = body.get("system")
    texts = [system] if isinstance(system, str) else []
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str):
            texts.append(m["content"])
    found = _LANG_TAG.search("\n".join(texts) or json.dumps(body, ensure_ascii=False))
    return found.group(1) if found else "en"


def structured_answer(role: str, schema: dict[str, Any], body: dict[str, Any] | None = None) -> Any:
    """The valid caller or judge answer for ``schema`` (see the module docstring); any other role
    gets the schema's smallest instance. A caller speaks the language of the call in ``body``."""
    if role == "caller":
        more, bye = CALLER_SPEECH[caller_language(body)]
        step = schema.get("properties", {}).get("expressed_step", {})
        options = [v for alt in step.get("anyOf", [step]) for v in alt.get("enum", [])]
        if options:
            return {"expressed_step": options[0], "speech": more, "done": False}
        return {"expressed_step": None, "speech": bye, "done": True}
    if role in ("task_judge", "conversation_judge"):
        props = schema.get("properties", {})
        out = {}
        for kind, value in (("criteria", {"label": "met"}), ("ratings", {"rating": 5})):
            box = props.get(kind)
            if isinstance(box, dict):
                out[kind] = {
                    i: {"reason": "fine", "cited_messages": [], **value} for i in box.get("required", [])
                }
        return out
    return smallest_instance(schema)


def _anthropic_message(body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    calls = any(b.get("type") == "tool_use" for b in blocks)
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": blocks,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 10},
    }
