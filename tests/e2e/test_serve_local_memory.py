"""``callbench serve-local`` keeps its resident memory within its bound.

The server's own ``LlamaRAMCache`` counted only the KV state of each cached prompt, not the scores
each state holds (about 120 MB for a 250-token prompt of the 0.5B model: one row of its 151,936-word
vocabulary per token), so every new prompt grew the process (7.6 GiB after 24 minutes of two
episodes). ``serve-local`` now uses ``models/local/server_cache.BoundedRAMCache``.

This starts ``serve-local`` with a 64 MB cache, sends one request to reach a steady state, then
:data:`REQUESTS` requests with distinct prompts (each a cache entry), and checks the server's
resident memory (``/proc/PID/status`` VmRSS, with its child processes) grew by at most the cache bound plus
:data:`SLACK_MB` (allocator noise). Before the fix it grew by about 120 MB per request.

Skipped unless llama-cpp-python with its ``[server]`` extra and the 0.5B weights are installed
(Linux only: ``/proc``); with ``CALLBENCH_REQUIRE_LOCAL=1`` their absence fails instead.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from waiting import limit

from .conftest import require_local_model

require_local_model(
    ("no /proc (resident memory is read from /proc/PID/status)", not Path("/proc/self/status").exists()),
    server=True,
)

CACHE_MB = 64
REQUESTS = 8
SLACK_MB = 96
LOAD_TIMEOUT_S = limit(600.0)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mb(pid: int) -> int:
    """Resident MB of ``pid`` and its descendants (the CLI serves from a child process of its crash
    supervisor, ``runs/supervisor.py``)."""
    total = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            total += int(line.split()[1]) // 1024
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            total += _rss_mb(int(child))
    return total


def _chat(url: str, text: str) -> dict[str, object]:
    body = json.dumps({"model": "local-0.5b", "max_tokens": 4, "temperature": 0.0,
                       "messages": [{"role": "user", "content": text}]}).encode()
    req = urllib.request.Request(f"{url}/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=LOAD_TIMEOUT_S) as r:  # a safety net only
        data: dict[str, object] = json.loads(r.read())
    return data


def test_resident_memory_stays_within_the_cache_bound(tmp_path: Path) -> None:
    port, log = _free_port(), tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "callbench", "serve-local", "--port", str(port), "--model", "local:0.5b",
             "--n-ctx", "2048", "--threads", "1", "--cache-mb", str(CACHE_MB)],
            stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"serve-local exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"serve-local did not answer:\n{log.read_text(errors='replace')}")
            time.sleep(1.0)
        _chat(url, "Say hello.")
        base = _rss_mb(proc.pid)
        seen = []
        for i in range(REQUESTS):
            words = " ".join(f"item{i}x{k}" for k in range(60))
            answer = _chat(url, f"Request {i}. Repeat the first word of this list: {words}")
            assert answer["choices"], answer  # type: ignore[truthy-bool]
            seen.append(_rss_mb(proc.pid))
        grown = max(seen) - base
        assert grown <= CACHE_MB + SLACK_MB, (
            f"serve-local grew by {grown} MB over {REQUESTS} requests (resident after each: {seen}, "
            f"from {base} MB); the bound is the {CACHE_MB} MB cache plus {SLACK_MB} MB")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
