"""Remote speech engines through the OpenAI-compatible audio API: ``POST {base}/audio/speech``
(JSON ``model``, ``input``, ``voice``, ``response_format: wav`` -> WAV bytes) and
``POST {base}/audio/transcriptions`` (multipart ``file``, ``model``, ``language``,
``temperature: 0``, ``response_format: json`` -> ``{"text": ...}``), the shapes of OpenAI's API
reference that other providers copy.

The API key is read from the environment variable named by ``api_key_env`` at each request and is
never recorded: :class:`~callbench.sim.voice.engines.EngineInfo` holds the base URL, model and voice
only. Stdlib HTTP (the channel runs in a worker thread, one utterance at a time); a 429 or 5xx
answer is retried once after ``retry_after_s``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from callbench.sim.voice.engines import EngineInfo, Recognition, VoiceEngineError, primary
from callbench.sim.voice.line import Audio, read_wav, write_wav

TIMEOUT_S = 60.0


def _headers(api_key_env: str | None) -> dict[str, str]:
    key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not key:
        raise VoiceEngineError(f"the remote voice engine needs ${api_key_env} set (its API key)")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _post(url: str, body: bytes, headers: dict[str, str], *, what: str, retry_after_s: float) -> bytes:
    for attempt in (0, 1):
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                return bytes(resp.read())
        except urllib.error.HTTPError as e:
            detail = e.read()[:300].decode("utf-8", "replace")
            if attempt == 0 and (e.code == 429 or e.code >= 500):
                time.sleep(retry_after_s)
                continue
            raise VoiceEngineError(f"{what}: HTTP {e.code} from {url}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            if attempt == 0:
                time.sleep(retry_after_s)
                continue
            raise VoiceEngineError(f"{what}: {url} unreachable: {getattr(e, 'reason', e)}") from None
    raise AssertionError("unreachable")


class RemoteTTS:
    """An OpenAI-compatible ``audio/speech`` endpoint (``base_url`` such as ``https://host/v1``)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        voice: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        retry_after_s: float = 1.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/audio/speech"
        self.model, self.voice, self.api_key_env, self.retry_after_s = (
            model,
            voice,
            api_key_env,
            retry_after_s,
        )
        self.info = EngineInfo(
            "openai-audio-speech", "v1", {"base_url": base_url.rstrip("/"), "model": model, "voice": voice}
        )
        self.languages: frozenset[str] | None = None

    def synthesize(self, text: str, language: str) -> Audio:
        body = json.dumps(
            {"model": self.model, "input": text, "voice": self.voice, "response_format": "wav"}
        ).encode()
        headers = {"Content-Type": "application/json", **_headers(self.api_key_env)}
        data = _post(self.url, body, headers, what="remote TTS", retry_after_s=self.retry_after_s)
        return read_wav(data, where=f"remote TTS answer from {self.url}")


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes, str]]) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body and its content type. ``files``: name -> (filename, bytes, type)."""
    boundary = f"callbench-{uuid.uuid4().hex}"
    out: list[bytes] = []
    for name, value in fields.items():
        out.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    for name, (filename, data, ctype) in files.items():
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            f"Content-Type: {ctype}\r\n\r\n"
        )
        out.append(head.encode() + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


class RemoteASR:
    """An OpenAI-compatible ``audio/transcriptions`` endpoint; sends 16-bit WAV, language fixed,
    temperature 0."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        retry_after_s: float = 1.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/audio/transcriptions"
        self.model, self.api_key_env, self.retry_after_s = model, api_key_env, retry_after_s
        self.info = EngineInfo(
            "openai-audio-transcriptions",
            "v1",
            {"base_url": base_url.rstrip("/"), "model": model, "temperature": 0.0},
        )
        self.languages: frozenset[str] | None = None

    def transcribe(self, audio: Audio, language: str) -> Recognition:
        fields = {
            "model": self.model,
            "language": primary(language),
            "temperature": "0",
            "response_format": "json",
        }
        body, ctype = multipart(fields, {"file": ("utterance.wav", write_wav(audio), "audio/wav")})
        headers = {"Content-Type": ctype, **_headers(self.api_key_env)}
        raw = _post(self.url, body, headers, what="remote ASR", retry_after_s=self.retry_after_s)
        try:
            data: Any = json.loads(raw)
            text = data["text"]
        except (ValueError, KeyError, TypeError):
            raise VoiceEngineError(
                f"remote ASR: {self.url} answered without a JSON 'text' field: {raw[:200]!r}"
            ) from None
        if not isinstance(text, str):
            raise VoiceEngineError(f"remote ASR: {self.url} answered a non-string 'text'")
        return Recognition(text.strip())
