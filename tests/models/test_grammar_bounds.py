"""Bounded integers written as enums for grammars (``schemas.bounded_integers_as_enums``):
llama-cpp-python's schema-to-grammar converter ignores ``minimum``/``maximum``, so a model it
constrains could write an integer the schema refuses. Measured on ``callbench serve-local``: a
0.5B task judge cited message 10 of a 9-message trace (``maximum 8``) in both of its replies, and
the episode was left not graded."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from callbench.grade.prompts import response_schema
from callbench.models.base import ModelRequest, ModelSettings, RequestContext
from callbench.models.local import grammar as local_grammar
from callbench.models.remote.openai_client import openai_request_body
from callbench.models.remote.schemas import GRAMMAR_ENUM_LIMIT, bounded_integers_as_enums


@pytest.mark.parametrize(("node", "values"), [
    ({"type": "integer", "minimum": 0, "maximum": 8}, list(range(9))),
    ({"type": "integer", "minimum": 1, "maximum": 5}, [1, 2, 3, 4, 5]),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4}, [1, 2, 3]),
    ({"type": "integer", "minimum": 0.5, "maximum": 3.5}, [1, 2, 3]),
    ({"type": "integer", "exclusiveMinimum": 1.0, "maximum": 3}, [2, 3]),
    ({"type": "integer", "minimum": -4, "maximum": 4, "multipleOf": 2}, [-4, -2, 0, 2, 4]),
    ({"type": "integer", "minimum": 3, "maximum": 3}, [3]),
    ({"type": "integer", "minimum": 0, "maximum": 7, "multipleOf": 2.0}, [0, 2, 4, 6]),
    ({"type": ["integer", "null"], "minimum": 1, "maximum": 3}, [1, 2, 3, None]),
    ({"type": ["integer"], "minimum": 1, "maximum": 2}, [1, 2]),
])
def test_a_bounded_integer_becomes_the_enum_of_the_same_values(
    node: dict[str, Any], values: list[int]
) -> None:
    out = bounded_integers_as_enums(node)
    assert out == {"type": node["type"], "enum": values}
    # the same set of valid values, checked by a validator over a wider range
    for v in [*range(-10, 11), None, 1.5, "1"]:
        assert _valid(node, v) == _valid(out, v), v


@pytest.mark.parametrize("node", [
    {"type": "integer", "minimum": 0},  # unbounded above
    {"type": "integer", "minimum": 0, "maximum": GRAMMAR_ENUM_LIMIT},  # one value too many
    {"type": "integer", "minimum": 5, "maximum": 4},  # no value
    {"type": "integer", "minimum": 1, "maximum": 3, "enum": [2]},
    {"type": "integer", "minimum": True, "maximum": 3},  # a boolean is not a bound
    {"type": "number", "minimum": 0, "maximum": 3},
    {"type": "integer", "minimum": 1, "maximum": 3, "multipleOf": 7},  # no multiple in range
    {"type": "integer", "minimum": 0, "maximum": 3, "multipleOf": 0.1},  # inexact in floating point
    {"type": "integer", "minimum": 0, "maximum": float("inf")},
    {"type": ["integer", "string"], "minimum": 0, "maximum": 3},
])
def test_other_nodes_are_left_as_they_are(node: dict[str, Any]) -> None:
    assert bounded_integers_as_enums(node) == node


def test_the_judge_schema_keeps_its_meaning_and_its_message_indices_become_a_list() -> None:
    schema = response_schema(["a"], ["r"], list(range(9)))
    out = bounded_integers_as_enums(schema)
    assert out["$defs"]["message_index"] == {"type": "integer", "enum": list(range(9))}
    assert out["$defs"]["rating"]["properties"]["rating"] == {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    reply = {"criteria": {"a": {"reason": "r", "cited_messages": [3], "label": "met"}},
             "ratings": {"r": {"reason": "r", "cited_messages": [8], "rating": 4}}}
    bad = json.loads(json.dumps(reply))
    bad["criteria"]["a"]["cited_messages"] = [10]  # the measured reply
    for s in (schema, out):
        assert _valid(s, reply) and not _valid(s, bad)
    assert schema["$defs"]["message_index"] == {"type": "integer", "minimum": 0, "maximum": 8}  # not changed


def test_a_json_object_schema_sent_to_a_server_lists_bounded_integers() -> None:
    schema = response_schema(["a"], [], list(range(9)))
    request = ModelRequest(messages=[], response_schema=schema, context=RequestContext(role="task_judge"))
    body = lambda **kw: openai_request_body(request, "m", ModelSettings(), **kw)  # noqa: E731
    sent = body(official_endpoint=False, structured="json_object")
    assert sent["response_format"]["schema"]["$defs"]["message_index"]["enum"] == list(range(9))
    # OpenAI's own endpoint takes no schema in json_object mode; json_schema mode is sent as written
    official = body(official_endpoint=True, structured="json_object")
    assert official["response_format"] == {"type": "json_object"}
    strict = body(official_endpoint=False)
    assert strict["response_format"]["json_schema"]["schema"]["$defs"]["message_index"] == {
        "type": "integer", "minimum": 0, "maximum": 8}


def test_the_embedded_models_grammar_lists_bounded_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_grammar, "_converts", lambda schema: True)  # no llama.cpp needed
    schema = response_schema(["a"], [], list(range(9)))
    request = ModelRequest(messages=[], response_schema=schema, context=RequestContext(role="task_judge"))
    assert local_grammar.grammar_schema(request)["$defs"]["message_index"]["enum"] == list(range(9))


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)
