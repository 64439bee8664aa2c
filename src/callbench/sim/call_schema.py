"""Checking a tool call's arguments against the tool's JSON Schema, as a function-calling runtime
does before it runs a tool (OpenAI's strict function calling and Anthropic's tool use both refuse
arguments outside the declared ``parameters``).

The schema is the tool as offered to the candidate (:func:`callbench.sim.tools.candidate_tools`,
so the optional ``concluding_message`` of a call-ending tool is allowed); the validator is JSON
Schema draft 2020-12 with RE2 for patterns (:mod:`callbench.bundle.schema_re2`, the validator the
bundle's audits use), with no remote references. A schema the validator cannot use (the bundle
audit ``tool.schema_invalid`` reports it) checks nothing.

An invalid call, under ``schema_errors: reject`` (the default), is answered with the tool error
:func:`invalid_arguments_result` and never reaches the fixtures or the agent's state; under
``accept`` (the agent's setting or one tool's opt-out, which needs a reason) it runs and its
errors are recorded. Either way the trace's tool event keeps the located errors.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import referencing

from callbench.bundle.schema_re2 import RE2Draft202012Validator
from callbench.models.output_limits import safe_text
from callbench.trace import SchemaError

MAX_ERRORS = 20
"""Errors kept per call (the first ones by location); the count is always recorded."""
MAX_MESSAGE_CHARS = 300
_EMPTY_REGISTRY: referencing.Registry[Any] = referencing.Registry()


def _pointer(parts: Any) -> str:
    """RFC 6901 JSON pointer of a jsonschema error path ("" is the whole arguments object)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    try:
        RE2Draft202012Validator.check_schema(schema)
        return RE2Draft202012Validator(schema, registry=_EMPTY_REGISTRY)
    except Exception:  # an unusable schema is a bundle problem the audit reports
        return None


def argument_errors(parameters: dict[str, Any], arguments: dict[str, Any]) -> list[SchemaError]:
    """The schema errors of ``arguments`` against ``parameters`` (a JSON Schema object), sorted by
    location then message: each a JSON pointer into the arguments, the failing keyword and
    jsonschema's message (cut to :data:`MAX_MESSAGE_CHARS`). Empty when the arguments fit or the
    schema is unusable. Never raises."""
    validator = _validator(json.dumps(parameters, sort_keys=True))
    if validator is None:
        return []
    try:
        found = list(validator.iter_errors(arguments))
    except Exception as e:  # e.g. an unresolvable local $ref: say so, never crash
        why = safe_text(f"cannot check: {e}"[:MAX_MESSAGE_CHARS])
        return [SchemaError(path="", keyword="schema", message=why)]
    errors = [SchemaError(path=_pointer(e.absolute_path), keyword=str(e.validator),
                          message=safe_text(e.message[:MAX_MESSAGE_CHARS])) for e in found]
    return sorted(errors, key=lambda e: (e.path, e.message))


def invalid_arguments_result(tool: str, errors: list[SchemaError]) -> dict[str, Any]:
    """The tool result of a rejected call (docs/decisions.md "Schema-invalid tool calls"):
    ``{"error": "invalid_arguments", "message": ..., "errors": [{"path", "message"}, ...]}``, the
    errors located by JSON pointer into the arguments ("" is the arguments object itself), at most
    :data:`MAX_ERRORS` of them, ``errors_total`` giving the full count. A JSON object like every
    other tool error of the backend, in the spirit of an OpenAI tool message or an Anthropic
    ``tool_result`` with ``is_error``: the candidate reads it and can call again."""
    return {
        "error": "invalid_arguments",
        "message": f"Not executed: the arguments do not match the parameters schema of {tool!r}. "
        "Correct them and call the tool again.",
        "errors": [{"path": e.path, "message": e.message} for e in errors[:MAX_ERRORS]],
        "errors_total": len(errors),
    }
