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


def test_several_objects_one_per_line_are_all_calls_in_order() -> None:
    # only the last was executed and the others were read to the caller as speech
    text = ('I will check both orders.\n{"name": "lookup_order", "arguments": {"order_id": "1"}}\n'
            '{"name": "lookup_order", "arguments": {"order_id": "2"}}\n{"name": "end_call", "arguments": {}}')
    assert calls(text) == ("I will check both orders.", [
        ("lookup_order", {"order_id": "1"}), ("lookup_order", {"order_id": "2"}), ("end_call", {})])
    # objects back to back, or separated by commas, in a fence too
    glued = '{"name": "end_call", "arguments": {}}{"name": "lookup_order", "arguments": {"order_id": "3"}}'
    assert calls(glued) == (None, [("end_call", {}), ("lookup_order", {"order_id": "3"})])
    fenced = ('```json\n{"name": "lookup_order", "arguments": {"order_id": "4"}},\n'
              '{"name": "end_call", "arguments": {}}\n```')
    assert calls(fenced) == (None, [("lookup_order", {"order_id": "4"}), ("end_call", {})])


def test_more_calls_than_the_limit_are_all_returned_for_the_loop_to_refuse() -> None:
    # the episode loop executes ten and answers the rest limit_reached (paper: up to ten calls)
    text = "\n".join(json.dumps({"name": "lookup_order", "arguments": {"order_id": str(i)}})
                     for i in range(12))
    speech, found = calls(text)
    assert speech is None and [a for _, a in found] == [{"order_id": str(i)} for i in range(12)]


def test_a_line_that_is_not_a_call_keeps_the_text_as_speech() -> None:
    text = '{"name": "lookup_order", "arguments": {}}\n{"note": "not a call"}'
    assert calls(text) == (text, [])


def test_a_call_cut_off_is_detected_never_speech() -> None:
    from callbench.models.remote.content_calls import truncated_call

    cut = 'Checking now.\n{"name": "lookup_order", "arguments": {"order_id": "A1'
    assert calls(cut) == (cut, [])  # no complete call...
    assert truncated_call(cut, TOOLS) == "lookup_order"  # ...but the start of one
    after_one = '{"name": "end_call", "arguments": {}}\n{"name": "lookup_or'
    assert truncated_call(after_one, TOOLS) == "lookup_or"
    assert truncated_call('<tool_call>\n{"name": "end_call", "argum', TOOLS) == "end_call"
    assert truncated_call("I can help {with that", TOOLS) is None
    assert truncated_call('Say {"name": "Ann"} please.', TOOLS) is None
    assert truncated_call('{"name": "end_call", "arguments": {}}', TOOLS) is None
