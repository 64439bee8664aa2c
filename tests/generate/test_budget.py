"""Output budgets from the expected scenario size; cut-off and fenced answers get their own
messages and repair steps."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from callbench.bundle.models import Scenario
from callbench.generate.answer import read_answer, unfence
from callbench.generate.budget import MEAN_SCENARIO_TOKENS, output_budget
from callbench.generate.generator import GenerateOptions, generate_batch
from callbench.generate.manifest import load_manifest
from callbench.models.base import ModelRequest, ModelResponse, ModelSettings, RequestContext, Usage
from callbench.models.remote.openai_client import openai_request_body
from callbench.models.scripted.generator import ScriptedGenerator

from .conftest import AGENT, DATA, VALID


def _valid() -> Scenario:
    data = yaml.safe_load((DATA / f"{VALID}.yaml").read_text(encoding="utf-8"))
    return Scenario.model_validate({**data, "agent": AGENT})


def test_budget_follows_the_expected_scenario_size() -> None:
    # no scenario of the agent yet: the documented mean, twice, in 256-token steps
    assert output_budget([], "en-IN") == 8960 == -(-MEAN_SCENARIO_TOKENS * 2 // 256) * 256
    assert output_budget([], "hi-IN") == 26368  # Devanagari text costs about 3 times more
    # the agent's own scenarios in that language set the size (here a smaller one), with a floor
    own = output_budget([_valid()], "en-IN")
    assert 4096 <= own < 8960
    assert output_budget([_valid()], "gu-IN") == output_budget([], "gu-IN")  # other language


def test_openai_body_carries_the_request_budget_unless_settings_set_one() -> None:
    req = ModelRequest(messages=[], context=RequestContext(role="generator", episode_id="e"),
                       max_output_tokens=8960)
    body = openai_request_body(req, "gpt-x", ModelSettings(), official_endpoint=True)
    assert body["max_completion_tokens"] == 8960
    body = openai_request_body(req, "gpt-x", ModelSettings(max_tokens=500), official_endpoint=False)
    assert body["max_tokens"] == 500


def test_fenced_json_is_unwrapped_with_a_note() -> None:
    assert unfence('```json\n{"a": 1}\n```') == '{"a": 1}' and unfence('{"a": 1}') is None
    read = read_answer('```json\n{"a": 1}\n```', {"type": "object"}, usage=None, finish_reason="stop",
                       budget=100)
    assert read.data == {"a": 1} and read.problems == [] and read.notes[0].startswith("output.fenced")
    bad = read_answer('```\n{"a": \n```', {"type": "object"}, usage=None, finish_reason="stop", budget=100)
    [(code, msg)] = bad.problems
    assert code == "output.invalid" and "(inside the code fence)" in msg


def test_cut_off_answer_is_its_own_problem() -> None:
    read = read_answer('{"id": "x", "brief": {"context": "A long', {"type": "object"},
                       usage=Usage(output_tokens=2048), finish_reason=None, budget=2048)
    [(code, msg)] = read.problems
    assert read.truncated and code == "output.truncated"
    assert "cut off at its output budget of 2,048 tokens" in msg and "not valid JSON" not in msg


class _CutOnce:
    """Answers the first request cut off at its budget (finish_reason length), then the scenario in
    a code fence; records each request's budget."""

    def __init__(self, script: Path) -> None:
        self.inner = ScriptedGenerator(f"scripted:generator:{script}", None, script)
        self.spec, self.settings = "openai:gpt-test", ModelSettings()
        self.budgets: list[int | None] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.budgets.append(request.max_output_tokens)
        full = await self.inner.complete(request)
        text = full.content or ""
        if len(self.budgets) == 1:
            return ModelResponse(content=text[: len(text) // 2], finish_reason="length",
                                 usage=Usage(output_tokens=request.max_output_tokens or 0))
        fenced = f"```json\n{text}\n```"
        return ModelResponse(content=fenced, finish_reason="stop", usage=Usage(output_tokens=10))

    async def aclose(self) -> None:
        return None


def test_cut_off_then_fenced_answer_is_repaired_with_a_larger_budget(
    agent_bundle: Path, script: Path
) -> None:
    client = _CutOnce(script)
    outcome = asyncio.run(generate_batch(agent_bundle, client, GenerateOptions(agent=AGENT, n=1)))
    assert outcome.written == [VALID]
    assert client.budgets == [8960, 17920]
    rec = load_manifest(agent_bundle).scenarios[VALID]
    first, second = rec.audit
    assert first.output_budget == 8960 and "[output.truncated]" in first.problems[0]
    assert second.output_budget == 17920 and second.problems == []
    assert second.notes and second.notes[0].startswith("output.fenced")
    written = (agent_bundle / rec.file).read_text(encoding="utf-8")
    assert "```" not in written and json.dumps(VALID) in json.dumps(yaml.safe_load(written)["id"])
