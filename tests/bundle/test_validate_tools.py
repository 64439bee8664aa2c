"""Validator: tool schemas (JSON Schema 2020-12), call-ending tools, and matchers against the tool's
parameter schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from callbench.bundle.validate.matchers import SchemaView, view_at
from callbench.bundle.validate.tools import fast_schema_ok, schema_errors

from .conftest import AGENT, MiniBundle

AFILE = f"agents/{AGENT}/agent.yaml"


def _tool(d: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in d["tools"] if t["name"] == name)


# ------------------------------------------------------------------ tool schemas


def test_invalid_json_schema(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _tool(d, "schedule_pickup")["parameters"]["properties"]["slot"]["type"] = "text"
        _tool(d, "schedule_pickup")["parameters"]["properties"]["quantity_kg"]["minimum"] = "zero"
        _tool(d, "lookup_account")["parameters"]["properties"]["account_number"]["pattern"] = "([0-9]"

    mb.edit_agent(brk)
    probs = mb.only("tool.schema_invalid")
    assert [(p.file, p.path) for p in probs] == [
        (AFILE, "tools.0.parameters.properties.account_number.pattern"),
        (AFILE, "tools.1.parameters.properties.quantity_kg.minimum"),
        (AFILE, "tools.1.parameters.properties.slot.type"),
    ]
    assert all(p.message.startswith("not a valid JSON Schema 2020-12") for p in probs)


def test_parameters_must_be_an_object_schema(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _tool(d, "cancel_pickup")["parameters"] = {"type": "string"}

    mb.edit_agent(brk)
    probs = mb.problems()
    assert [(p.code, p.path) for p in probs if p.code == "tool.schema_not_object"] == [
        ("tool.schema_not_object", "tools.2.parameters.type")]


def test_remote_ref_is_refused_and_never_fetched(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _tool(d, "cancel_pickup")["parameters"]["properties"]["confirmation"] = {
            "$ref": "https://example.invalid/schema.json"}

    mb.edit_agent(brk)
    [p] = mb.only("tool.schema_remote_ref")
    assert p.path == "tools.2.parameters.properties.confirmation.$ref"


def test_required_names_an_unknown_parameter(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _tool(d, "cancel_pickup")["parameters"]["required"] = ["confirmation", "reason"]

    mb.edit_agent(brk)
    [p] = mb.only("tool.required_unknown")
    assert p.path == "tools.2.parameters.required.1"


def test_duplicate_tool(mb: MiniBundle) -> None:
    mb.edit_agent(lambda d: d["tools"].append(dict(d["tools"][2])))
    [p] = mb.only("tool.duplicate")
    assert p.path == "tools.4.name"


def test_call_ending_tool_must_be_declared(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["call_ending_tools"].append({"tool": "hang_up", "success": {"status": "ended"}})
        d["call_ending_tools"].append({"tool": "end_call", "success": {"status": "ended"}})

    mb.edit_agent(brk)
    codes = [(p.code, p.path) for p in mb.problems()]
    assert codes == [("ending.undeclared", "call_ending_tools.1.tool"),
                     ("ending.duplicate", "call_ending_tools.2.tool")]


def test_call_ending_tool_needs_a_success_condition(mb: MiniBundle) -> None:
    mb.edit_agent(lambda d: d["call_ending_tools"][0].update(success={}))
    probs = mb.problems()
    assert [(p.code, p.path) for p in probs] == [("schema", "call_ending_tools.0.success")]


def test_re2_error_says_re2(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["fixtures"]["lookup_account"]["queue"][0]["args"]["dob"] = {"regex": r"(19|20)\d\d-(?=0)"}

    mb.edit_scenario(brk)
    [p] = mb.only("schema")
    assert "RE2 cannot compile" in p.message
    assert p.path.startswith("fixtures.lookup_account.queue.0.args.dob")


# ------------------------------------------------------------------ matchers vs the tool schema


def _set_book_args(mb: MiniBundle, args: dict[str, Any]) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][1]["args"] = args

    mb.edit_scenario(brk)


def _matcher_problems(mb: MiniBundle) -> list[tuple[str, str]]:
    return [(p.code, p.path) for p in mb.problems() if p.code.startswith("matcher.")]


def test_range_on_a_string_parameter(mb: MiniBundle) -> None:
    _set_book_args(mb, {"slot": {"range": {"min": 1}}})
    assert _matcher_problems(mb) == [("matcher.type", "action_checks.1.args.slot.range")]


def test_regex_on_a_number_parameter(mb: MiniBundle) -> None:
    _set_book_args(mb, {"quantity_kg": {"regex": "[0-9]+"}})
    assert _matcher_problems(mb) == [("matcher.type", "action_checks.1.args.quantity_kg.regex")]


def test_one_of_value_of_the_wrong_type_and_outside_enum(mb: MiniBundle) -> None:
    _set_book_args(mb, {"slot": {"one_of": ["evening", 7, "night"]}, "quantity_kg": {"one_of": [30, "30"]}})
    assert _matcher_problems(mb) == [
        ("matcher.type", "action_checks.1.args.slot.one_of.1"),
        ("matcher.enum", "action_checks.1.args.slot.one_of.2"),
        ("matcher.type", "action_checks.1.args.quantity_kg.one_of.1"),
    ]


def test_integral_float_fits_an_integer_and_bool_does_not_fit_a_number(mb: MiniBundle) -> None:
    _set_book_args(mb, {"quantity_kg": {"any": [30.0, True]}})
    assert _matcher_problems(mb) == [("matcher.type", "action_checks.1.args.quantity_kg.any.1.eq")]


def test_matcher_on_a_missing_parameter(mb: MiniBundle) -> None:
    _set_book_args(mb, {"slot_name": "evening", "contact.email": {"present": True}})
    assert _matcher_problems(mb) == [
        ("matcher.param_unknown", "action_checks.1.args.slot_name"),
        ("matcher.param_unknown", "action_checks.1.args.contact.email"),
    ]


def test_nested_subset_all_any_not_are_walked(mb: MiniBundle) -> None:
    _set_book_args(mb, {
        "contact": {"subset": {"name": {"range": {"min": 0}}, "fax": "x"}},
        "items": {"all": [{"contains": [3]}, {"not": {"subset": {"a": 1}}}]},
        "slot": {"any": [{"contains": ["evening"]}]},
    })
    assert _matcher_problems(mb) == [
        ("matcher.type", "action_checks.1.args.contact.subset.name.range"),
        ("matcher.param_unknown", "action_checks.1.args.contact.subset.fax"),
        ("matcher.type", "action_checks.1.args.items.all.0.contains.0"),
        ("matcher.type", "action_checks.1.args.items.all.1.not.subset"),
        ("matcher.type", "action_checks.1.args.slot.any.0.contains"),
    ]


def test_fixture_matchers_are_checked_after_resolving_references(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        # resolves to the number 30
        d["fixtures"]["schedule_pickup"]["queue"][0]["args"]["slot"] = "${caller.quantity_kg}"

    mb.edit_scenario(brk)
    probs = [p for p in mb.problems() if p.code.startswith("matcher.")]
    assert [(p.code, p.path) for p in probs] == [
        ("matcher.type", "fixtures.schedule_pickup.queue.0.args.slot.eq")]
    assert "30 is integer, but the parameter is string" in probs[0].message


def test_concluding_message_is_a_known_parameter_of_call_ending_tools(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][3]["args"]["concluding_message"] = {"present": True}
        d["reference_path"][4]["tool_calls"][0]["arguments"]["concluding_message"] = "Goodbye!"

    mb.edit_scenario(brk)
    assert mb.problems() == []


def test_schema_view_follows_refs_and_combinators() -> None:
    schema = {
        "type": "object",
        "$defs": {"slot": {"type": "string", "enum": ["am", "pm"]}},
        "properties": {
            "slot": {"$ref": "#/$defs/slot"},
            "qty": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "additionalProperties": False,
    }
    root = SchemaView(schema, schema)
    status, slot = view_at(root, "slot")
    assert status == "ok" and slot is not None and slot.types() == {"string"} and slot.enum() == ["am", "pm"]
    status, qty = view_at(root, "qty")
    assert qty is not None and qty.types() == {"integer", "null"}
    status, item = view_at(root, "tags.0")
    assert status == "ok" and item is not None and item.types() == {"string"}
    status, meta_x = view_at(root, "meta.anything")
    assert status == "ok" and meta_x is not None and meta_x.types() == {"number"}
    assert view_at(root, "nope")[0] == "unknown"
    open_schema = {"type": "object"}
    assert view_at(SchemaView(open_schema, open_schema), "x")[0] == "open"


# ------------------------------------------------------------------ the fast metaschema path


def test_fast_path_agrees_on_known_cases() -> None:
    good = [{"type": "object", "properties": {"a": {"type": ["string", "null"], "minLength": 1}},
             "required": ["a"], "additionalProperties": False},
            True, {"$ref": "#/$defs/x", "$defs": {"x": {}}}]
    bad = [{"type": "text"}, {"required": ["a", "a"]}, {"minLength": -1}, {"pattern": "("},
           {"anyOf": []}, {"multipleOf": 0}, {"properties": {"a": {"enum": "x"}}}]
    for s in good:
        assert fast_schema_ok(s) and schema_errors(s) == []
    for s in bad:
        assert not fast_schema_ok(s)
        assert schema_errors(s), s
        with pytest.raises(jsonschema.SchemaError):
            Draft202012Validator.check_schema(s)


_junk = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
    st.sampled_from(["string", "text", "(", "#/$defs/x", "http://x/y", "", "a b"]),
    st.lists(st.sampled_from(["a", "a", "string", "null", 1]), max_size=3),
)
_types = st.sampled_from(["string", "object", "array", "integer", "number", "boolean", "null"])


def _keyword(inner: Any) -> Any:
    """(keyword, value) pairs: a value the metaschema accepts most of the time, junk sometimes."""
    schema_list = st.lists(inner, min_size=1, max_size=2)
    schema_map = st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=2)
    good = {
        "type": st.one_of(_types, st.lists(_types, min_size=1, max_size=3, unique=True)),
        "properties": schema_map, "$defs": schema_map, "dependentSchemas": schema_map,
        "patternProperties": st.dictionaries(st.sampled_from(["^x", "[0-9]+", "("]), inner, max_size=2),
        "items": inner, "not": inner, "additionalProperties": inner, "contains": inner, "if": inner,
        "propertyNames": inner, "anyOf": schema_list, "oneOf": schema_list, "allOf": schema_list,
        "prefixItems": schema_list,
        "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
        "dependentRequired": st.dictionaries(st.sampled_from(["a", "b"]),
                                             st.lists(st.sampled_from(["a", "b"]), max_size=2), max_size=2),
        "enum": st.lists(_junk, max_size=3), "examples": st.lists(_junk, max_size=2), "const": _junk,
        "default": _junk,
        "minimum": st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False)),
        "exclusiveMinimum": st.integers(-5, 5), "multipleOf": st.sampled_from([0.5, 1, 2, 0, -1]),
        "maxLength": st.sampled_from([0, 3, 2.0, 2.5, -1]), "minItems": st.integers(-1, 3),
        "pattern": st.sampled_from(["^[a-z]+$", "[0-9]{4}", "(", "\\d"]),
        "description": st.text(max_size=5), "format": st.sampled_from(["date", "email", "x"]),
        "uniqueItems": st.booleans(), "deprecated": st.booleans(),
        "$ref": st.sampled_from(["#", "#/$defs/a", "#/properties/a", "http://x/y", "#a"]),
        "$id": st.sampled_from(["http://x/y", "#frag"]), "x-custom": _junk,
    }
    def value(v: Any) -> Any:
        return st.integers(0, 24).flatmap(lambda i: _junk if i == 0 else v)

    return st.one_of(*[st.tuples(st.just(k), value(v)) for k, v in good.items()])


_schemas = st.recursive(
    st.one_of(st.booleans(), st.just({})),
    lambda inner: st.lists(_keyword(inner), max_size=4).map(dict),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(_schemas)
def test_fast_path_never_accepts_an_invalid_schema(schema: Any) -> None:
    if fast_schema_ok(schema):
        Draft202012Validator.check_schema(schema)  # raises if the fast path was wrong


def test_local_ref_to_nowhere_is_located_at_the_ref(mb: MiniBundle) -> None:
    """A local ``$ref`` that points nowhere is a problem at the ``$ref``, wherever
    it stands (a property, a nested schema, inside ``$defs``), and a working one is not."""
    def brk(d: dict[str, Any]) -> None:
        params = _tool(d, "cancel_pickup")["parameters"]
        params["$defs"] = {
            "code": {"type": "string"},
            "pair": {"type": "array", "items": {"$ref": "#/$defs/missing_in_defs"}},
            "ok": {"$ref": "#/$defs/code"},
            "escaped/name": {"type": "string"},
        }
        params["properties"]["confirmation"] = {"$ref": "#/$defs/nope"}
        params["properties"]["extra"] = {"type": "object", "properties": {
            "deep": {"anyOf": [{"$ref": "#/$defs/code"}, {"$ref": "#/properties/nowhere"}]},
            "slash": {"$ref": "#/$defs/escaped~1name"},
            "anchor": {"$ref": "#no_such_anchor"},
        }}
        # a "$ref" key inside a default value is data, not a reference
        params["properties"]["extra"]["default"] = {"$ref": "#/not/a/reference"}

    mb.edit_agent(brk)
    probs = mb.only("tool.schema_ref_unresolved")
    base = "tools.2.parameters"
    assert sorted(p.path for p in probs) == sorted([
        f"{base}.$defs.pair.items.$ref",
        f"{base}.properties.confirmation.$ref",
        f"{base}.properties.extra.properties.deep.anyOf.1.$ref",
        f"{base}.properties.extra.properties.anchor.$ref",
    ])
    assert all(p.file == AFILE for p in probs)
    assert "internal" not in mb.codes()
    conf = next(p for p in probs if p.path.endswith("confirmation.$ref"))
    assert "'#/$defs/nope' points nowhere" in conf.message and "cancel_pickup" in conf.message
    assert "no such $anchor" in next(p for p in probs if "anchor" in p.path).message


def test_ref_resolves_against_nested_id() -> None:
    """References inside a sub-schema with its own ``$id`` resolve against that ``$id``."""
    from callbench.bundle.validate.tools import unresolved_refs

    schema = {"type": "object", "$defs": {"inner": {
        "$id": "urn:callbench:inner", "$defs": {"b": {"type": "string"}},
        "properties": {"q": {"$ref": "#/$defs/b"}, "r": {"$ref": "#/$defs/code"}}}},
        "properties": {"x": {"$ref": "#/$defs/inner"}}}
    assert unresolved_refs(schema) == [
        ("$defs.inner.properties.r.$ref", "#/$defs/code", "nothing is at that JSON Pointer")]
