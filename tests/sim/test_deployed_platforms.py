"""Vapi and Retell adapters against loopback fakes of their chat APIs (tests/fakes/platform_agents.py):
tool calls reach callbench's webhook in the platform's format and are graded as a model's."""

from __future__ import annotations

import pytest
from tests.fakes.platform_agents import RetellFake, VapiFake
from tests.sim.deployed_helpers import scripted_brain, serve, starter
from tests.sim.test_deployed import _calls, _episode, _graded

from callbench.models.base import ModelSettings
from callbench.models.deployed.base import WebhookConfig
from callbench.models.deployed.retell import RetellDeployed
from callbench.models.deployed.vapi import VapiDeployed
from callbench.models.faults import collect_faults
from callbench.models.scripted.models import create_scripted
from callbench.sim.webhook import webhook_for
from callbench.trace import EndReason

SCENARIO = "clinic_ortho_reschedule"
KEY = "canary-platform-key-5f1e9c"
SECRET = "canary-webhook-secret-a7d2"


def _env(var: str) -> dict[str, str]:
    return {var: KEY}


async def _model_trace():
    return await _episode(create_scripted("scripted:reference", None, starter()), SCENARIO, "p-r0")


@pytest.mark.parametrize("platform", ["vapi", "retell"])
async def test_platform_agent_graded_as_the_model(platform: str) -> None:
    model = await _model_trace()
    brain = scripted_brain(starter())
    fake = VapiFake(brain, SCENARIO, KEY) if platform == "vapi" else RetellFake(brain, SCENARIO, KEY)
    hook_cfg = WebhookConfig(secret=SECRET, retell_key=KEY if platform == "retell" else None)
    async with serve(fake.app()) as url:
        kind = VapiDeployed if platform == "vapi" else RetellDeployed
        cand = kind(
            f"deployed:{platform}:agent_1",
            ModelSettings(base_url=url),
            "agent_1",
            hook_cfg,
            env=_env(kind.key_env),
        )
        try:
            server = await webhook_for(cand)
            fake.webhook_url = f"{server.base_url}/{SECRET}/{platform}"
            with collect_faults() as ledger:
                trace = await _episode(cand, SCENARIO, "p-r0")
        finally:
            await cand.aclose()
    assert trace.end_reason == model.end_reason, trace.skip_reason
    assert _calls(trace) == _calls(model)
    assert _graded(trace) == _graded(model)
    assert trace.state == model.state
    assert trace.deployed is not None and trace.deployed.adapter == platform
    assert set(fake.auth_seen) == {f"Bearer {KEY}"}
    assert ledger.roles["candidate"].requests >= 2 and not ledger.roles["candidate"].faults
    text = trace.canonical_json()
    assert KEY not in text and SECRET not in text


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit"), (503, "server_error"), (401, "auth")])
async def test_platform_faults_skip_the_episode_and_are_attributed(status: int, kind: str) -> None:
    fake = RetellFake(scripted_brain(starter()), SCENARIO, KEY)
    fake.status = status
    async with serve(fake.app()) as url:
        cand = RetellDeployed(
            "deployed:retell:agent_1",
            ModelSettings(base_url=url),
            "agent_1",
            WebhookConfig(secret=SECRET, retell_key=KEY),
            env=_env("RETELL_API_KEY"),
        )
        try:
            server = await webhook_for(cand)
            fake.webhook_url = f"{server.base_url}/{SECRET}/retell"
            with collect_faults() as ledger:
                trace = await _episode(cand, SCENARIO, "f-r0")
        finally:
            await cand.aclose()
    assert trace.end_reason == EndReason.SKIPPED
    assert trace.skip_reason is not None and trace.skip_reason.startswith("infrastructure:")
    assert f"HTTP {status}" in trace.skip_reason and KEY not in trace.skip_reason
    assert ledger.roles["candidate"].faults == {kind: 1}
    assert (ledger.skip_role, ledger.skip_kind) == ("candidate", kind)
    assert fake.ended_chats, "the chat is ended on the platform even when the episode is skipped"


def test_missing_platform_key_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="deployed:vapi:a1: set VAPI_API_KEY"):
        VapiDeployed("deployed:vapi:a1", ModelSettings(), "a1", WebhookConfig(), env={})
