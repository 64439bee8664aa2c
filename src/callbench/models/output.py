"""Checking JSON output produced for a ``response_schema`` request (callers and judges).

A response to a request with ``response_schema`` carries the JSON text in ``content``. Output that
does not parse, or does not validate against the schema (JSON Schema draft 2020-12, the
``jsonschema`` library), is a :class:`ModelOutputError` carrying the raw text,
so the caller or judge can retry and the trace can record what came back.
"""

from __future__ import annotations

import json
from typing import Any

from callbench.models.base import ModelOutputError, Usage
from callbench.models.output_limits import REPLY_LIMITS, OutputLimitError, loads_limited, safe_text
from callbench.models.remote.prepared import schema_validator


def check_json_output(text: str | None, schema: dict[str, Any], *, usage: Usage | None = None) -> Any:
    """Parse ``text`` as JSON and validate it against ``schema``; return the parsed value.

    Raises ModelOutputError (with ``raw`` and ``usage``) naming the JSON error position, the output
    limit exceeded (:mod:`callbench.models.output_limits`: depth, size, string length) or the
    failing field path. Strings of the value and of the error come back through ``safe_text``.
    """
    if text is None or not text.strip():
        raise ModelOutputError("expected JSON output, got no text", raw=text, usage=usage)
    try:
        value = loads_limited(text, REPLY_LIMITS)
    except OutputLimitError as exc:
        raise ModelOutputError(f"output exceeds the output limits: {exc}", raw=safe_text(text),
                               usage=usage) from None
    except json.JSONDecodeError as exc:
        raise ModelOutputError(f"output is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                               raw=safe_text(text), usage=usage) from None
    validator = schema_validator(schema)  # compiled once per schema
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        why = safe_text(first.message[:500])
        raise ModelOutputError(f"output does not match its schema at {where}: {why}",
                               raw=safe_text(text), usage=usage)
    return value
