"""The whole starter through a fake that enforces the providers' documented request rules:
100 scenarios on the OpenAI adapter and 100 on the Anthropic adapter, every episode
scored, no request rejected; and what the same fake answers to a request a provider would reject.

Every role goes through the real adapters over loopback HTTP: the candidate replays each
scenario's reference path, the caller expresses its plan steps in order and the judges label
everything met (:mod:`fakes.conformance_server`), so the run measures what the adapters send,
not a model. Smaller runs keep the caller and judges scripted (``scripted:plan``,
``scripted:met``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.store import load_episode_grades
from callbench.models.base import ChatMessage, ModelRequest, ModelSettings, RequestContext, ToolSchema
from callbench.models.registry import create_client
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.openai_client import OpenAIClient
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters, candidate_slug
from callbench.runs.preflight import PreflightError
from callbench.runs.session import run_and_grade
from fakes.conformance_server import ConformanceServer, HintedClient, HintTransport
from waiting import limit

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
BUNDLE = load_bundle(STARTER)
EITHER = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
          "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}


async def _run(out: Path, provider: str, server: ConformanceServer, *, bundle: Bundle = BUNDLE,
               agents: list[str] | None = None, preflight: bool = True,
               all_roles: bool = False) -> tuple[Any, str | None]:
    """Run and grade ``bundle`` (every scenario, or ``agents``') with the candidate on
    ``provider``'s adapter through ``server``; the caller and judges scripted, or with
    ``all_roles`` on the same adapter through ``server`` too."""
    root = Path(bundle.root)
    spec = f"{provider}:conformance-agent"
    # one attempt, no request meant to time out: a timeout would skip an episode
    settings = ModelSettings(base_url=server.url if provider == "openai" else server.root,
                             timeout_s=limit(120.0), max_attempts=1)
    http = httpx2.AsyncClient(transport=HintTransport())
    adapter = (OpenAIClient if provider == "openai" else AnthropicClient)(spec, settings, http_client=http)

    def role(name: str, scripted: str) -> RoleSpec:
        return RoleSpec(spec=f"{provider}:conformance-{name}", settings=settings) if all_roles else RoleSpec(
            spec=scripted)

    config = RunConfig(bundle_path=root, out=out, candidates=[RoleSpec(spec=spec, settings=settings)],
                       caller=role("caller", "scripted:plan"), task_judge=role("judge", "scripted:met"),
                       conversation_judge=role("judge", "scripted:met"), concurrency=8, seed=24,
                       filters=ScenarioFilters(agents=agents or []), preflight=preflight)
    clients: dict[str, Any] = {
        f"candidate:{candidate_slug(spec, settings)}": HintedClient(adapter),
        **{role: HintedClient(create_client(r.spec, r.settings, bundle=bundle, role=role))  # type: ignore[arg-type]
           for role, r in (("caller", config.caller), ("task_judge", config.task_judge),
                           ("conversation_judge", config.conversation_judge))},
    }
    try:
        return await run_and_grade(config, clients=clients, bundle=bundle)
    finally:
        for c in clients.values():
            await c.aclose()
        await http.aclose()


@pytest.mark.slow  # the whole starter bundle through a fake provider: 46-195 s at load 7
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_whole_starter_through_the_conformance_fake(tmp_path: Path, provider: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-conformance-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-conformance-test")
    # the server's own end is a safety net: the anthropic run took 195 s at load 14 to 17
    with ConformanceServer(BUNDLE, lifetime_s=limit(1800.0)) as server:
        manifest, grade_set = asyncio.run(_run(tmp_path / provider, provider, server, all_roles=True))
    assert grade_set is not None
    assert server.rejected() == []
    assert {e.dialect for e in server.log} == {provider}
    roles = Counter(e.role for e in server.log)
    assert roles["candidate"] > 300  # every episode's requests went through the fake (100 greetings at least)
    assert roles["caller"] > 300 and roles["task_judge"] == 100 and roles["conversation_judge"] == 100
    grades = load_episode_grades(tmp_path / provider, grade_set)
    assert len(grades) == 100 == len(manifest.planned)
    assert len({g.scenario_id for g in grades}) == 100
    assert [g.episode_id for g in grades if g.skipped or g.not_graded or g.overall is None] == []
    # the reference path meets every action check, through the wire as in the reference replay
    unmet = [(g.scenario_id, i.id) for g in grades for i in g.items
             if i.source == "action_check" and i.r != 1.0]
    assert unmet == []


def _request(tools: list[ToolSchema] | None = None, schema: dict[str, Any] | None = None) -> ModelRequest:
    messages = [ChatMessage(role="system", content="s"), ChatMessage(role="user", content="hi")]
    return ModelRequest(messages=messages, tools=tools or [], response_schema=schema,
                        response_schema_name="out",
                        context=RequestContext(role="candidate" if tools else "caller", episode_id="e"))


def test_a_top_level_any_of_gets_each_providers_own_400(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-conformance-test")
    tool = ToolSchema(name="verify", description="d", parameters=EITHER)

    async def go(server: ConformanceServer) -> tuple[str, str]:
        async with httpx2.AsyncClient() as http:
            o = await http.post(f"{server.url}/chat/completions", json={
                "model": "m", "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "verify", "parameters": EITHER}}]})
            a = AnthropicClient("anthropic:m", ModelSettings(base_url=server.root, max_attempts=1))
            try:
                await a.complete(_request([tool]))
            except Exception as e:  # the adapter's own one-line error
                said = str(e)
            else:
                said = ""
            await a.aclose()
            return o.text, said

    with ConformanceServer() as server:
        openai_text, anthropic_said = asyncio.run(go(server))
    assert json.loads(openai_text) == {"error": {
        "message": "Invalid schema for function 'verify': OpenAI rejects 'anyOf' at the top level of a "
                   "tool's parameters", "type": "invalid_request_error",
        "param": "tools[0].function.parameters", "code": "invalid_function_parameters"}}
    assert "tools.0.input_schema.anyOf: Anthropic rejects 'anyOf' at the top level" in anthropic_said
    assert [e.status for e in server.log] == [400, 400]


def test_gemini_mode_rejects_its_unsupported_keywords_in_gemini_words() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
              "additionalProperties": False}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}}

    async def post(url: str, payload: dict[str, Any]) -> httpx2.Response:
        async with httpx2.AsyncClient() as http:
            return await http.post(f"{url}/chat/completions", json=payload)

    with ConformanceServer(gemini=True) as gemini, ConformanceServer() as plain:
        refused = asyncio.run(post(gemini.url, body))
        accepted = asyncio.run(post(plain.url, body))
        loose = {**body, "response_format": {"type": "json_schema", "json_schema": {
            "name": "out", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}}
        fine = asyncio.run(post(gemini.url, loose))
    assert refused.status_code == 400
    error = refused.json()[0]["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == (
        "Invalid JSON payload received. Unknown name \"additionalProperties\" at "
        "'generation_config.response_schema.additionalProperties': Cannot find field.")
    for word in ("response_format", "json_schema", "json_object"):
        assert word not in error["message"]
    assert accepted.status_code == 200 and accepted.json()["choices"][0]["message"]["content"] == '{"a": ""}'
    assert fine.status_code == 200


@pytest.fixture
def planted(tmp_path: Path) -> Bundle:
    """The starter as it once was: a top-level anyOf in lpg_gas_helpline's verify_consumer."""
    root = tmp_path / "starter"
    shutil.copytree(STARTER, root)
    agent = root / "agents" / "lpg_gas_helpline" / "agent.yaml"
    data = yaml.safe_load(agent.read_text(encoding="utf-8"))
    data["tools"][0]["parameters"]["anyOf"] = [{"required": ["registered_mobile"]},
                                               {"required": ["consumer_number"]}]
    agent.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return load_bundle(root)


def test_the_old_starter_schema_is_rejected_by_the_fake(tmp_path: Path, planted: Bundle,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """What the issue measured: without the rule check every candidate request of the agent is
    refused, and each episode is skipped as infrastructure."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-conformance-test")
    with ConformanceServer(planted) as server:
        _, grade_set = asyncio.run(_run(tmp_path / "out", "openai", server, bundle=planted,
                                        agents=["lpg_gas_helpline"], preflight=False))
    rejected = server.rejected()
    assert rejected and {e.problems[0][0] for e in rejected} == {"tools[0].function.parameters.anyOf"}
    assert grade_set is not None
    grades = load_episode_grades(tmp_path / "out", grade_set)
    assert len(grades) == 10 and all(g.skipped for g in grades)


def test_the_preflight_refuses_a_tool_schema_anthropic_rejects(tmp_path: Path, planted: Bundle,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-conformance-test")
    with ConformanceServer(planted) as server, pytest.raises(PreflightError) as caught:
        asyncio.run(_run(tmp_path / "out", "anthropic", server, bundle=planted, agents=["lpg_gas_helpline"]))
    assert server.log == []  # refused before any request
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("preflight: candidate:")
    assert ("Anthropic would reject 1 part(s) of the run's requests: agent lpg_gas_helpline: "
            "tools[0].input_schema.anyOf (tool 'verify_consumer'): Anthropic rejects 'anyOf' at the top "
            "level of a tool's parameters") in message


def test_gemini_mode_can_leave_tools_to_openai_rules() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}}}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}

    async def post(url: str) -> int:
        async with httpx2.AsyncClient() as http:
            return (await http.post(f"{url}/chat/completions", json=body)).status_code

    with ConformanceServer(gemini=True) as strict, \
            ConformanceServer(gemini=True, gemini_tools=False) as lenient:
        assert (asyncio.run(post(strict.url)), asyncio.run(post(lenient.url))) == (400, 200)
        body["tools"] = [{**tool, "function": {**tool["function"], "parameters": EITHER}}]
        assert asyncio.run(post(lenient.url)) == 400  # OpenAI's top-level rule still holds
