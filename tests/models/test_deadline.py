"""``timeout_s`` bounds the whole request, headers and body, on every adapter: a
body dripped one byte per 0.2 s against a 0.5 s timeout is a ``timeout`` fault, retried and counted.
It used to be waited for in full (the transport's timeout limits each read, not the exchange)."""

from __future__ import annotations

import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelRequest,
    ModelSettings,
    RequestContext,
)
from callbench.models.faults import collect_faults
from callbench.models.registry import create_client
from fakes.drip_server import DripServer
from waiting import limit

CTX = RequestContext(role="candidate", episode_id="ep1")
REQUEST = ModelRequest(messages=[ChatMessage(role="system", content="Greet.")], context=CTX)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_dripped_body_is_a_timeout_fault_retried_and_counted(
    monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-drip")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-drip")
    with DripServer(0.2) as server:
        settings = ModelSettings(
            base_url=server.url if provider == "openai" else server.root,
            timeout_s=0.5, max_attempts=3, retry_base_delay_s=0.01,
        )
        client = create_client(f"{provider}:drip", settings, role="candidate")
        try:
            with collect_faults() as ledger, pytest.raises(InfrastructureError) as caught:
                await client.complete(REQUEST)
        finally:
            await client.aclose()
        assert caught.value.kind == "timeout"
        assert "after 3 attempts" in str(caught.value)
        counts = ledger.role("candidate")
        assert counts.requests == 3 and counts.retries == 2
        assert counts.faults == {"timeout": 3}
        assert server.requests == 3


async def test_a_body_within_the_deadline_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline is not a cap on a reply that arrives in time: a fast drip is accepted."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-drip")
    with DripServer(0.0) as server:
        # far above what the byte-by-byte reply needs even on a loaded machine: it must not time out
        client = create_client("openai:drip", ModelSettings(base_url=server.url, timeout_s=limit(120.0)),
                               role="candidate")
        try:
            response = await client.complete(REQUEST)
        finally:
            await client.aclose()
    assert response.content == "Hello, this is the helpline."


def test_a_run_counts_dripped_replies_as_timeouts(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The real command: the candidate's server drips; the episode is skipped for a candidate
    ``timeout`` and the run's fault ledger counts every attempt."""
    import json
    from pathlib import Path

    import yaml
    from typer.testing import CliRunner

    from callbench.cli import app

    dairy = Path(__file__).parents[1] / "sim" / "data" / "dairy_bundle"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-drip")
    with DripServer(0.2) as server:
        settings = tmp_path / "settings.yaml"
        settings.write_text(yaml.safe_dump({"candidate": {
            "spec": "openai:drip", "base_url": server.url, "timeout_s": 0.5, "max_attempts": 2,
            "retry_base_delay_s": 0.01}}), encoding="utf-8")
        out = tmp_path / "run"
        res = CliRunner().invoke(app, [
            "run", str(dairy), "--candidate", "openai:drip", "--caller", "scripted:plan",
            "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--limit", "1",
            "--settings", str(settings), "--no-preflight", "--out", str(out)])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        assert server.requests == 2
    ledgers = [json.loads(p.read_text()) for p in (out / "faults").glob("*.json")]
    assert len(ledgers) == 1, res.output
    candidate = ledgers[0]["roles"]["candidate"]
    assert candidate["faults"] == {"timeout": 2} and candidate["requests"] == 2
    assert ledgers[0]["skip_role"] == "candidate" and ledgers[0]["skip_kind"] == "timeout"
