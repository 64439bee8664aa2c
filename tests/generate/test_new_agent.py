"""``callbench new-agent``: an agent folder from a system prompt and a tools file (OpenAI or
Anthropic format), call-ending tools and success conditions from flags; located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from callbench.bundle.validate.audits import load_bundle
from callbench.generate.new_agent import parse_success
from callbench.generate.tools_import import ToolsFileError, parse_tools

from .conftest import AGENT, DATA, invoke


def test_made_agent_loads_with_its_tools_and_success_condition(agent_bundle: Path) -> None:
    bundle = load_bundle(agent_bundle)
    agent = bundle.agents[AGENT]
    assert [t.name for t in agent.config.tools] == [
        "verify_consumer",
        "log_complaint",
        "get_tanker_slots",
        "book_tanker",
        "end_call",
    ]
    assert agent.config.languages == ["en-IN"] and agent.config.domain == "utilities"
    [ending] = agent.config.call_ending_tools
    assert ending.tool == "end_call" and ending.success["status"].evaluate("ended").ok
    assert not ending.success["status"].evaluate("failed").ok
    prompt = (agent_bundle / "agents" / AGENT / "prompt.md").read_bytes()
    assert prompt == (DATA / "water_prompt.md").read_bytes()
    assert agent.config.prompt_sha256 is not None and (agent_bundle / "bundle.yaml").is_file()
    code, out, _ = invoke("validate", str(agent_bundle))
    assert code == 0 and "1 agent(s), 0 scenario(s), no problems" in out


def test_anthropic_tools_and_flow_matchers(tmp_path: Path) -> None:
    openai_tools = json.loads((DATA / "water_tools.json").read_text(encoding="utf-8"))
    anthropic = {
        "tools": [
            {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "input_schema": t["function"]["parameters"],
            }
            for t in openai_tools
        ]
    }
    tools = tmp_path / "anthropic.json"
    tools.write_text(json.dumps(anthropic), encoding="utf-8")
    code, out, err = invoke(
        "new-agent",
        str(tmp_path / "b"),
        "--prompt",
        str(DATA / "water_prompt.md"),
        "--tools",
        str(tools),
        "--call-ending",
        "end_call",
        "--success",
        "end_call:status={one_of: [ended, closed]}",
    )
    assert code == 0, out + err
    agent = load_bundle(tmp_path / "b").agents["water_prompt"]  # id from the prompt file name
    assert agent.config.tools[1].parameters["properties"]["category"]["enum"][0] == "no_water"
    cond = agent.config.call_ending_tools[0].success["status"]
    assert cond.evaluate("closed").ok and not cond.evaluate("open").ok


def test_responses_api_flat_tools() -> None:
    [t] = parse_tools([{"type": "function", "name": "ping", "description": "Ping.", "parameters": None}])
    assert t.name == "ping" and t.parameters == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected a non-empty list of tools"),
        ([{"type": "function", "function": {"name": "a b", "description": "x"}}], "tools[0].function.name"),
        ([{"name": "a", "description": ""}], "tools[0].description: empty"),
        (
            [{"name": "a", "description": "x"}, {"name": "a", "description": "y"}],
            "tools[1].name: tool 'a' is listed twice",
        ),
        ([{"type": "web_search"}], "tools[0].type: 'web_search' is not a function tool"),
        # a Vapi sms tool (with a name and messages) is not a function
        ([{"name": "a", "description": "x"}, {"type": "sms", "name": "send_text", "metadata": {}}],
         "tools[1].type: 'sms' is not a function tool"),
        ([{"type": "transferCall", "destinations": []}], "tools[0].type: 'transferCall'"),
        ([{"name": "x"}], "tools[0].description: empty"),
        (["end_call"], "tools[0]: expected an object, got str"),
    ],
)
def test_bad_tools_are_located(data: object, message: str) -> None:
    with pytest.raises(ToolsFileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_tools(data, "t.json")


def test_success_parsing() -> None:
    assert parse_success(["end_call:status=ended", "end_call:code=3", "transfer:ok=true"]) == {
        "end_call": {"status": "ended", "code": 3},
        "transfer": {"ok": True},
    }
    for bad in ("end_call", "end_call:status", ":status=ended", "end_call:=x"):
        with pytest.raises(ValueError, match="expected TOOL:FIELD=VALUE"):
            parse_success([bad])


def _new(root: Path, *extra: str, prompt: Path = DATA / "water_prompt.md") -> tuple[int, str, str]:
    return invoke(
        "new-agent",
        str(root),
        "--prompt",
        str(prompt),
        "--tools",
        str(DATA / "water_tools.json"),
        "--id",
        AGENT,
        *extra,
    )


def test_bad_flags_are_refused_with_the_flag_named(tmp_path: Path, agent_bundle: Path) -> None:
    code, _, err = _new(tmp_path / "x")  # no call-ending tool (CliRunner's stdin is no terminal)
    assert code == 2 and "--call-ending: name at least one call-ending tool" in err
    code, _, err = _new(tmp_path / "x", "--call-ending", "hang_up", "--success", "hang_up:status=ended")
    assert code == 2 and "--call-ending 'hang_up': no such tool" in err
    code, _, err = _new(tmp_path / "x", "--call-ending", "end_call")
    assert code == 2 and "give its success condition" in err
    code, _, err = _new(
        tmp_path / "x",
        "--call-ending",
        "end_call",
        "--success",
        "end_call:status=ended",
        "--success",
        "book_tanker:status=booked",
    )
    assert code == 2 and "'book_tanker' is not named by --call-ending" in err
    code, _, err = _new(agent_bundle, "--call-ending", "end_call", "--success", "end_call:status=ended")
    assert code == 2 and "already exists" in err
    assert not (tmp_path / "x").exists()


def test_agent_that_does_not_validate_is_not_kept(tmp_path: Path) -> None:
    import json

    tools = json.loads((DATA / "water_tools.json").read_text(encoding="utf-8"))
    tools[0]["function"]["parameters"]["properties"]["bad"] = {"type": "strng"}  # not a JSON type
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps(tools), encoding="utf-8")

    def new(root: Path) -> tuple[int, str, str]:
        return invoke("new-agent", str(root), "--prompt", str(DATA / "water_prompt.md"), "--tools", str(bad),
                      "--id", AGENT, "--call-ending", "end_call", "--success", "end_call:status=ended")

    code, out, err = new(tmp_path / "b")
    assert code == 1 and "strng" in out and "the agent was not kept" in err
    assert not (tmp_path / "b" / "agents" / AGENT).exists() and not (tmp_path / "b" / "bundle.yaml").exists()
    # regression: the empty agents/ folder (and the bundle folder this call made) were left behind
    assert not (tmp_path / "b").exists()
    kept = tmp_path / "mine"
    (kept / "agents").mkdir(parents=True)
    code, _, _ = new(kept)
    assert code == 1 and (kept / "agents").is_dir()  # folders that were there before stay


def test_undefined_template_variable_becomes_a_declared_one(tmp_path: Path) -> None:
    # what was an undefined-variable failure is now a declared variable
    prompt = tmp_path / "p.md"
    prompt.write_text("# Agent\n\nToday is {{ day_of_week }} at {{time}}.\n", encoding="utf-8")
    code, out, err = _new(tmp_path / "b", "--call-ending", "end_call", "--success", "end_call:status=ended",
                          prompt=prompt)
    assert code == 0, out + err
    assert "variable day_of_week declared with default '[day_of_week]'" in out
    written = (tmp_path / "b" / "agents" / AGENT / "prompt.md").read_text(encoding="utf-8")
    assert written == "# Agent\n\nToday is {{ day_of_week }} at {{time}}.\n"  # unchanged where it can be


def test_agent_yaml_is_readable_yaml(agent_bundle: Path) -> None:
    data = yaml.safe_load((agent_bundle / "agents" / AGENT / "agent.yaml").read_text(encoding="utf-8"))
    assert data["call_ending_tools"] == [{"tool": "end_call", "success": {"status": "ended"}}]
    assert "instructions_file" not in data and data["direction"] == "inbound"
