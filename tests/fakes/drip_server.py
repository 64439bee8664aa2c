"""A loopback server that answers every POST with a valid reply sent one byte at a time:
headers at once, then the body at ``interval_s`` per byte. It speaks OpenAI Chat
Completions (any path ending in ``/chat/completions``) and Anthropic Messages (``/v1/messages``)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_REPLY: dict[str, Any] = {
    "id": "c1", "object": "chat.completion", "created": 0, "model": "drip",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Hello, this is the helpline."}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16},
}
ANTHROPIC_REPLY: dict[str, Any] = {
    "id": "m1", "type": "message", "role": "assistant", "model": "drip", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "Hello, this is the helpline."}],
    "usage": {"input_tokens": 10, "output_tokens": 6},
}


class DripServer:
    """``with DripServer(0.2) as s:`` serves on ``s.url`` (OpenAI base URL) and ``s.root``
    (Anthropic base URL); ``s.requests`` counts the POSTs seen."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.requests = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def __enter__(self) -> DripServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with server._lock:
                    server.requests += 1
                reply = ANTHROPIC_REPLY if self.path.endswith("/messages") else OPENAI_REPLY
                body = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.flush()
                for i in range(len(body)):
                    if server._stop.is_set():
                        return
                    try:
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(server.interval_s)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def root(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"
