"""Tool and output JSON Schemas cleaned of keywords a provider rejects or ignores.

Bundle tool schemas are JSON Schema draft 2020-12 (DESIGN.md). Providers accept a subset:

- Annotation keywords that carry no constraint are dropped everywhere: ``$schema``, ``$id``,
  ``$comment``, ``examples``, ``example`` (OpenAPI), ``deprecated``, ``readOnly``, ``writeOnly``,
  ``contentEncoding``, ``contentMediaType``. Providers reject some of them (OpenAI strict
  structured outputs, Gemini through OpenAI-compatible endpoints) and none changes what is valid.
- ``default`` is not a constraint and OpenAI's strict mode rejects it: it is folded into the
  description ("Default: ...") so the model still sees it.
- ``format`` values outside a provider's supported list (OpenAI structured outputs: date-time,
  time, date, duration, email, hostname, ipv4, ipv6, uuid; Anthropic structured outputs adds uri)
  are folded into the description instead of being sent.
- The top level of a tool's parameters must be ``type: object`` with ``properties`` (OpenAI
  rejects an object schema without properties; Anthropic requires ``input_schema.type == object``).

Sources: platform.openai.com/docs/guides/structured-outputs ("Supported schemas") and
docs.claude.com/en/docs/build-with-claude/structured-outputs ("JSON Schema limitations").
Keywords are removed only in keyword positions: a *property* named ``default`` or ``examples``
is kept.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

DROPPED_KEYWORDS = frozenset({
    "$schema", "$id", "$comment", "examples", "example", "deprecated", "readOnly", "writeOnly",
    "contentEncoding", "contentMediaType",
})
FORMATS: dict[str, frozenset[str]] = {
    "openai": frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6",
                         "uuid"}),
    "anthropic": frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4",
                            "ipv6", "uuid"}),
    # llama.cpp json-schema-to-grammar (STRING_FORMAT_RULES)
    "local": frozenset({"date", "time", "date-time", "uuid"}),
}
# Keywords whose value is a schema, a list of schemas, or a name -> schema mapping.
SUBSCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
              "unevaluatedItems", "unevaluatedProperties")
SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")

OPENAI_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "description", "title", "$ref", "$defs", "definitions", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
})


def subschemas(node: dict[str, Any]) -> Iterator[Any]:
    """The direct subschemas of the schema object ``node``: the values of ``SUBSCHEMA`` keywords,
    the items of ``SUBSCHEMA_LISTS`` lists and the values of ``SUBSCHEMA_MAPS`` mappings (JSON
    Schema 2020-12 "Keywords for Applying Subschemas"). Keyword positions only: a property named
    ``items`` or an ``enum`` value is not a subschema."""
    for key, value in node.items():
        if key in SUBSCHEMA:
            yield value
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            yield from value
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            yield from value.values()


def map_subschemas(node: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """A copy of the schema object ``node`` with ``fn`` applied to each direct subschema (see
    :func:`subschemas`) and every other value deep-copied; key order is kept."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in SUBSCHEMA:
            out[key] = fn(value)
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [fn(v) for v in value]
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: fn(v) for name, v in value.items()}
        else:
            out[key] = copy.deepcopy(value)
    return out


GRAMMAR_ENUM_LIMIT = 512
"""The most values a bounded integer is listed as for a grammar (:func:`bounded_integers_as_enums`)."""


def _integer_bounds(node: dict[str, Any]) -> tuple[int, int] | None:
    """The least and greatest integer ``node``'s ``minimum``/``exclusiveMinimum`` and
    ``maximum``/``exclusiveMaximum`` allow (JSON Schema 2020-12, Validation section 6.2), or None
    when either side is unbounded or a bound is not a number."""
    low: list[int] = []
    high: list[int] = []
    for key, side, exclusive in (("minimum", low, False), ("exclusiveMinimum", low, True),
                                 ("maximum", high, False), ("exclusiveMaximum", high, True)):
        value = node.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return None
        if side is low:
            n = math.floor(value) + 1 if exclusive else math.ceil(value)
        else:
            n = math.ceil(value) - 1 if exclusive else math.floor(value)
        side.append(n)
    if not low or not high:
        return None
    return max(low), min(high)


def bounded_integers_as_enums(schema: Any, limit: int = GRAMMAR_ENUM_LIMIT) -> Any:
    """``schema`` with every integer (``"type": "integer"``, or a type list of ``"integer"`` and
    ``"null"``) bounded on both sides by at most ``limit`` values rewritten as an ``enum`` of them
    (``null`` kept where the type allows it; a whole-number ``multipleOf`` applied): the same set of
    valid values. For a grammar: llama-cpp-python's schema-to-grammar converter (0.3.36) ignores
    ``minimum``/``maximum`` (any integer passes its grammar) but enforces ``enum``, so a model it
    constrains could write a value the schema then refuses (a judge citing message 10 of 9 lost
    its whole reply). Left as they are: nodes with an ``enum`` or ``const`` already, a wider or
    infinite range, and a fractional ``multipleOf`` (its floating-point test is not exact)."""
    if not isinstance(schema, dict):
        return schema
    out = map_subschemas(schema, lambda s: bounded_integers_as_enums(s, limit))
    kinds = out.get("type")
    types = {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else set()
    if "integer" not in types or not types <= {"integer", "null"} or "enum" in out or "const" in out:
        return out
    bounds = _integer_bounds(out)
    if bounds is None or not 0 < bounds[1] - bounds[0] + 1 <= limit:
        return out
    step = out.get("multipleOf", 1)
    if isinstance(step, bool) or not isinstance(step, int | float) or step <= 0 or step != int(step):
        return out
    values: list[int | None] = [v for v in range(bounds[0], bounds[1] + 1) if v % int(step) == 0]
    if not values:
        return out
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        out.pop(key, None)
    out["enum"] = [*values, None] if "null" in types else values
    return out


def _append_description(node: dict[str, Any], note: str) -> None:
    text = node.get("description")
    node["description"] = f"{text.rstrip()} {note}" if isinstance(text, str) and text.strip() else note


def _clean_node(node: Any, provider: str) -> Any:
    if not isinstance(node, dict):
        return node
    kept: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in node.items():
        if key in DROPPED_KEYWORDS:
            continue
        if key == "default":
            notes.append(f"Default: {json.dumps(value, ensure_ascii=False)}.")
            continue
        if key == "format" and isinstance(value, str) and value not in FORMATS.get(provider, frozenset()):
            notes.append(f"Format: {value}.")
            continue
        kept[key] = value
    out = map_subschemas(kept, lambda sub: _clean_node(sub, provider))
    for note in notes:
        _append_description(out, note)
    return out


def clean_schema(schema: dict[str, Any], provider: str) -> dict[str, Any]:
    """A copy of ``schema`` without the keywords ``provider`` (``openai`` or ``anthropic``) rejects.

    The input is never modified. Raises ValueError when ``schema`` is not a JSON object.
    """
    if not isinstance(schema, dict):
        raise ValueError(f"a JSON Schema must be an object, got {type(schema).__name__}")
    cleaned = _clean_node(schema, provider)
    assert isinstance(cleaned, dict)
    return cleaned


def clean_tool_parameters(parameters: dict[str, Any], provider: str, *, tool: str) -> dict[str, Any]:
    """Clean a tool's parameter schema and make its top level ``{"type": "object", "properties": ...}``.

    Raises ValueError naming ``tool`` when the top level declares a type other than object.
    """
    if not isinstance(parameters, dict):
        raise ValueError(f"tool {tool!r}: parameters must be a JSON Schema object")
    cleaned = clean_schema(parameters, provider)
    declared = cleaned.get("type")
    if declared is None:
        cleaned = {"type": "object", **cleaned}
    elif declared != "object":
        raise ValueError(f"tool {tool!r}: parameters must have type 'object', got {declared!r}")
    cleaned.setdefault("properties", {})
    return cleaned


def _walk(node: Any) -> list[dict[str, Any]]:
    """Every schema object under ``node`` (including itself), in keyword positions only."""
    if not isinstance(node, dict):
        return []
    found = [node]
    for sub in subschemas(node):
        found += _walk(sub)
    return found


def is_openai_strict_compatible(schema: dict[str, Any]) -> bool:
    """True when ``schema`` meets OpenAI strict structured outputs: only supported keywords, and
    every object lists all its properties in ``required`` with ``additionalProperties: false``."""
    if schema.get("type") != "object":
        return False
    for node in _walk(schema):
        if set(node) - OPENAI_STRICT_KEYWORDS:
            return False
        types = node.get("type")
        is_object = types == "object" or (isinstance(types, list) and "object" in types)
        if is_object or "properties" in node:
            props = node.get("properties", {})
            if node.get("additionalProperties") is not False:
                return False
            if set(node.get("required", [])) != set(props):
                return False
    return True


PORTABLE_DROPPED = frozenset({"additionalProperties", "$defs", "definitions", "unevaluatedProperties"})
"""Keywords left out of a portable schema (Gemini's schema subset rejects them)."""
_MAX_REF_DEPTH = 16


def _resolve_ref(ref: str, root: dict[str, Any]) -> Any:
    if not ref.startswith("#/"):
        raise ValueError(f"$ref {ref!r}: only local references (#/...) can be inlined")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"$ref {ref!r} does not resolve")
        node = node[part]
    return node


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    out = dict(node)
    out["nullable"] = True
    return out


def _portable_node(node: Any, root: dict[str, Any], depth: int) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        if depth >= _MAX_REF_DEPTH:
            raise ValueError(f"$ref {node['$ref']!r}: recursive references cannot be inlined")
        target = _resolve_ref(str(node["$ref"]), root)
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _portable_node(merged, root, depth + 1)
    kept = {k: v for k, v in node.items() if k not in PORTABLE_DROPPED}
    out = map_subschemas(kept, lambda sub: _portable_node(sub, root, depth))
    kind = out.get("type")
    if kind == "null":  # a value that can only be null: a nullable string the validator checks
        out = {**out, "type": "string", "nullable": True}
    elif isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        out["type"] = types[0] if len(types) == 1 else types
        if len(types) < len(kind):
            out = _nullable(out)
    for key in ("anyOf", "oneOf"):
        branches = out.get(key)
        if not isinstance(branches, list):
            continue
        nulls = [b for b in branches if isinstance(b, dict) and b.get("type") == "string"
                 and b.get("nullable") and set(b) <= {"type", "nullable", "description"}]
        rest = [b for b in branches if b not in nulls]
        if nulls and rest:
            if len(rest) == 1 and isinstance(rest[0], dict):
                out.pop(key)
                out = _nullable({**rest[0], **out})
            else:
                out[key] = [_nullable(b) if isinstance(b, dict) else b for b in rest]
    if isinstance(out.get("enum"), list) and None in out["enum"]:
        out["enum"] = [v for v in out["enum"] if v is not None]
        out = _nullable(out)
    values = out.get("enum")
    if isinstance(values, list) and values and not all(isinstance(v, str) for v in values):
        del out["enum"]  # Gemini takes enums of strings only
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            out.update(type="integer", minimum=min(values), maximum=max(values))
        else:
            listed = ", ".join(json.dumps(v, ensure_ascii=False) for v in values)
            _append_description(out, f"One of: {listed}.")
    return out


def portable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` inside the subset that Gemini's OpenAI-compatible endpoint accepts,
    for a client whose server refused the full schema (``negotiation.py``): local ``$ref`` s
    inlined and ``$defs``/``definitions`` dropped, ``additionalProperties`` dropped, and the null
    type written as OpenAPI's ``nullable: true`` (``type: [X, "null"]``, an ``anyOf`` branch
    ``{"type": "null"}`` and ``null`` in an ``enum``), and an ``enum`` of other values than strings
    written as integer bounds (integers) or listed in the description. Replies are still validated against the
    original schema (``output.py``), so what the subset cannot say is still enforced there.

    Source: ai.google.dev/gemini-api/docs/structured-output ("JSON Schema support": the supported
    subset of the OpenAPI 3.0 Schema object; ``nullable``) and the 400s it answers to
    ``additionalProperties`` and ``$ref``. Raises ValueError for a ``$ref`` that is not local,
    does not resolve, or recurses."""
    if not isinstance(schema, dict):
        raise ValueError(f"a JSON Schema must be an object, got {type(schema).__name__}")
    out = _portable_node(schema, schema, 0)
    assert isinstance(out, dict)
    return out
