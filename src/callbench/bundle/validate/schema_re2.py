"""A JSON Schema 2020-12 validator whose regular expressions run on RE2 (linear time).

jsonschema evaluates ``pattern``, ``patternProperties`` and the ``patternProperties`` part of
``additionalProperties`` with Python's backtracking ``re``: a tool parameter such as
``{"pattern": "^(a|aa)+$"}`` checked against a 40-character argument took 25 s in
``callbench validate`` (catastrophic backtracking), and it grows exponentially. Bundles are
untrusted input, so these three keywords are replaced here with RE2 versions (``google-re2``, as
the matchers use). RE2 has no look-around or back-references: a pattern it cannot compile is a
validation error that says so, never a silent pass. Search semantics as in JSON Schema
(unanchored ``search``); Unicode-aware.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema import Draft202012Validator, ValidationError, validators

MAX_PATTERN_CHARS = 2000


@functools.lru_cache(maxsize=1024)
def compile_re2(pattern: str) -> Any:
    """The compiled RE2 pattern, or None when RE2 cannot compile it (or it is over
    ``MAX_PATTERN_CHARS``)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    options = re2.Options()
    options.max_mem = 8 << 20
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return None


def _unsupported(pattern: str) -> ValidationError:
    return ValidationError(
        f"pattern {pattern[:80]!r} cannot be checked: RE2 cannot compile it "
        "(no look-around or back-references; at most 2,000 characters)"
    )


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    compiled = compile_re2(pattern)
    if compiled is None:
        yield _unsupported(pattern)
    elif not compiled.search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = compile_re2(pattern)
        if compiled is None:
            yield _unsupported(pattern)
            continue
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    compiled = [compile_re2(p) for p in schema.get("patternProperties", {})]
    usable = [c for c in compiled if c is not None]  # an uncompilable one is reported by patternProperties
    extras = sorted(
        (k for k in instance if k not in properties and not any(c.search(k) for c in usable)), key=str
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(e) for e in extras)
        yield ValidationError(f"additional properties are not allowed ({listed} unexpected)")


RE2Draft202012Validator = validators.extend(
    Draft202012Validator,
    validators={
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)
"""``Draft202012Validator`` with RE2 for ``pattern``, ``patternProperties`` and
``additionalProperties``; use it for every bundle-supplied schema applied to data."""
