"""The local model's prompt and constrained output format (no model needed)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from callbench.models.base import (
    ChatMessage,
    ModelOutputError,
    ModelRequest,
    RequestContext,
    ToolCall,
    ToolSchema,
)
from callbench.models.local.format import (
    MAX_TOOL_CALLS,
    candidate_output_schema,
    chat_messages,
    grammar_friendly,
    parse_candidate_output,
    tools_block_position,
)

TOOLS = [
    ToolSchema(
        name="lookup",
        description="Find an account.",
        parameters={"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
    ),
    ToolSchema(
        name="end_call",
        description="End.",
        parameters={
            "type": "object",
            "properties": {"status": {"enum": ["done", "failed"]}},
            "required": ["status"],
        },
    ),
]


def test_candidate_schema_accepts_speech_tools_or_both():
    schema = candidate_output_schema(TOOLS)
    v = jsonschema.Draft202012Validator(schema)
    assert v.is_valid(
        {"speech": "One moment.", "tool_calls": [{"name": "lookup", "arguments": {"account": "1"}}]}
    )
    assert v.is_valid({"speech": None, "tool_calls": [{"name": "end_call", "arguments": {"status": "done"}}]})
    assert v.is_valid({"speech": "Hello!", "tool_calls": []})
    assert not v.is_valid(
        {"speech": "x", "tool_calls": [{"name": "lookup", "arguments": {"status": "done"}}]}
    )
    assert not v.is_valid({"speech": "x", "tool_calls": [{"name": "transfer", "arguments": {}}]})
    assert not v.is_valid(
        {"speech": "x", "tool_calls": [{"name": "lookup", "arguments": {"account": "1", "extra": 1}}]}
    )
    assert not v.is_valid(
        {
            "speech": "x",
            "tool_calls": [{"name": "end_call", "arguments": {"status": "done"}}] * (MAX_TOOL_CALLS + 1),
        }
    )
    assert not jsonschema.Draft202012Validator(candidate_output_schema([])).is_valid(
        {"speech": "x", "tool_calls": [{"name": "lookup", "arguments": {}}]}
    )


def test_grammar_friendly_closes_objects_but_not_values():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "properties": {"enum": [{"properties": 1}]},
        },
        "additionalProperties": True,
    }
    out = grammar_friendly(schema)
    assert out["additionalProperties"] is True  # explicit value kept
    assert out["properties"]["a"]["additionalProperties"] is False
    assert out["properties"]["properties"] == {"enum": [{"properties": 1}]}


def test_chat_messages_render_history_in_output_format():
    msgs = [
        ChatMessage(role="system", content="You are an agent."),
        ChatMessage(role="assistant", content="Hello."),
        ChatMessage(role="user", content="Check 1."),
        ChatMessage(role="user", content="Please."),
        ChatMessage(
            role="assistant",
            content=None,
            tool_calls=[ToolCall(id="c", name="lookup", arguments='{"account": "1"}')],
        ),
        ChatMessage(role="tool", tool_call_id="c", content='{"found": true}'),
    ]
    out = chat_messages(ModelRequest(messages=msgs, tools=TOOLS, context=RequestContext(role="candidate")))
    assert [m["role"] for m in out] == ["system", "assistant", "user", "assistant", "user"]
    # the tools block follows the operating document (Qwen2.5's own tool template does the same)
    assert out[0]["content"].startswith("You are an agent.\n\n# Tools\n")
    assert '"name": "lookup"' in out[0]["content"] and '"speech"' in out[0]["content"]
    assert json.loads(out[1]["content"]) == {"speech": "Hello.", "tool_calls": []}
    assert out[2]["content"] == "Check 1.\nPlease."
    assert json.loads(out[3]["content"]) == {
        "speech": None,
        "tool_calls": [{"name": "lookup", "arguments": {"account": "1"}}],
    }
    assert out[4]["content"] == '<tool_response name="lookup">\n{"found": true}\n</tool_response>'


def test_chat_messages_for_json_roles_keep_plain_history():
    schema = {"type": "object", "properties": {"speech": {"type": "string"}}}
    msgs = [
        ChatMessage(role="system", content="You are the caller."),
        ChatMessage(role="user", content="Hi"),
        ChatMessage(role="assistant", content="I need help."),
    ]
    out = chat_messages(
        ModelRequest(messages=msgs, response_schema=schema, context=RequestContext(role="caller"))
    )
    assert out[2] == {"role": "assistant", "content": "I need help."}
    # the per-turn schema block goes last; the system prompt stays the same from turn to turn
    assert out[0]["content"] == "You are the caller."
    assert out[3]["role"] == "user" and out[3]["content"].endswith(json.dumps(schema))
    out = chat_messages(
        ModelRequest(messages=msgs[:2], response_schema=schema, context=RequestContext(role="caller"))
    )
    assert [m["role"] for m in out] == ["system", "user"]
    last = out[1]["content"]
    assert last.startswith("Hi\n\n# How to answer") and last.endswith(json.dumps(schema))


def test_parse_candidate_output():
    speech, calls = parse_candidate_output(
        '{"speech": "  Let me check. ", "tool_calls": [{"name": "lookup", "arguments": {"account": "१२"}}]}',
        turn_key=7,
    )
    assert speech == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in calls] == [("call_7_0", "lookup", '{"account": "१२"}')]
    assert parse_candidate_output('{"speech": "", "tool_calls": []}', turn_key=1) == (None, [])
    with pytest.raises(ModelOutputError, match=r"not valid JSON.*token limit") as info:
        parse_candidate_output('{"speech": "Let me', turn_key=1)
    assert info.value.raw == '{"speech": "Let me'
    # several calls kept in order; a cut inside the calls is a truncated_call
    _, two = parse_candidate_output('{"speech": null, "tool_calls": [{"name": "a", "arguments": {}}, '
                                    '{"name": "b", "arguments": {"x": 1}}]}', turn_key=2)
    assert [(c.id, c.name) for c in two] == [("call_2_0", "a"), ("call_2_1", "b")]
    cut = '{"speech": null, "tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "argu'
    with pytest.raises(ModelOutputError, match=r"^truncated_call: .*cut off inside its tool_calls") as info:
        parse_candidate_output(cut, turn_key=1)
    assert info.value.kind == "truncated_call" and info.value.raw == cut
    with pytest.raises(ModelOutputError, match=r"tool_calls\[0\] has no name"):
        parse_candidate_output('{"speech": null, "tool_calls": [{"arguments": {}}]}', turn_key=1)
    with pytest.raises(ModelOutputError, match="'speech' is not a string"):
        parse_candidate_output('{"speech": 3, "tool_calls": []}', turn_key=1)


def test_grammar_conversion_with_fallback():
    pytest.importorskip("llama_cpp")
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from callbench.models.local.client import grammar_schema

    odd = ToolSchema(
        name="odd",
        description="Unsupported keywords.",
        parameters={
            "type": "object",
            "properties": {
                "code": {"type": "string", "pattern": "[A-Z]+"},
                "x": {"not": {"type": "string"}},
                "format": {"type": "string"},
            },
        },
    )
    request = ModelRequest(
        messages=[ChatMessage(role="user", content="hi")],
        tools=[*TOOLS, odd],
        context=RequestContext(role="candidate"),
    )
    schema = grammar_schema(request)
    variants = schema["properties"]["tool_calls"]["items"]["anyOf"]
    assert [v["properties"]["name"]["const"] for v in variants] == ["lookup", "end_call", "odd"]
    odd_args = variants[2]["properties"]["arguments"]
    assert "pattern" not in odd_args["properties"]["code"] and odd_args["properties"]["x"] == {}
    assert "format" in odd_args["properties"]  # a property named format is kept
    assert variants[0]["properties"]["arguments"]["properties"] == {"account": {"type": "string"}}
    assert "root ::=" in json_schema_to_gbnf(json.dumps(schema))


def test_cap_sizes_bounds_only_free_strings_and_arrays() -> None:
    from callbench.models.local.format import ARRAY_MAX_ITEMS, STRING_MAX_CHARS, cap_sizes

    schema = {
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "label": {"type": "string", "enum": ["met", "not_met"]},
            "pin": {"type": "string", "pattern": "^[0-9]{6}$"},
            "short": {"type": "string", "maxLength": 20},
            "speech": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "notes": {"type": "array", "items": {"type": "string"}},
            "cited": {"type": "array", "items": {"type": "integer", "enum": [0, 1, 2]}},
            "calls": {"type": "array", "maxItems": 10},
            "many": {"type": "array", "minItems": 30},
            "string": {"type": "integer"},  # a property named like the type is left alone
        },
        "$defs": {"d": {"type": "string"}},
    }
    out = cap_sizes(schema)
    props = out["properties"]
    assert props["reason"]["maxLength"] == STRING_MAX_CHARS == 400
    speech = props["speech"]["anyOf"]
    assert speech[0]["maxLength"] == 400 and "maxLength" not in speech[1]
    assert props["notes"]["items"]["maxLength"] == 400 and out["$defs"]["d"]["maxLength"] == 400
    assert "maxLength" not in props["label"] and "maxLength" not in props["pin"]
    assert props["short"]["maxLength"] == 20 and props["string"] == {"type": "integer"}
    assert props["cited"]["maxItems"] == ARRAY_MAX_ITEMS == 8 and props["notes"]["maxItems"] == 8
    assert props["calls"]["maxItems"] == 10 and props["many"]["maxItems"] == 30
    assert "maxLength" not in schema["properties"]["reason"]  # the input is not modified


DOC = "# Agent\n\nRules " + "x" * 300 + "\n\n## 15. Call context\n\n- Today is Monday.\n"


def test_tools_block_goes_before_a_trailing_call_context_section() -> None:
    first_variable = DOC.index("Monday")
    at = tools_block_position(DOC, first_variable)
    assert DOC[at:].startswith("## 15. Call context")
    req = ModelRequest(
        messages=[ChatMessage(role="system", content=DOC), ChatMessage(role="user", content="hi")],
        tools=TOOLS,
        context=RequestContext(role="candidate"),
        static_system_chars=first_variable,
    )
    system = chat_messages(req)[0]["content"]
    # tools list, then the call-specific section, then the answer format (still last)
    assert system.index("# Tools") < system.index("## 15. Call context") < system.index("# How to answer")
    assert system.startswith(DOC[:at].rstrip("\n") + "\n\n# Tools")
    assert "</tools>\n\n## 15. Call context\n\n- Today is Monday.\n\n# How to answer" in system
    assert system.endswith("before the caller speaks again.")


@pytest.mark.parametrize(
    "static_chars",
    [0, len(DOC), 12],  # unknown; no variable at all; a variable in the first section
)
def test_tools_block_stays_at_the_end_otherwise(static_chars: int) -> None:
    assert tools_block_position(DOC, static_chars) == len(DOC)
    req = ModelRequest(
        messages=[ChatMessage(role="system", content=DOC)],
        tools=TOOLS,
        context=RequestContext(role="candidate"),
        static_system_chars=static_chars,
    )
    system = chat_messages(req)[0]["content"]
    assert system.startswith(DOC.rstrip("\n") + "\n\n# Tools")
    assert "</tools>\n\n# How to answer" in system


def test_tools_block_needs_a_heading_in_the_second_half() -> None:
    early = "# Agent\n\n## Today\nMonday\n" + "rules " * 100
    assert tools_block_position(early, early.index("Monday")) == len(early)
    no_heading = "rules " * 100 + "Monday"
    assert tools_block_position(no_heading, no_heading.index("Monday")) == len(no_heading)
