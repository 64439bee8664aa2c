"""Secrets of a deployed run never reach a file or the command's output: the webhook's path secret
(``CALLBENCH_WEBHOOK_SECRET``) and the agent's credential (a header from the environment) are
planted as canaries in a real ``callbench run`` of the reference agent (generic HTTP and its
WebSocket variant, on loopback, with a scripted brain) and ``callbench report``, then searched for
in every file under the run's folders and in stdout and stderr."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from tests.sim.deployed_helpers import reference_agent_module, scripted_brain, starter

from callbench.runfolder import episode_files
from waiting import limit, run_command

ROOT = Path(__file__).parents[2]
STARTER = ROOT / "src" / "callbench" / "examples" / "starter"
CANARIES = {"webhook_secret": "hook-canary-8a1f0c", "agent_token": "agent-canary-42d9e7"}


@contextmanager
def reference_agent() -> Iterator[tuple[str, list[str]]]:
    """The reference agent on a loopback port, in a thread; yields its URL and the Authorization
    headers it received."""
    seen: list[str] = []
    ready = threading.Event()
    box: dict[str, object] = {}

    @web.middleware
    async def record(request: web.Request, handler: object) -> web.StreamResponse:
        seen.append(request.headers.get("Authorization", ""))
        return await handler(request)  # type: ignore[operator, no-any-return]

    replay = scripted_brain(starter())

    async def brain(
        messages: list[dict[str, object]], tools: list[object], sess: dict[str, object]
    ) -> object:
        if not sess.get("scenario_id"):  # the run's preflight: a plain greeting, no scenario
            return {"content": "Hello.", "tool_calls": []}
        return await replay(messages, tools, sess)

    def serve() -> None:
        loop = asyncio.new_event_loop()
        app = reference_agent_module().make_app(brain)
        app.middlewares.append(record)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        box["loop"], box["runner"] = loop, runner
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(limit(120.0)), "the reference agent did not start listening"
    try:
        yield str(box["url"]), seen
    finally:
        loop = box["loop"]
        assert isinstance(loop, asyncio.AbstractEventLoop)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(limit(60.0))


@pytest.mark.parametrize("adapter", ["http", "ws"])
def test_deployed_canaries_reach_no_file_and_no_output(tmp_path: Path, adapter: str) -> None:
    c = CANARIES
    with reference_agent() as (url, seen):
        target = url if adapter == "http" else url.replace("http://", "ws://") + "/ws"
        spec = f"deployed:{adapter}:{target}"
        settings = {"candidate": {"spec": spec, "extra_headers": {"Authorization": "env:AGENT_TOKEN"}}}
        path = tmp_path / "settings.yaml"
        path.write_text(yaml.safe_dump(settings), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CALLBENCH_WEBHOOK", "OPENAI_"))}
        env.update({"PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "COLUMNS": "200",
                    "CALLBENCH_WEBHOOK_SECRET": c["webhook_secret"],
                    "AGENT_TOKEN": f"Bearer {c['agent_token']}"})  # fmt: skip
        out = tmp_path / "run"
        run = run_command(
            [sys.executable, "-m", "callbench", "run", str(STARTER), "--candidate", spec,
             "--caller", "scripted:plan", "--task-judge", "scripted:met",
             "--conversation-judge", "scripted:met",
             "--settings", str(path), "--out", str(out), "--scenarios", "clinic_ortho_reschedule"],
            "the deployed run to finish", env=env, text=True,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        report = run_command(
            [sys.executable, "-m", "callbench", "report", str(out), "--json", str(tmp_path / "r.json"),
             "--html", str(tmp_path / "r.html")],
            "the report to finish", env=env, text=True,
        )  # fmt: skip
        assert report.returncode == 0, report.stderr
    assert f"Bearer {c['agent_token']}" in seen  # the credential was sent to the agent
    texts = {"run stdout": run.stdout, "run stderr": run.stderr, "report": report.stdout + report.stderr}
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != path]
    assert any(p.name == "manifest.json" for p in files) and (tmp_path / "r.html").exists()
    for p in files:
        texts[str(p)] = episode_files.file_bytes(p).decode("utf-8", errors="replace")
    assert spec in texts[str(out / "manifest.json")]
    leaks = [(where, name) for where, text in texts.items() for name, canary in c.items() if canary in text]
    assert leaks == []
