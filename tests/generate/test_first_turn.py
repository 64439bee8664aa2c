"""Who speaks first, imported by ``callbench new-agent``: each Vapi and Retell form
read into the agent's ``first_user_message`` convention, ``--first-user-message`` over the export,
and one located line for every export that cannot say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from callbench.bundle.validate.audits import load_bundle
from callbench.generate.first_turn import FirstTurnError, parse_option, read_first_turn

from .conftest import AGENT, DATA, invoke

VAPI_MODEL = {"provider": "openai", "model": "gpt-4o", "messages": [{"role": "system", "content": "..."}]}


@pytest.mark.parametrize(
    ("export", "expected", "source"),
    [
        ({"firstMessageMode": "assistant-waits-for-user", "firstMessage": "Hi"}, "empty",
         "assistant-waits-for-user"),
        ({"firstMessageMode": "assistant-speaks-first", "firstMessage": "Jal Seva, Asha speaking."}, "none",
         "with a firstMessage"),
        ({"firstMessage": "Hello!"}, "none", "assistant-speaks-first (the default) with a firstMessage"),
        ({"firstMessageMode": "assistant-speaks-first"}, "empty", "without a firstMessage"),
        ({"firstMessageMode": "assistant-speaks-first", "firstMessage": "  "}, "empty",
         "without a firstMessage"),
        ({"firstMessage": None, "firstMessageMode": None, "model": VAPI_MODEL}, "empty",
         "without a firstMessage"),
        ({"firstMessageMode": "assistant-speaks-first-with-model-generated-message"}, "none",
         "model-generated-message"),
        # an assistant at Vapi's defaults leaves both fields out: it waits for the user
        ({"name": "Asha", "model": VAPI_MODEL, "voice": {"provider": "11labs"}}, "empty",
         "without a firstMessage"),
    ],
)
def test_vapi_forms(export: dict[str, Any], expected: str, source: str) -> None:
    turn = read_first_turn(export, "vapi.json")
    assert turn.first_user_message == expected and turn.text is None
    assert turn.source.startswith("Vapi firstMessageMode") and source in turn.source


@pytest.mark.parametrize(
    ("export", "expected", "source"),
    [
        ({"llm_id": "llm_1", "general_prompt": "...", "begin_message": ""}, "empty", 'begin_message: ""'),
        ({"llm_id": "llm_1", "begin_message": "Namaste, Jal Seva."}, "none", "begin_message (the agent"),
        ({"llm_id": "llm_1", "begin_message": None}, "none", "begin_message not set"),
        ({"general_prompt": "..."}, "none", "begin_message not set"),
        ({"begin_message": "Hello", "start_speaker": "user"}, "empty", "start_speaker: user"),
        ({"begin_message": "", "start_speaker": "agent"}, "none", "start_speaker: agent"),
        # the dashboard's agent export holds its LLM (or its conversation flow)
        ({"agent_id": "a1", "response_engine": {"type": "retell-llm"},
          "retellLlmData": {"general_prompt": "...", "begin_message": ""}}, "empty", 'begin_message: ""'),
        ({"agent_id": "a1", "retellLlmData": None, "conversationFlow": {"start_speaker": "user"}}, "empty",
         "start_speaker: user"),
    ],
)
def test_retell_forms(export: dict[str, Any], expected: str, source: str) -> None:
    turn = read_first_turn(export, "retell.json")
    assert turn.first_user_message == expected
    assert turn.source.startswith("Retell") and source in turn.source


@pytest.mark.parametrize(
    ("export", "message"),
    [
        ({"firstMessageMode": "assistant-speaks-later"}, "x.json: firstMessageMode: 'assistant-speaks-later' "
         "is not a Vapi first-message mode"),
        ({"firstMessage": 3}, "x.json: firstMessage: expected text, got int"),
        ({"retellLlmData": {"start_speaker": "caller"}},
         "x.json: retellLlmData.start_speaker: 'caller' is not a Retell start speaker (agent or user)"),
        ({"llm_id": "l", "begin_message": ["hi"]}, "x.json: begin_message: expected text, got list"),
        ({"agent_id": "a1", "response_engine": {"type": "retell-llm", "llm_id": "l"}},
         "x.json: a Retell agent without its LLM (no retellLlmData)"),
        ({"name": "something else"}, "x.json: not a Vapi assistant or a Retell agent or LLM export"),
        ([{"type": "function"}],
         "x.json: expected a JSON object (a Vapi assistant or a Retell agent or LLM), got list"),
    ],
)
def test_an_export_that_cannot_say_is_one_located_line(export: Any, message: str) -> None:
    with pytest.raises(FirstTurnError) as caught:
        read_first_turn(export, "x.json")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_option_values() -> None:
    assert parse_option("none").first_user_message == "none"
    assert parse_option(" empty ").first_user_message == "empty"
    text = parse_option("text: Hello? Is this the water board?")
    assert (text.first_user_message, text.text) == ("text", "Hello? Is this the water board?")
    for bad in ("auto", "text:", "text:   ", "hello", ""):
        with pytest.raises(FirstTurnError, match=r"--first-user-message .*: use none"):
            parse_option(bad)


def _new_agent(root: Path, *extra: str) -> tuple[int, str, str]:
    return invoke("new-agent", str(root), "--prompt", str(DATA / "water_prompt.md"), "--tools",
                  str(DATA / "water_tools.json"), "--id", AGENT, "--languages", "en-IN",
                  "--call-ending", "end_call", "--success", "end_call:status=ended", *extra)


def _export(tmp_path: Path, data: Any, name: str = "export.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_new_agent_writes_the_exports_first_turn(tmp_path: Path) -> None:
    export = _export(tmp_path, {"name": "Asha", "firstMessageMode": "assistant-waits-for-user",
                                "model": VAPI_MODEL})
    code, out, err = _new_agent(tmp_path / "b", "--platform-export", str(export))
    assert code == 0, out + err
    source = "Vapi firstMessageMode: assistant-waits-for-user"
    assert f"note: first turn: first_user_message empty ({source})" in out
    text = (tmp_path / "b" / "agents" / AGENT / "agent.yaml").read_text(encoding="utf-8")
    assert f"# who speaks first: {source}\nfirst_user_message: empty\n" in text
    config = load_bundle(tmp_path / "b").agents[AGENT].config
    assert (config.first_user_message, config.first_user_message_text) == ("empty", None)


def test_the_option_overrides_the_export_and_without_either_nothing_is_written(tmp_path: Path) -> None:
    export = _export(tmp_path, {"retellLlmData": {"begin_message": ""}})
    code, out, err = _new_agent(tmp_path / "b", "--platform-export", str(export),
                                "--first-user-message", "text:Hello?")
    assert code == 0, out + err
    config = load_bundle(tmp_path / "b").agents[AGENT].config
    assert (config.first_user_message, config.first_user_message_text) == ("text", "Hello?")
    assert "first_user_message text (--first-user-message)" in out

    code, out, err = _new_agent(tmp_path / "c")
    assert code == 0, out + err
    data = yaml.safe_load((tmp_path / "c" / "agents" / AGENT / "agent.yaml").read_text(encoding="utf-8"))
    assert "first_user_message" not in data and "first turn" not in out
    assert load_bundle(tmp_path / "c").agents[AGENT].config.first_user_message is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--first-user-message", "maybe"), "error: --first-user-message 'maybe': use none"),
        (("--platform-export", "{missing}"), "error: --platform-export {missing}: cannot read"),
        (("--platform-export", "{bad_json}"), "error: --platform-export {bad_json}: not JSON: "),
        (("--platform-export", "{unknown}"), "error: --platform-export {unknown}: not a Vapi assistant"),
    ],
)
def test_bad_first_turn_input_is_one_line_exit_2_and_nothing_is_written(
    tmp_path: Path, args: tuple[str, str], message: str
) -> None:
    files = {"missing": tmp_path / "nope.json", "bad_json": tmp_path / "bad.json",
             "unknown": _export(tmp_path, {"tools": []}, "unknown.json")}
    files["bad_json"].write_text("{\n  'firstMessage': 1\n}", encoding="utf-8")
    args = tuple(a.format(**{k: str(v) for k, v in files.items()}) for a in args)
    code, out, err = _new_agent(tmp_path / "b", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(message.format(**files)), err
    assert not (tmp_path / "b").exists()


def test_agent_yaml_checks_the_text_rule(tmp_path: Path) -> None:
    code, out, err = _new_agent(tmp_path / "b", "--first-user-message", "empty")
    assert code == 0, out + err
    path = tmp_path / "b" / "agents" / AGENT / "agent.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("first_user_message: empty",
                                                              "first_user_message: text"), encoding="utf-8")
    code, out, _ = invoke("validate", str(tmp_path / "b"))
    assert code != 0 and f"agents/{AGENT}/agent.yaml" in out
    assert "first_user_message: text needs first_user_message_text" in out


def test_exports_and_tools_saved_with_a_byte_order_mark_are_read(tmp_path: Path) -> None:
    # a UTF-8 BOM (common in Windows downloads) was "not JSON: Unexpected UTF-8 BOM"
    from callbench.generate.first_turn import read_export_file
    from callbench.generate.tools_import import read_tools_file

    export = tmp_path / "vapi.json"
    waits = {"firstMessageMode": "assistant-waits-for-user"}
    export.write_bytes(b"\xef\xbb\xbf" + json.dumps(waits).encode())
    assert read_export_file(export) == read_first_turn(waits, "x")
    tools = tmp_path / "tools.json"
    tool = {"type": "function", "function": {"name": "find_client", "description": "Find a client.",
                                             "parameters": {"type": "object", "properties": {}}}}
    tools.write_bytes(b"\xef\xbb\xbf" + json.dumps([tool]).encode())
    assert [t.name for t in read_tools_file(tools)] == ["find_client"]
