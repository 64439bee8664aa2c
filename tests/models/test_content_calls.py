"""Tool calls returned as JSON text in ``content`` (models/remote/content_calls.py): the forms chat
templates teach are recognised for offered tools only; other text is left alone."""

from __future__ import annotations

import json

from callbench.models.remote.content_calls import content_tool_calls

TOOLS = ["lookup_order", "end_call"]


def calls(content: str) -> tuple[str | None, list[tuple[str, object]]]:
    speech, found = content_tool_calls(content, TOOLS)
    return speech, [(c.name, json.loads(c.arguments)) for c in found]


def test_bare_json_as_llama_cpp_python_returns_it() -> None:
    text = '{\n  "name": "lookup_order",\n  "arguments": {\n    "order_id": "A123"\n  }\n}'
    assert calls(text) == (None, [("lookup_order", {"order_id": "A123"})])


def test_tagged_blocks_with_speech_around_them() -> None:
    text = ('Let me check that.\n<tool_call>\n{"name": "lookup_order", "arguments": {"order_id": "7"}}\n'
            '</tool_call>\n<tool_call>{"name": "end_call", "arguments": {}}</tool_call>')
    assert calls(text) == ("Let me check that.", [("lookup_order", {"order_id": "7"}), ("end_call", {})])


def test_functions_lines_of_chatml_function_calling() -> None:
    assert calls("functions.lookup_order:") == (None, [("lookup_order", {})])
    text = 'functions.lookup_order:\n{"order_id": "9"}\nfunctions.end_call:\n{}'
    assert calls(text) == (None, [("lookup_order", {"order_id": "9"}), ("end_call", {})])


def test_fenced_list_prefixed_and_wrapped_forms() -> None:
    fenced = 'Sure.\n```json\n[{"name": "lookup_order", "parameters": {"order_id": "1"}}]\n```'
    assert calls(fenced) == ("Sure.", [("lookup_order", {"order_id": "1"})])
    mistral = '[TOOL_CALLS] [{"name": "end_call", "arguments": {}}]'
    assert calls(mistral) == (None, [("end_call", {})])
    args = json.dumps({"order_id": "2"})
    wrapped = json.dumps({"tool_calls": [{"function": {"name": "lookup_order", "arguments": args}}]})
    assert calls(wrapped) == (None, [("lookup_order", {"order_id": "2"})])


def test_speech_and_unknown_names_are_left_alone() -> None:
    for text in (
        "Your order A123 is on its way.",
        '{"name": "Priya", "arguments": "none"}',  # not an offered tool
        'I will call lookup_order for you: {"order_id": "1"}',  # JSON, but not a call
        "<tool_call>not json</tool_call>",
    ):
        assert content_tool_calls(text, TOOLS) == (text, [])
    assert content_tool_calls('{"name": "lookup_order"}', []) == ('{"name": "lookup_order"}', [])
