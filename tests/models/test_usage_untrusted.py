"""Usage is untrusted input: a token count that is negative, not a whole number
or absurd is a ``malformed_body`` anomaly, retried and counted; a reply without usage is used with
its counts read as 0 and a ``usage_missing`` note in the ledger; nothing saved or reported shows a
negative count, speed or cost."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    Usage,
)
from callbench.models.faults import collect_faults
from callbench.models.registry import create_client
from callbench.models.remote.anomalies import anthropic_content, openai_choices
from callbench.runfolder import episode_files
from fakes.fault_server import FaultServer, role_of
from waiting import limit

DAIRY = Path(__file__).parents[1] / "sim" / "data" / "dairy_bundle"
SRC = Path(__file__).parents[2] / "src"
MESSAGE = {"role": "assistant", "content": "Hello."}


@pytest.mark.parametrize("value", [-100, -1, 1.5, "12", 10**12, True])
def test_bad_counts_are_malformed_bodies_for_both_apis(value: Any) -> None:
    body = {"choices": [{"message": MESSAGE}], "usage": {"prompt_tokens": value, "completion_tokens": 3}}
    with pytest.raises(InfrastructureError) as caught:
        openai_choices(body, "openai caller")
    assert caught.value.kind == "malformed_body" and "usage.prompt_tokens" in str(caught.value)
    usage = {"input_tokens": 5, "output_tokens": value}
    body = {"content": [{"type": "text", "text": "Hello."}], "usage": usage}
    with pytest.raises(InfrastructureError) as caught:
        anthropic_content(body, "anthropic caller")
    assert caught.value.kind == "malformed_body" and "usage.output_tokens" in str(caught.value)


def test_saved_negative_usage_reads_as_zero_or_unknown() -> None:
    """A trace saved before this check (``input_tokens: -500``) is never reported negative."""
    u = Usage.model_validate({"input_tokens": -500, "output_tokens": 3, "tokens_per_second": -1687.7,
                              "cost_usd": -0.2})
    assert (u.input_tokens, u.output_tokens, u.tokens_per_second, u.cost_usd) == (0, 3, None, None)


class UsageServer(FaultServer):
    """Valid replies, but every ``every``-th reply to ``role`` (``*``: any) carries ``usage`` (None:
    no usage)."""

    def __init__(self, usage: dict[str, Any] | None, role: str = "caller", every: int = 2) -> None:
        super().__init__()
        self.bad_usage, self.bad_role, self.every = usage, role, every
        self.sent_bad = 0
        self._count = itertools.count()
        self._bad_lock = threading.Lock()

    def _completion(self, body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
        out = super()._completion(body, message)
        if self.bad_role in ("*", role_of(body)):
            with self._bad_lock:
                if next(self._count) % self.every == 0:
                    self.sent_bad += 1
                    if self.bad_usage is None:
                        out.pop("usage")
                    else:
                        out["usage"] = self.bad_usage
        return out


async def test_a_negative_count_is_retried_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-usage")
    with UsageServer({"prompt_tokens": -100, "completion_tokens": 5}, role="*") as server:
        client = create_client("openai:fake", ModelSettings(base_url=server.url, retry_base_delay_s=0.01),
                               role="candidate")
        request = ModelRequest(messages=[ChatMessage(role="user", content="hi")],
                               context=RequestContext(role="candidate"))
        try:
            with collect_faults() as ledger:
                response = await client.complete(request)
        finally:
            await client.aclose()
    assert response.usage.input_tokens == 50  # the retry's valid counts
    counts = ledger.role("candidate")
    assert counts.faults == {"malformed_body": 1} and counts.retries == 1 and counts.requests == 2


async def test_a_reply_without_usage_is_used_and_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-usage")
    with UsageServer(None, role="*", every=1) as server:
        client = create_client("openai:fake", ModelSettings(base_url=server.url), role="candidate")
        request = ModelRequest(messages=[ChatMessage(role="user", content="hi")],
                               context=RequestContext(role="candidate"))
        try:
            with collect_faults() as ledger:
                response = await client.complete(request)
        finally:
            await client.aclose()
    assert response.usage.input_tokens == 0 and response.content
    counts = ledger.role("candidate")
    assert counts.faults == {} and counts.notes == {"usage_missing": 1} and counts.retries == 0


def _numbers(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else []


def test_the_run_command_counts_negative_usage_and_reports_nothing_negative(tmp_path: Path) -> None:
    with UsageServer({"prompt_tokens": -100, "completion_tokens": 10, "total_tokens": -90}) as server:
        settings = tmp_path / "settings.yaml"
        settings.write_text(yaml.safe_dump({"caller": {
            "spec": "openai:fake-caller", "base_url": server.url, "retry_base_delay_s": 0.01}}))
        env = {**os.environ, "PYTHONPATH": str(SRC), "OPENAI_API_KEY": "sk-test-usage", "COLUMNS": "200"}
        out = tmp_path / "run"
        run = subprocess.run(
            [sys.executable, "-m", "callbench", "run", str(DAIRY), "--candidate", "scripted:reference",
             "--caller", "openai:fake-caller", "--task-judge", "scripted:met",
             "--conversation-judge", "scripted:met", "--settings", str(settings), "--out", str(out)],
            env=env, capture_output=True, text=True, timeout=limit(600),
        )
        assert run.returncode == 0, run.stderr
        sent_bad = server.sent_bad
    assert sent_bad >= 1
    ledgers = [json.loads(p.read_text()) for p in (out / "faults").glob("*.json")]
    counted = sum(led["roles"]["caller"]["faults"].get("malformed_body", 0) for led in ledgers)
    assert counted == sent_bad
    report = subprocess.run(
        [sys.executable, "-m", "callbench", "report", str(out), "--json", str(tmp_path / "r.json"),
         "--no-html"],
        env=env, capture_output=True, text=True, timeout=limit(600),
    )
    assert report.returncode == 0, report.stderr
    saved = [json.loads(episode_files.read_text(p)) for p in (out / "traces").glob("*.json.gz")]
    saved.append(json.loads((tmp_path / "r.json").read_text()))
    assert saved and min(_numbers(saved)) >= 0
