"""Provider request rules as data: what each target documents that it rejects.

One :class:`TargetRules` per target, :data:`TARGETS` by name:

``openai``
    OpenAI Chat Completions with plain (non-strict) function tools, which is what the ``openai:``
    adapter sends. Sources: API reference, "Create chat completion" (``tools``: "A max of 128
    functions are supported"; ``function.name``: "Must be a-z, A-Z, 0-9, or contain underscores
    and dashes, with a maximum length of 64"; ``function.parameters``: "described as a JSON Schema
    object"), and the 400 ``invalid_function_parameters`` the API answers: "schema must have type
    'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level".
``openai-strict``
    The same with ``strict: true`` (function calling "strict mode" and ``response_format``
    ``json_schema`` with ``strict``). Source: guide "Structured Outputs", "Supported schemas":
    supported keywords (strings: pattern, format; numbers: multipleOf, maximum,
    exclusiveMaximum, minimum, exclusiveMinimum; arrays: minItems, maxItems; anyOf, $ref/$defs,
    enum, const); "additionalProperties: false must always be set in objects"; "all fields must be
    required"; the root "must be an object" and "not use anyOf"; "up to 5000 object properties
    total, with up to 10 levels of nesting"; "up to 1000 enum values across all enum properties";
    "total string length of all property names, definition names, enum values, and const values
    cannot exceed 120,000 characters".
``anthropic``
    The Messages API. Sources: "Tool use" guide and API reference, ``tools``: ``name`` "must match
    ``^[a-zA-Z0-9_-]{1,64}$``", ``input_schema`` is "JSON schema for this tool's input ... type
    object"; the 400 the API answers for combinators at the top level ("input_schema does not
    support oneOf, allOf, or anyOf at the top level"); messages reference: ``system`` is a
    top-level parameter, not a message role; "the first message must always use the user role";
    ``max_tokens`` is required; each ``tool_result`` must answer a ``tool_use`` of the previous
    assistant message and come first in its user message; text blocks must be non-empty; prompt
    caching guide: at most 4 blocks with ``cache_control``; API overview, "Request size limits":
    32 MB for a Messages request.
``gemini``
    Gemini's OpenAI-compatible endpoint, whose function declarations and response schemas use
    the Gemini ``Schema`` object, "a select subset of an OpenAPI 3.0 schema object". Sources:
    Gemini API reference ``FunctionDeclaration`` (name "must start with a letter or an underscore
    ... a-z, A-Z, 0-9, or contain underscores, dots and dashes, with a maximum length of 64") and
    ``Schema`` (fields: type, format, title, description, nullable, enum, items, minItems,
    maxItems, properties, required, minProperties, maxProperties, minLength, maxLength, pattern,
    minimum, maximum, anyOf, propertyOrdering, default, example). There is no ``null`` type and no
    list of types (``nullable`` says it), no ``additionalProperties``, ``$ref``/``$defs``,
    ``oneOf``/``allOf``/``not`` or ``const``. callbench reports this target as warnings only: the
    subset has changed between API versions.

Checks here take plain JSON values (schemas, request bodies), so the same code serves ``callbench
validate`` (tool schemas of a bundle), the run preflight (the bodies the adapters would send) and
the conformance fake in the test suite (every request it receives).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from callbench.models.remote.schemas import SUBSCHEMA, SUBSCHEMA_LISTS, SUBSCHEMA_MAPS

_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "description", "title", "$ref", "$defs", "definitions", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
})
_GEMINI_KEYWORDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "items", "minItems", "maxItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern",
    "minimum", "maximum", "anyOf", "propertyOrdering", "default", "example",
})


@dataclass(frozen=True)
class TargetRules:
    """The documented request rules of one target (see the module docstring for each source).

    ``keywords`` is the set of schema keywords accepted anywhere (None: any JSON Schema keyword);
    ``top_level_forbidden`` the keywords rejected at the top of a tool's parameters; ``strict``
    that every object schema needs ``additionalProperties: false`` and every property required;
    ``null_type`` whether ``"null"`` and lists of types may appear in ``type``; size limits are
    None when the target documents none. ``severity`` is how ``callbench validate`` reports a
    broken rule (``error`` or ``warning``)."""

    name: str
    title: str
    tool_name: str
    max_tools: int | None
    top_level_forbidden: frozenset[str]
    keywords: frozenset[str] | None = None
    strict: bool = False
    null_type: bool = True
    max_depth: int | None = None
    max_properties: int | None = None
    max_enum_values: int | None = None
    max_schema_chars: int | None = None
    system: str = "message"
    first_message_user: bool = False
    requires_max_tokens: bool = False
    max_cache_breakpoints: int | None = None
    max_request_bytes: int | None = None
    severity: str = "error"
    sources: tuple[str, ...] = field(default=())

    def name_ok(self, name: Any) -> bool:
        """True when ``name`` is a string matching the target's tool-name pattern."""
        return isinstance(name, str) and re.fullmatch(self.tool_name, name) is not None


OPENAI = TargetRules(
    name="openai", title="OpenAI", tool_name=r"[a-zA-Z0-9_-]{1,64}", max_tools=128,
    top_level_forbidden=frozenset({"oneOf", "anyOf", "allOf", "enum", "not"}),
    sources=("platform.openai.com/docs/api-reference/chat/create (tools, function.name)",
             "400 invalid_function_parameters"),
)
OPENAI_STRICT = TargetRules(
    name="openai-strict", title="OpenAI (strict)", tool_name=r"[a-zA-Z0-9_-]{1,64}", max_tools=128,
    top_level_forbidden=frozenset({"oneOf", "anyOf", "allOf", "enum", "not"}),
    keywords=_STRICT_KEYWORDS, strict=True, max_depth=10, max_properties=5000,
    max_enum_values=1000, max_schema_chars=120_000,
    sources=("platform.openai.com/docs/guides/structured-outputs (Supported schemas)",),
)
ANTHROPIC = TargetRules(
    name="anthropic", title="Anthropic", tool_name=r"[a-zA-Z0-9_-]{1,64}", max_tools=None,
    top_level_forbidden=frozenset({"oneOf", "anyOf", "allOf"}), system="parameter",
    first_message_user=True, requires_max_tokens=True, max_cache_breakpoints=4,
    max_request_bytes=32 * 1024 * 1024,
    sources=("docs.claude.com/en/docs/agents-and-tools/tool-use (tools, input_schema)",
             "docs.claude.com/en/api/overview (request size limits: 32 MB for the Messages API)",
             "docs.claude.com/en/api/messages (system, messages, max_tokens)",
             "docs.claude.com/en/docs/build-with-claude/prompt-caching (4 breakpoints)"),
)
GEMINI = TargetRules(
    name="gemini", title="Gemini (OpenAI-compatible)", tool_name=r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}",
    max_tools=None, top_level_forbidden=frozenset({"oneOf", "anyOf", "allOf", "not", "enum"}),
    keywords=_GEMINI_KEYWORDS, null_type=False, severity="warning",
    sources=("ai.google.dev/api/caching#FunctionDeclaration", "ai.google.dev/api/caching#Schema",
             "ai.google.dev/gemini-api/docs/openai"),
)
TARGETS: dict[str, TargetRules] = {r.name: r for r in (OPENAI, OPENAI_STRICT, ANTHROPIC, GEMINI)}
DEFAULT_TARGETS = ("openai", "anthropic")
"""What ``callbench validate`` checks unless ``--providers`` says otherwise."""


def parse_targets(text: str) -> list[TargetRules]:
    """``openai,anthropic`` -> their rules (``all`` for every target). Raises ValueError naming an
    unknown target and the known ones."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        return list(TARGETS.values())
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        raise ValueError(f"unknown provider target(s) {', '.join(unknown) or '(none)'}; "
                         f"choose from {', '.join(TARGETS)} or all")
    return [TARGETS[n] for n in dict.fromkeys(names)]


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _types(node: dict[str, Any]) -> list[Any]:
    t = node.get("type")
    return t if isinstance(t, list) else [t] if t is not None else []


def _walk(schema: Any, path: str, depth: int = 0) -> Iterator[tuple[dict[str, Any], str, int]]:
    """(schema object, dotted path, object depth) for ``schema`` and every subschema."""
    if not isinstance(schema, dict):
        return
    yield schema, path, depth
    inner = depth + (1 if "object" in _types(schema) or "properties" in schema else 0)
    for key, value in schema.items():
        if key in SUBSCHEMA:
            yield from _walk(value, _join(path, key), inner)
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            for i, v in enumerate(value):
                yield from _walk(v, _join(_join(path, key), i), inner)
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, v in value.items():
                yield from _walk(v, _join(_join(path, key), name), inner)


def schema_problems(schema: Any, rules: TargetRules, *, root: str = "") -> list[tuple[str, str]]:
    """Every rule of ``rules`` that the JSON Schema ``schema`` breaks anywhere, as (dotted path
    from ``root``, message). Top-level rules of tool parameters are :func:`parameters_problems`'."""
    out: list[tuple[str, str]] = []
    n_props = n_enum = chars = 0
    for node, path, depth in _walk(schema, root):
        if rules.keywords is not None:
            for key in node:
                if key not in rules.keywords:
                    out.append((_join(path, key), f"{rules.title} does not support the keyword {key!r}"))
        types = _types(node)
        if not rules.null_type and (isinstance(node.get("type"), list) or "null" in types):
            out.append((_join(path, "type"), f"{rules.title} takes one type per schema and no 'null' "
                        f"type (got {node.get('type')!r}); use nullable"))
        is_object = "object" in types or "properties" in node
        props: dict[str, Any] = node["properties"] if isinstance(node.get("properties"), dict) else {}
        if rules.strict and is_object:
            if node.get("additionalProperties") is not False:
                out.append((_join(path, "additionalProperties"),
                            f"{rules.title} requires additionalProperties: false on every object"))
            missing = [p for p in props if p not in (node.get("required") or [])]
            if missing:
                out.append((_join(path, "required"), f"{rules.title} requires every property to be "
                            f"required; not required: {', '.join(missing)}"))
        if rules.max_depth is not None and depth > rules.max_depth:
            out.append((path, f"{rules.title} allows at most {rules.max_depth} levels of nesting"))
        n_props += len(props)
        chars += sum(len(str(p)) for p in props)
        if isinstance(node.get("enum"), list):
            n_enum += len(node["enum"])
            chars += sum(len(str(v)) for v in node["enum"])
    if rules.max_properties is not None and n_props > rules.max_properties:
        out.append((root, f"{rules.title} allows at most {rules.max_properties} object properties in "
                    f"all, got {n_props}"))
    if rules.max_enum_values is not None and n_enum > rules.max_enum_values:
        out.append((root, f"{rules.title} allows at most {rules.max_enum_values} enum values in all, "
                    f"got {n_enum}"))
    if rules.max_schema_chars is not None and chars > rules.max_schema_chars:
        out.append((root, f"{rules.title} allows at most {rules.max_schema_chars} characters of property "
                    f"names and enum values, got {chars}"))
    return out


def parameters_problems(parameters: Any, rules: TargetRules, *, root: str = "") -> list[tuple[str, str]]:
    """The problems of a tool's parameter schema (as sent) for ``rules``: its top level must be
    ``type: object`` without the target's forbidden combinators, then :func:`schema_problems`."""
    if not isinstance(parameters, dict):
        return [(root, f"{rules.title} requires the parameters to be a JSON Schema object")]
    out: list[tuple[str, str]] = []
    if parameters.get("type") != "object":
        out.append((_join(root, "type"), f"{rules.title} requires type 'object' at the top level, "
                    f"got {parameters.get('type')!r}"))
    for key in sorted(rules.top_level_forbidden & parameters.keys()):
        out.append((_join(root, key), f"{rules.title} rejects {key!r} at the top level of a tool's "
                    "parameters"))
    return out + schema_problems(parameters, rules, root=root)


def tools_problems(tools: list[tuple[Any, Any]], rules: TargetRules) -> list[tuple[int, str, str]]:
    """Problems of a tool list ``[(name, parameters as sent), ...]``: names, count, duplicates and
    each parameter schema, as (tool index, path within the tool, message); index -1 for the list."""
    out: list[tuple[int, str, str]] = []
    if rules.max_tools is not None and len(tools) > rules.max_tools:
        out.append((-1, "", f"{rules.title} accepts at most {rules.max_tools} tools, got {len(tools)}"))
    seen: set[str] = set()
    for i, (name, params) in enumerate(tools):
        if not rules.name_ok(name):
            out.append((i, "name", f"{rules.title} requires tool names matching {rules.tool_name}, "
                        f"got {name!r}"))
        if name in seen:
            out.append((i, "name", f"tool name {name!r} is used twice"))
        seen.add(name)
        out += [(i, _join("parameters", p).rstrip("."), m)
                for p, m in parameters_problems(params, rules)]
    return out
