"""A whole run with a deployed (Vapi) candidate against a loopback fake: the deployment is checked
against the bundle before any episode, its configuration hash lands in the manifest and the
traces, preflight opens a session, and no credential is saved anywhere in the run folder."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from tests.fakes.platform_agents import VapiFake
from tests.sim.deployed_helpers import STARTER, scripted_brain, serve, starter

from callbench.models.base import ModelClient, ModelSettings
from callbench.models.deployed.base import WebhookConfig
from callbench.models.deployed.platform import config_sha256
from callbench.models.deployed.vapi import VapiDeployed
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.runfolder.store import RunStore
from callbench.runs.deployment import DeploymentMismatch
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters, candidate_slug
from callbench.runs.preflight import PreflightError, preflight
from callbench.runs.session import run_and_grade
from callbench.sim.webhook import webhook_for

SCENARIO = "clinic_ortho_reschedule"
KEY = "canary-vapi-key-0b7d51"
SECRET = "canary-hook-secret-93ce"


def _assistant(tools_override: dict[str, object] | None = None) -> dict[str, object]:
    agent, _ = starter().scenario(SCENARIO)
    tools = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in agent.config.tools
    ]
    if tools_override:
        tools[0]["function"] = {**tools[0]["function"], **tools_override}  # type: ignore[dict-item]
    return {"id": "asst_1", "name": "clinic", "model": {"provider": "openai", "tools": tools}}


async def _run(tmp_path: Path, fake: VapiFake, url: str, key: str = KEY) -> tuple[object, Path, VapiDeployed]:
    settings = ModelSettings(base_url=url)
    spec = "deployed:vapi:asst_1"
    config = RunConfig(
        bundle_path=STARTER,
        out=tmp_path / "run",
        candidates=[RoleSpec(spec=spec, settings=settings)],
        caller=RoleSpec(spec="scripted:plan"),
        task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"),
        filters=ScenarioFilters(scenarios=[SCENARIO]),
        concurrency=2,
    )
    cand = VapiDeployed(spec, settings, "asst_1", WebhookConfig(secret=SECRET), env={"VAPI_API_KEY": key})
    server = await webhook_for(cand)
    fake.webhook_url = f"{server.base_url}/{SECRET}/vapi"
    clients: dict[str, ModelClient] = {
        f"candidate:{candidate_slug(spec, settings)}": cand,
        "caller": create_scripted("scripted:plan", ModelSettings(), starter()),
        "task_judge": create_scripted_judge("scripted:met", ModelSettings()),
        "conversation_judge": create_scripted_judge("scripted:met", ModelSettings()),
    }
    try:
        manifest, _ = await run_and_grade(config, clients=clients, bundle=starter())
    finally:
        await cand.aclose()
    return manifest, config.out, cand


def _all_bytes(folder: Path) -> bytes:
    out = b""
    for p in folder.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            out += gzip.decompress(data) if p.suffix == ".gz" else data
    return out


async def test_deployed_run_records_the_deployment_and_saves_no_secret(tmp_path: Path) -> None:
    assistant = _assistant()
    fake = VapiFake(scripted_brain(starter()), SCENARIO, KEY, assistant)
    async with serve(fake.app()) as url:
        manifest, out, _ = await _run(tmp_path, fake, url)
    want = config_sha256(assistant)
    assert manifest.deployed_configs == {"deployed:vapi:asst_1": want}  # type: ignore[attr-defined]
    store = RunStore(out)
    try:
        traces = [store.load_trace(e) for e in store.finished_ids()]
    finally:
        store.close()
    assert len(traces) == 1 and traces[0].deployed is not None
    assert traces[0].deployed.config_sha256 == want and traces[0].tool_events
    saved = _all_bytes(out)
    assert KEY.encode() not in saved and SECRET.encode() not in saved
    assert b"deployed:vapi:asst_1" in saved


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ({"name": "renamed_tool"}, "is not deployed"),
        (
            {
                "parameters": {
                    "type": "object",
                    "properties": {"extra": {"type": "string"}},
                    "required": ["extra"],
                }
            },
            "deployed parameter 'extra' is not in the bundle",
        ),
    ],
)
async def test_mismatched_deployment_stops_before_any_episode(
    tmp_path: Path, override: dict[str, object], line: str
) -> None:
    fake = VapiFake(scripted_brain(starter()), SCENARIO, KEY, _assistant(override))
    async with serve(fake.app()) as url:
        with pytest.raises(DeploymentMismatch) as err:
            await _run(tmp_path, fake, url)
    text = str(err.value)
    assert line in text and all(ln.startswith("deployed:vapi:asst_1: ") for ln in text.splitlines()[1:])
    assert fake.sessions == {} and not (tmp_path / "run" / "traces").exists()


async def test_preflight_opens_a_session_and_refuses_one_that_does_not_open() -> None:
    fake = VapiFake(scripted_brain(starter()), SCENARIO, KEY, _assistant())
    async with serve(fake.app()) as url:
        good = VapiDeployed(
            "deployed:vapi:asst_1",
            ModelSettings(base_url=url),
            "asst_1",
            WebhookConfig(secret=SECRET),
            env={"VAPI_API_KEY": KEY},
        )
        bad = VapiDeployed(
            "deployed:vapi:asst_1",
            ModelSettings(base_url=url, max_attempts=1),
            "asst_1",
            WebhookConfig(secret=SECRET),
            env={"VAPI_API_KEY": "canary-wrong-key-1234"},
        )
        try:
            assert await preflight({"candidate:good": good}) == []
            with pytest.raises(PreflightError) as err:
                await preflight({"candidate:bad": bad})
        finally:
            await good.aclose()
            await bad.aclose()
    assert str(err.value).startswith("preflight: candidate:bad deployed:vapi:asst_1: ")
    assert "HTTP 401" in str(err.value) and "canary-wrong-key-1234" not in str(err.value)
    assert len(fake.auth_seen) == 2 and fake.sessions == {}  # the good session was opened and closed


async def test_livekit_run_records_its_config_and_saves_no_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("livekit.agents")
    from callbench.models.deployed import create_deployed

    spec = "deployed:livekit:tests.fakes.livekit_bot:clinic"
    config = RunConfig(
        bundle_path=STARTER,
        out=tmp_path / "run",
        candidates=[RoleSpec(spec=spec)],
        caller=RoleSpec(spec="scripted:plan"),
        task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"),
        filters=ScenarioFilters(scenarios=[SCENARIO]),
    )
    cand = create_deployed(
        spec, spec.removeprefix("deployed:"), ModelSettings(), WebhookConfig(secret=SECRET)
    )
    clients: dict[str, ModelClient] = {
        f"candidate:{candidate_slug(spec, ModelSettings())}": cand,
        "caller": create_scripted("scripted:plan", ModelSettings(), starter()),
        "task_judge": create_scripted_judge("scripted:met", ModelSettings()),
        "conversation_judge": create_scripted_judge("scripted:met", ModelSettings()),
    }
    caplog.set_level("DEBUG")
    try:
        manifest, _ = await run_and_grade(config, clients=clients, bundle=starter())
    finally:
        await cand.aclose()
    want = config_sha256(await cand.deployed_config())
    assert manifest.deployed_configs == {spec: want}  # type: ignore[attr-defined]
    store = RunStore(config.out)
    try:
        traces = [store.load_trace(e) for e in store.finished_ids()]
    finally:
        store.close()
    assert len(traces) == 1 and traces[0].deployed is not None
    assert traces[0].deployed.adapter == "livekit" and traces[0].deployed.config_sha256 == want
    assert [e.name for e in traces[0].tool_events][:2] == ["verify_patient", "get_patient_appointments"]
    assert SECRET.encode() not in _all_bytes(config.out)
    assert not [r for r in caplog.records if SECRET in r.getMessage() or SECRET in str(r.__dict__)]
