"""Provider request rules as data: tool schemas, whole request bodies, and
``callbench validate --providers``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.models.base import ModelSettings
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.request_rules import anthropic_request_problems, openai_request_problems
from callbench.models.remote.rules import (
    ANTHROPIC,
    GEMINI,
    OPENAI,
    OPENAI_STRICT,
    parameters_problems,
    parse_targets,
    tools_problems,
)
from callbench.runs.provider_check import bundle_provider_problems, client_target, request_rule_problems

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
runner = CliRunner()

EITHER = {
    "type": "object",
    "properties": {"mobile": {"type": "string"}, "consumer": {"type": "string"}, "pin": {"type": "string"}},
    "required": ["pin"],
    "anyOf": [{"required": ["mobile"]}, {"required": ["consumer"]}],
    "additionalProperties": False,
}


def test_top_level_combinators_are_rejected_by_openai_and_anthropic() -> None:
    assert parameters_problems(EITHER, OPENAI) == [
        ("anyOf", "OpenAI rejects 'anyOf' at the top level of a tool's parameters")]
    assert [p for p, _ in parameters_problems(EITHER, ANTHROPIC)] == ["anyOf"]
    one_of = {**EITHER, "oneOf": [{"required": ["mobile"]}]}
    assert {p for p, _ in parameters_problems(one_of, OPENAI)} == {"anyOf", "oneOf"}
    # OpenAI also refuses a top-level enum and not; Anthropic documents only the three combinators
    assert [p for p, _ in parameters_problems({"type": "object", "not": {}}, OPENAI)] == ["not"]
    assert parameters_problems({"type": "object", "not": {}}, ANTHROPIC) == []


def test_nested_any_of_is_fine_but_a_non_object_top_level_is_not() -> None:
    nested = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}
    assert parameters_problems(nested, OPENAI) == []
    assert parameters_problems(nested, ANTHROPIC) == []
    assert parameters_problems({"type": "array"}, ANTHROPIC)[0][0] == "type"


def test_strict_mode_rules() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "minLength": 2},
                                               "b": {"type": "object", "properties": {}}},
              "required": ["a"], "additionalProperties": False}
    found = dict(parameters_problems(schema, OPENAI_STRICT))
    assert "not required: b" in found["required"]
    assert "minLength" in found["properties.a.minLength"]
    assert "additionalProperties: false" in found["properties.b.additionalProperties"]
    deep: dict = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": False}
    assert any("levels of nesting" in m for _, m in parameters_problems(deep, OPENAI_STRICT))
    many = {"type": "object", "properties": {"e": {"enum": list(range(1001))}}, "required": ["e"],
            "additionalProperties": False}
    assert any("1000 enum values" in m for _, m in parameters_problems(many, OPENAI_STRICT))


def test_gemini_subset() -> None:
    schema = {"type": "object", "properties": {"n": {"type": ["string", "null"]}, "r": {"$ref": "#/$defs/x"}},
              "$defs": {"x": {"type": "string"}}, "additionalProperties": False}
    paths = {p for p, _ in parameters_problems(schema, GEMINI)}
    assert paths == {"$defs", "additionalProperties", "properties.n.type", "properties.r.$ref"}
    assert GEMINI.severity == "warning"


def test_tool_names_and_count() -> None:
    ok = {"type": "object", "properties": {}}
    found = tools_problems([("get status", ok), ("a" * 65, ok), ("dup", ok), ("dup", ok)], OPENAI)
    assert [(i, p) for i, p, _ in found] == [(0, "name"), (1, "name"), (3, "name")]
    assert tools_problems([(f"t{i}", ok) for i in range(129)], OPENAI)[0][0] == -1
    assert tools_problems([(f"t{i}", ok) for i in range(129)], ANTHROPIC) == []
    assert tools_problems([("9lives", ok)], GEMINI)[0][1] == "name"
    assert tools_problems([("ns.tool", ok)], GEMINI) == []


def test_parse_targets() -> None:
    assert [r.name for r in parse_targets("openai, anthropic")] == ["openai", "anthropic"]
    assert len(parse_targets("all")) == 4
    with pytest.raises(ValueError, match=r"unknown provider target.*bedrock"):
        parse_targets("openai,bedrock")


def _openai(messages: list[dict], **extra: object) -> dict:
    return {"model": "m", "messages": messages, **extra}


def test_openai_message_order() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    good = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    assert openai_request_problems(_openai(good), OPENAI) == []
    orphan = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c9", "content": "ok"}]
    assert openai_request_problems(_openai(orphan), OPENAI)[0][0] == "messages[1]"
    unanswered = [*good[:3], {"role": "user", "content": "and?"}]
    assert "responding to each 'tool_call_id'" in openai_request_problems(_openai(unanswered), OPENAI)[0][1]
    assert openai_request_problems(_openai(good[:2], tool_choice="auto"), OPENAI)[0][0] == "tool_choice"


def test_openai_request_locates_a_tool_schema_as_the_api_does() -> None:
    body = _openai([{"role": "user", "content": "hi"}],
                   tools=[{"type": "function", "function": {"name": "ok", "parameters": {"type": "object"}}},
                          {"type": "function", "function": {"name": "v", "parameters": EITHER}}])
    message = "OpenAI rejects 'anyOf' at the top level of a tool's parameters"
    assert openai_request_problems(body, OPENAI) == [("tools[1].function.parameters.anyOf", message)]


def test_openai_strict_response_format() -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = _openai([{"role": "user", "content": "x"}], response_format={
        "type": "json_schema", "json_schema": {"name": "out", "schema": loose, "strict": True}})
    where = "response_format.json_schema.schema"
    assert {p for p, _ in openai_request_problems(body, OPENAI)} == {
        f"{where}.additionalProperties", f"{where}.required"}
    body["response_format"]["json_schema"]["strict"] = False
    assert openai_request_problems(body, OPENAI) == []
    assert openai_request_problems(body, GEMINI) == []  # no Gemini-only keyword in it
    body["response_format"]["json_schema"]["schema"] = {**loose, "additionalProperties": False}
    assert [p for p, _ in openai_request_problems(body, GEMINI)] == [
        "response_format.json_schema.schema.additionalProperties"]


def _anthropic(messages: list[dict], **extra: object) -> dict:
    return {"model": "m", "max_tokens": 10, "messages": messages, **extra}


def test_anthropic_message_rules() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result, {"type": "text", "text": "and?"}]}]
    assert anthropic_request_problems(_anthropic(good, system="s"), ANTHROPIC) == []
    assert anthropic_request_problems(_anthropic(good[1:]), ANTHROPIC)[0][0] == "messages[0].role"
    late = [*good[:2], {"role": "user", "content": [{"type": "text", "text": "and?"}, result]}]
    found = anthropic_request_problems(_anthropic(late), ANTHROPIC)
    assert [p for p, _ in found] == ["messages[2].content[1]"]
    missing = [*good[:2], {"role": "user", "content": "and?"}]
    assert anthropic_request_problems(_anthropic(missing), ANTHROPIC)[0][0] == "messages[2]"
    system_role = [{"role": "system", "content": "s"}, *good]
    assert anthropic_request_problems(_anthropic(system_role), ANTHROPIC)[0][0] == "messages[0].role"
    no_max = {"model": "m", "messages": good}
    assert ("max_tokens", "max_tokens: Field required") in anthropic_request_problems(no_max, ANTHROPIC)
    empty = [{"role": "user", "content": [{"type": "text", "text": " "}]}]
    assert anthropic_request_problems(_anthropic(empty), ANTHROPIC)[0][0] == "messages[0].content[0]"
    tools = [{"name": "v", "input_schema": EITHER}]
    found = anthropic_request_problems(_anthropic(good, tools=tools), ANTHROPIC)
    assert found[0][0] == "tools[0].input_schema.anyOf"
    cached = [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}] * 5
    assert anthropic_request_problems(_anthropic(good, system=cached), ANTHROPIC)[0][0] == "cache_control"


def test_starter_passes_openai_and_anthropic() -> None:
    errors, warnings = bundle_provider_problems(load_bundle(STARTER), parse_targets("openai,anthropic"))
    assert errors == [] and warnings == []


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """The starter with the old top-level anyOf put back into lpg_gas_helpline's verify_consumer."""
    root = tmp_path / "starter"
    shutil.copytree(STARTER, root)
    agent = root / "agents" / "lpg_gas_helpline" / "agent.yaml"
    data = yaml.safe_load(agent.read_text(encoding="utf-8"))
    index = next(i for i, t in enumerate(data["tools"]) if t["name"] == "verify_consumer")
    data["tools"][index]["parameters"]["anyOf"] = [{"required": ["registered_mobile"]},
                                                   {"required": ["consumer_number"]}]
    agent.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return root


def test_validate_reports_a_planted_top_level_any_of_as_a_located_error(planted: Path) -> None:
    result = runner.invoke(app, ["validate", str(planted)])
    assert result.exit_code == 1, result.output
    lines = [x for x in result.output.splitlines() if "provider." in x]
    assert lines == [
        "agents/lpg_gas_helpline/agent.yaml:tools.0.parameters.anyOf: [provider.openai] tool "
        "'verify_consumer': OpenAI rejects 'anyOf' at the top level of a tool's parameters",
        "agents/lpg_gas_helpline/agent.yaml:tools.0.parameters.anyOf: [provider.anthropic] tool "
        "'verify_consumer': Anthropic rejects 'anyOf' at the top level of a tool's parameters",
    ]
    only = runner.invoke(app, ["validate", str(planted), "--providers", "anthropic", "--json"])
    assert only.exit_code == 1
    assert '"code": "provider.anthropic"' in only.stdout and "provider.openai" not in only.stdout
    assert runner.invoke(app, ["validate", str(planted), "--providers", "none"]).exit_code == 0


def test_validate_gemini_gives_warnings_only() -> None:
    result = runner.invoke(app, ["validate", str(STARTER), "--providers", "gemini"])
    assert result.exit_code == 0, result.output
    warned = [x for x in result.output.splitlines() if x.startswith("warning: ") and "provider.gemini" in x]
    assert any("additionalProperties" in x for x in warned)
    assert result.output.rstrip().splitlines()[-1].startswith("OK: ")


def test_validate_unknown_provider_is_one_line() -> None:
    result = runner.invoke(app, ["validate", str(STARTER), "--providers", "bedrock"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --providers: unknown provider target(s) bedrock; choose from openai, openai-strict, "
        "anthropic, gemini or all"]


def test_anthropic_request_size_limit() -> None:
    big = [{"role": "user", "content": "x" * (32 * 1024 * 1024)}]
    assert anthropic_request_problems(_anthropic(big), ANTHROPIC)[0][1].startswith("request_too_large: ")
    assert anthropic_request_problems(_anthropic([{"role": "user", "content": "x" * 1000}]), ANTHROPIC) == []


def test_audit_reports_the_planted_any_of_too(planted: Path) -> None:
    scenario = "lpg_en_late_delivery_no_second_booking"
    result = runner.invoke(app, ["audit", str(planted), "--scenarios", scenario, "--json"])
    assert result.exit_code == 1, result.output
    assert '"code": "provider.openai"' in result.stdout and '"code": "provider.anthropic"' in result.stdout


def test_which_rules_bind_the_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-rules-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-rules-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    official = OpenAIClient("openai:gpt-x", ModelSettings())
    local = OpenAIClient("openai:m", ModelSettings(base_url="http://127.0.0.1:8080/v1"))
    gemini = OpenAIClient("openai:gemini-x", ModelSettings(
        base_url="https://generativelanguage.googleapis.com/v1beta/openai/"))
    gateway = AnthropicClient("anthropic:c", ModelSettings(base_url="http://127.0.0.1:4000"))
    assert client_target(official) == (OPENAI, True)
    assert client_target(local) == (OPENAI, False)
    assert client_target(gemini) == (GEMINI, False)
    assert client_target(gateway) == (ANTHROPIC, True)
    pairs = load_bundle(STARTER).scenarios()
    errors, warnings = request_rule_problems(
        {"candidate:a": official, "candidate:b": gateway, "caller": gemini, "task_judge": gateway}, pairs)
    assert errors == []  # the starter's tools and every role's schemas pass OpenAI and Anthropic
    assert len(warnings) == 1 and warnings[0].startswith("preflight: caller openai:gemini-x: Gemini")
    assert "response_format.json_schema.schema.additionalProperties" in warnings[0]
