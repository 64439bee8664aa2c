"""A loopback fake of the OpenAI audio API: ``POST /v1/audio/speech`` answers a WAV tone,
``POST /v1/audio/transcriptions`` answers ``{"text": ...}``. Every request is kept (path, headers,
JSON body or multipart fields) so tests can check what was sent; ``fail_first`` answers that many
requests with HTTP 500 first."""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import numpy as np

from callbench.sim.voice.line import Audio, write_wav


def parse_multipart(body: bytes, ctype: str) -> dict[str, bytes]:
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {ctype}\r\n\r\n".encode() + body
    )
    return {
        part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
        for part in msg.iter_parts()
    }


class OpenAIAudioServer:
    def __init__(
        self, transcript: str = "my account is 4 8 2 1 5", fail_first: int = 0, bad_json: bool = False
    ) -> None:
        self.transcript, self.fail_first, self.bad_json = transcript, fail_first, bad_json
        self.requests: list[dict[str, Any]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, data: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ctype = self.headers.get("Content-Type", "")
                rec: dict[str, Any] = {"path": self.path, "headers": dict(self.headers)}
                rec["body"] = (
                    json.loads(raw) if ctype.startswith("application/json") else parse_multipart(raw, ctype)
                )
                with server.lock:
                    server.requests.append(rec)
                    fail = server.fail_first > 0
                    server.fail_first -= 1 if fail else 0
                if fail:
                    return self._send(500, b'{"error": "overloaded"}', "application/json")
                if self.path.endswith("/audio/speech"):
                    t = np.arange(8000) / 16000
                    wav = write_wav(Audio((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), 16000))
                    return self._send(200, wav, "audio/wav")
                if self.path.endswith("/audio/transcriptions"):
                    body = (
                        b"{not json" if server.bad_json else json.dumps({"text": server.transcript}).encode()
                    )
                    return self._send(200, body, "application/json")
                return self._send(404, b"{}", "application/json")

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
