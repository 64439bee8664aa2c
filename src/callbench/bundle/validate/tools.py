"""Validator audits of tool interfaces: tool parameters must be JSON Schema 2020-12 object schemas,
call-ending tools must be declared with a success condition, and reference-path arguments must fit
the tool's schema. Matchers against the schema: :mod:`callbench.bundle.validate.matchers`.

Schemas are read, never fetched: a ``$ref`` must be local (``#...``); remote references are a
``tool.schema_remote_ref`` problem and validation uses an empty ``referencing.Registry`` so that
jsonschema never touches the network.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator

from callbench.bundle.models import AgentConfig, ToolSpec
from callbench.bundle.schema_re2 import RE2Draft202012Validator

Report = Callable[[str, str, str], None]
"""``report(path, code, message)``: how an audit records one problem for the current file."""

_EMPTY_REGISTRY: referencing.Registry[Any] = referencing.Registry()


def _json_path(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def iter_refs(schema: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Yield (dotted path, ref) for every ``$ref`` string inside ``schema`` (iteratively)."""
    stack: list[tuple[Any, str]] = [(schema, where)]
    while stack:
        v, w = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "$ref" and isinstance(x, str):
                    yield f"{w}.$ref".strip("."), x
                else:
                    stack.append((x, f"{w}.{k}".strip(".")))
        elif isinstance(v, list):
            stack.extend((x, f"{w}.{i}".strip(".")) for i, x in enumerate(v))


_SIMPLE_TYPES = {"array", "boolean", "integer", "null", "number", "object", "string"}
_SCHEMA_KEYS = {"items", "contains", "additionalProperties", "propertyNames", "if", "then", "else", "not",
                "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
_SCHEMA_MAP_KEYS = {"properties", "$defs", "definitions", "dependentSchemas"}
_SCHEMA_ARRAY_KEYS = {"prefixItems", "allOf", "anyOf", "oneOf"}
_NUMBER_KEYS = {"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"}
_COUNT_KEYS = {"maxLength", "minLength", "maxItems", "minItems", "maxContains", "minContains",
               "maxProperties", "minProperties"}
_STRING_KEYS = {"title", "description", "$comment", "format", "contentEncoding", "contentMediaType"}
_BOOL_KEYS = {"uniqueItems", "deprecated", "readOnly", "writeOnly"}
_ARRAY_KEYS = {"enum", "examples"}
_SLOW_KEYS = {"$id", "$schema", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$recursiveRef",
              "$recursiveAnchor", "dependencies"}
"""Keywords the 2020-12 metaschema constrains in ways the fast path does not check (URI formats, ...):
a schema using one is checked by jsonschema itself."""
_LOCAL_REF = re.compile(r"#(/[A-Za-z0-9_.~$\-]*)*")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _count(v: Any) -> bool:
    return _number(v) and float(v).is_integer() and v >= 0


def _unique_strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v) and len(set(v)) == len(v)


def fast_schema_ok(schema: Any) -> bool:
    """Fast, conservative check that ``schema`` is a valid JSON Schema 2020-12.

    True only when every keyword the 2020-12 metaschema constrains is present with a value the
    metaschema (with its format checker, as ``Draft202012Validator.check_schema``) accepts; False
    means "not sure" and the caller runs jsonschema's full check. jsonschema's metaschema check
    costs ~10 ms per tool schema (its per-keyword overhead), too slow for a bundle of hundreds of
    tools; this walk costs microseconds. Tests compare it with ``check_schema`` on generated schemas.
    """
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for k, v in schema.items():
        if k in _SCHEMA_KEYS:
            ok = fast_schema_ok(v)
        elif k in _SCHEMA_MAP_KEYS:
            ok = isinstance(v, dict) and all(fast_schema_ok(x) for x in v.values())
        elif k == "patternProperties":
            ok = isinstance(v, dict) and all(_regex_ok(r) and fast_schema_ok(x) for r, x in v.items())
        elif k in _SCHEMA_ARRAY_KEYS:
            ok = isinstance(v, list) and len(v) > 0 and all(fast_schema_ok(x) for x in v)
        elif k == "type":
            ok = (isinstance(v, str) and v in _SIMPLE_TYPES) or (
                isinstance(v, list) and len(v) > 0
                and all(isinstance(t, str) and t in _SIMPLE_TYPES for t in v) and len(set(v)) == len(v))
        elif k in _NUMBER_KEYS:
            ok = _number(v)
        elif k == "multipleOf":
            ok = _number(v) and v > 0
        elif k in _COUNT_KEYS:
            ok = _count(v)
        elif k == "pattern":
            ok = isinstance(v, str) and _regex_ok(v)
        elif k in _STRING_KEYS:
            ok = isinstance(v, str)
        elif k in _BOOL_KEYS:
            ok = isinstance(v, bool)
        elif k in _ARRAY_KEYS:
            ok = isinstance(v, list)
        elif k == "required":
            ok = _unique_strings(v)
        elif k == "dependentRequired":
            ok = isinstance(v, dict) and all(_unique_strings(x) for x in v.values())
        elif k == "$ref":
            ok = isinstance(v, str) and _LOCAL_REF.fullmatch(v) is not None
        elif k in _SLOW_KEYS:
            ok = False
        else:
            ok = True  # const, default and keywords the metaschema does not know are unconstrained
        if not ok:
            return False
    return True


def _regex_ok(pattern: str) -> bool:
    # jsonschema's "regex" format check is re.compile (Python syntax).
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


_REF_KEYS = ("$ref", "$dynamicRef")


def _subschemas(schema: dict[str, Any], where: str) -> Iterator[tuple[Any, str]]:
    """(sub-schema, dotted path) of each schema-valued keyword of ``schema`` (JSON Schema 2020-12
    applicators; data keywords such as ``enum``, ``const``, ``default``, ``examples`` are skipped,
    so a ``"$ref"`` key inside a default value is data, not a reference)."""
    for k, v in schema.items():
        w = f"{where}.{k}".strip(".")
        if k in _SCHEMA_KEYS or k in ("items",):
            if isinstance(v, list):  # draft-7 tuple form, reported as invalid elsewhere
                yield from ((x, f"{w}.{i}") for i, x in enumerate(v))
            else:
                yield v, w
        elif k in _SCHEMA_MAP_KEYS or k == "patternProperties":
            if isinstance(v, dict):
                yield from ((x, f"{w}.{name}") for name, x in v.items())
        elif k in _SCHEMA_ARRAY_KEYS and isinstance(v, list):
            yield from ((x, f"{w}.{i}") for i, x in enumerate(v))


def unresolved_refs(schema: dict[str, Any], where: str = "") -> list[tuple[str, str, str]]:
    """(dotted path of the ``$ref``, the reference, why) for each local reference (``#...``) of
    ``schema`` that points nowhere: a JSON Pointer to a missing place (``#/$defs/nope``) or an
    unknown ``$anchor``. References resolve as JSON Schema 2020-12 says (RFC 6901 pointers, against
    the nearest enclosing ``$id``), with the ``referencing`` library and nothing fetched. Every
    sub-schema is searched, ``$defs`` included, whether or not anything uses it."""
    from referencing.jsonschema import DRAFT202012

    try:
        root = DRAFT202012.create_resource(schema)
        resolver = _EMPTY_REGISTRY.with_resource(root.id() or "", root).crawl().resolver(
            base_uri=root.id() or "")
    except (referencing.exceptions.Unresolvable, ValueError, TypeError, AttributeError):
        return []
    out: list[tuple[str, str, str]] = []
    stack: list[tuple[Any, str, Any]] = [(schema, where, resolver)]
    while stack:
        node, w, res = stack.pop()
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("$id"), str) and node is not schema:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                res = res.in_subresource(DRAFT202012.create_resource(node))
        for key in _REF_KEYS:
            ref = node.get(key)
            if isinstance(ref, str) and ref.startswith("#"):
                try:
                    res.lookup(ref)
                except referencing.exceptions.Unresolvable as e:
                    why = ("no such $anchor" if isinstance(e, referencing.exceptions.NoSuchAnchor)
                           else "nothing is at that JSON Pointer")
                    out.append((f"{w}.{key}".strip("."), ref, why))
                except (ValueError, TypeError, LookupError) as e:  # a malformed pointer
                    out.append((f"{w}.{key}".strip("."), ref, f"cannot be resolved: {e}"[:200]))
        stack.extend((x, sw, res) for x, sw in _subschemas(node, w))
    return sorted(out)


def schema_errors(schema: Any) -> list[jsonschema.ValidationError]:
    """Every metaschema error of ``schema`` as ``Draft202012Validator.check_schema`` sees it (with
    its format checker), sorted by path; empty when valid. Fast for the usual valid schema."""
    if fast_schema_ok(schema):
        return []
    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)
    return sorted(meta.iter_errors(schema), key=lambda e: _json_path(e.absolute_path))


def audit_tool_schemas(agent: AgentConfig, report: Report) -> None:
    """Tool-interface audits of one agent.

    Codes: ``tool.duplicate`` (two tools share a name), ``tool.schema_invalid`` (not a valid
    JSON Schema 2020-12, per ``Draft202012Validator.check_schema``; every metaschema error is
    reported), ``tool.schema_not_object`` (parameters must be ``type: object``: OpenAI and Anthropic
    function tools take an object of named arguments), ``tool.schema_remote_ref`` (a ``$ref`` that is
    not local), ``tool.schema_ref_unresolved`` (a local ``$ref`` or ``$dynamicRef`` that points
    nowhere, anywhere in the schema: :func:`unresolved_refs`), ``tool.required_unknown``
    (``required`` names a parameter not in ``properties``),
    ``ending.undeclared`` (a call-ending tool that is not one of the agent's tools),
    ``ending.no_success`` (no success condition), ``ending.duplicate``.
    """
    seen: set[str] = set()
    for i, t in enumerate(agent.tools):
        base = f"tools.{i}"
        if t.name in seen:
            report(f"{base}.name", "tool.duplicate", f"tool name {t.name!r} is declared twice")
        seen.add(t.name)
        params = t.parameters
        for err in schema_errors(params):
            report(f"{base}.parameters.{_json_path(err.absolute_path)}".rstrip("."), "tool.schema_invalid",
                   f"not a valid JSON Schema 2020-12: {err.message[:300]}")
        if params.get("type") != "object":
            report(f"{base}.parameters.type", "tool.schema_not_object",
                   f"tool {t.name!r}: parameters must be a JSON Schema with type: object, "
                   f"got type {params.get('type')!r}")
        for where, ref in iter_refs(params, f"{base}.parameters"):
            if not ref.startswith("#"):
                report(where, "tool.schema_remote_ref",
                       f"$ref {ref!r} is not local (only '#...' references are allowed; nothing is fetched)")
        for where, ref, why in unresolved_refs(params, f"{base}.parameters"):
            report(where, "tool.schema_ref_unresolved",
                   f"tool {t.name!r}: {ref!r} points nowhere in its parameters schema ({why})")
        props = params.get("properties")
        req = params.get("required")
        if isinstance(req, list) and isinstance(props, dict):
            for k, name in enumerate(req):
                if isinstance(name, str) and name not in props:
                    report(f"{base}.parameters.required.{k}", "tool.required_unknown",
                           f"required parameter {name!r} is not in properties of tool {t.name!r}")
    ending_seen: set[str] = set()
    for i, e in enumerate(agent.call_ending_tools):
        if e.tool not in seen:
            report(f"call_ending_tools.{i}.tool", "ending.undeclared",
                   f"call-ending tool {e.tool!r} is not one of the agent's tools {sorted(seen)}")
        if not e.success:
            report(f"call_ending_tools.{i}.success", "ending.no_success",
                   f"call-ending tool {e.tool!r} has no success condition")
        if e.tool in ending_seen:
            report(f"call_ending_tools.{i}.tool", "ending.duplicate", f"{e.tool!r} is listed twice")
        ending_seen.add(e.tool)


def arguments_schema(tool: ToolSpec, agent: AgentConfig) -> dict[str, Any]:
    """The arguments schema the candidate sees: the tool's parameters plus, for a call-ending tool
    with ``concluding_message``, the optional string argument the harness adds."""
    params = dict(tool.parameters)
    ending = next((e for e in agent.call_ending_tools if e.tool == tool.name), None)
    if ending is not None and ending.concluding_message:
        props = dict(params.get("properties") or {}) if isinstance(params.get("properties", {}), dict) else {}
        props.setdefault("concluding_message", {"type": "string"})
        params["properties"] = props
    return params


def schema_usable(schema: dict[str, Any]) -> bool:
    """A valid 2020-12 schema with only local references (cached by content); matcher and
    argument audits skip tools whose schema is not (that is reported once, on the agent)."""
    return _validator(json.dumps(schema, sort_keys=True)) is not None


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    """An RE2-backed 2020-12 validator for the schema (:mod:`callbench.bundle.schema_re2`), or
    None when the schema is invalid or has a non-local reference."""
    schema = json.loads(schema_json)
    if schema_errors(schema):
        return None
    if not all(ref.startswith("#") for _, ref in iter_refs(schema)):
        return None
    if unresolved_refs(schema):
        return None
    return RE2Draft202012Validator(schema, registry=_EMPTY_REGISTRY)


def audit_arguments(args: dict[str, Any], tool: ToolSpec, agent: AgentConfig, path: str,
                    report: Report) -> None:
    """Validate one reference-path call's arguments against the tool schema (draft 2020-12).

    Code ``reference.args_invalid`` for every validation error, at ``path.<error path>``. Skipped
    when the tool schema itself is invalid (that is reported once, on the agent).
    """
    validator = _validator(json.dumps(arguments_schema(tool, agent), sort_keys=True))
    if validator is None:
        return
    try:
        errors = sorted(validator.iter_errors(args), key=lambda e: _json_path(e.absolute_path))
    except (referencing.exceptions.Unresolvable, jsonschema.SchemaError, RecursionError) as e:
        report(path, "reference.args_invalid", f"cannot check the arguments against {tool.name!r}: {e}"[:400])
        return
    for err in errors:
        report(f"{path}.{_json_path(err.absolute_path)}".rstrip("."), "reference.args_invalid",
               f"arguments of {tool.name!r} do not fit its schema: {err.message[:300]}")
