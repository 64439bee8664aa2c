"""Conversation normalization and provider schema cleaning."""

from __future__ import annotations

from typing import Any

import pytest

from callbench.models.base import ChatMessage, ToolCall
from callbench.models.conversation import normalize_messages
from callbench.models.remote.schemas import clean_schema, clean_tool_parameters, is_openai_strict_compatible


def call(i: str, name: str = "t") -> ToolCall:
    return ToolCall(id=i, name=name, arguments="{}")


def test_system_texts_merged_in_order():
    conv = normalize_messages(
        [
            ChatMessage(role="system", content="A"),
            ChatMessage(role="user", content="u"),
            ChatMessage(role="system", content="B"),
            ChatMessage(role="system", content=""),
        ]
    )
    assert conv.system == "A\n\nB"
    assert [m.role for m in conv.messages] == ["user"]
    assert normalize_messages([ChatMessage(role="user", content="x")]).system is None


def test_duplicate_empty_and_unsafe_ids_renamed_consistently():
    msgs = [
        ChatMessage(role="assistant", tool_calls=[call("a"), call("a"), call(""), call("x.y")]),
        ChatMessage(role="tool", tool_call_id="a", content="1"),
        ChatMessage(role="tool", tool_call_id="x.y", content="4"),
        ChatMessage(role="tool", tool_call_id="", content="3"),
        ChatMessage(role="tool", tool_call_id="a", content="2"),
        ChatMessage(role="assistant", tool_calls=[call("a")]),
        ChatMessage(role="tool", tool_call_id="a", content="5"),
    ]
    conv = normalize_messages(msgs)
    first = conv.messages[0].tool_calls
    assert [c.id for c in first] == ["a", "a__2", "call_0_2", "x_y"]
    assert [(m.tool_call_id, m.content) for m in conv.messages[1:5]] == [
        ("a", "1"),
        ("a__2", "2"),
        ("call_0_2", "3"),
        ("x_y", "4"),
    ]
    # a later call reusing "a" gets a fresh unique id, and its result follows it
    assert conv.messages[5].tool_calls[0].id == "a__3"
    assert conv.messages[6].tool_call_id == "a__3"
    assert msgs[0].tool_calls[1].id == "a"  # input untouched


def test_orphan_result_and_missing_result_are_errors():
    with pytest.raises(ValueError, match="message 1: tool result for call id 'zz'"):
        normalize_messages(
            [ChatMessage(role="user", content="hi"), ChatMessage(role="tool", tool_call_id="zz")]
        )
    with pytest.raises(ValueError, match="'lookup' \\(id 'b'\\) has no tool result"):
        normalize_messages(
            [
                ChatMessage(role="assistant", tool_calls=[call("a"), call("b", "lookup")]),
                ChatMessage(role="tool", tool_call_id="a", content="1"),
                ChatMessage(role="user", content="hello?"),
            ]
        )


def test_clean_schema_keeps_constraints_and_property_names():
    schema: dict[str, Any] = {
        "$schema": "x",
        "$comment": "c",
        "type": "object",
        "title": "T",
        "properties": {
            "examples": {"type": "array", "items": {"type": "string", "example": "e"}, "deprecated": True},
            "n": {"type": "integer", "minimum": 1, "default": 3, "description": "Count."},
            "d": {"type": "string", "format": "date"},
            "u": {"type": "string", "format": "uri"},
        },
        "$defs": {"X": {"type": "string", "readOnly": True, "enum": [{"$id": "kept in enum"}]}},
        "anyOf": [{"required": ["n"], "$comment": "x"}],
    }
    out = clean_schema(schema, "openai")
    assert set(out) == {"type", "title", "properties", "$defs", "anyOf"}
    props = out["properties"]
    assert props["examples"] == {"type": "array", "items": {"type": "string"}}
    assert props["n"] == {"type": "integer", "minimum": 1, "description": "Count. Default: 3."}
    assert props["d"] == {"type": "string", "format": "date"}
    assert props["u"] == {"type": "string", "description": "Format: uri."}
    assert out["$defs"]["X"] == {"type": "string", "enum": [{"$id": "kept in enum"}]}
    assert out["anyOf"] == [{"required": ["n"]}]
    assert clean_schema(schema, "anthropic")["properties"]["u"] == {"type": "string", "format": "uri"}
    assert schema["properties"]["n"]["default"] == 3  # not modified


def test_tool_parameters_top_level():
    assert clean_tool_parameters({}, "openai", tool="t") == {"type": "object", "properties": {}}
    with pytest.raises(ValueError, match="tool 'bad': parameters must have type 'object'"):
        clean_tool_parameters({"type": "array"}, "openai", tool="bad")


def test_openai_strict_compatibility():
    strict: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["a", "b"],
        "properties": {
            "a": {"type": "string"},
            "b": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["c"],
                    "properties": {"c": {"enum": [1]}},
                },
            },
        },
    }
    assert is_openai_strict_compatible(strict)
    optional = {**strict, "required": ["a"]}
    assert not is_openai_strict_compatible(optional)
    nested_open = {
        **strict,
        "properties": {**strict["properties"], "b": {"type": "object", "properties": {}}},
    }
    assert not is_openai_strict_compatible(nested_open)
    assert not is_openai_strict_compatible(
        {**strict, "properties": {"a": {"type": "string", "minLength": 2}, "b": {"type": "string"}}}
    )


def test_map_subschemas_visits_keyword_positions_only() -> None:
    from callbench.models.remote.schemas import map_subschemas, subschemas

    schema = {
        "type": "object",
        "properties": {"items": {"type": "string"}, "n": {"type": "integer"}},
        "anyOf": [{"required": ["n"]}],
        "enum": [{"type": "not-a-schema"}],
        "items": {"type": "number"},
    }
    assert list(subschemas(schema)) == [
        {"type": "string"},
        {"type": "integer"},
        {"required": ["n"]},
        {"type": "number"},
    ]
    out = map_subschemas(schema, lambda sub: {**sub, "seen": True})
    assert out["properties"] == {
        "items": {"type": "string", "seen": True},
        "n": {"type": "integer", "seen": True},
    }
    assert out["anyOf"] == [{"required": ["n"], "seen": True}] and out["items"]["seen"] is True
    assert out["enum"] == [{"type": "not-a-schema"}] and out["enum"][0] is not schema["enum"][0]
    assert "seen" not in out and list(out) == list(schema)
