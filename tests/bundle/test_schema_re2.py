"""Bundle schemas applied to data use RE2 for their regular expressions (no catastrophic
backtracking on untrusted bundles)."""

from __future__ import annotations

import time

import pytest

from callbench.bundle.schema_re2 import RE2Draft202012Validator
from waiting import limit


def _errors(schema: dict, value: object) -> list[str]:
    return [e.message for e in RE2Draft202012Validator(schema).iter_errors(value)]


def test_catastrophic_pattern_is_checked_in_linear_time() -> None:
    """Regression: ``^(a|aa)+$`` against 40 a's and a '!' took 25 s with Python's re."""
    schema = {"type": "string", "pattern": "^(a|aa)+$"}
    start = time.thread_time()  # CPU time: a loaded machine does not stretch it
    errors = _errors(schema, "a" * 40 + "!")
    assert time.thread_time() - start < limit(1.0)
    assert errors == [f"{'a' * 40 + '!'!r} does not match '^(a|aa)+$'"]
    assert _errors(schema, "a" * 40) == []


def test_pattern_is_a_search_and_unicode_aware() -> None:
    assert _errors({"pattern": "[0-9]{4}"}, "PIN 2514 please") == []
    assert _errors({"pattern": "^\\p{Devanagari}+$"}, "नमस्ते") == []
    assert _errors({"pattern": "^[0-9]+$"}, "12a") != []
    assert _errors({"pattern": "^x"}, 12) == []  # not a string: pattern does not apply


def test_a_pattern_re2_cannot_compile_is_an_error_not_a_pass() -> None:
    errors = _errors({"pattern": "^(?=a)a$"}, "a")  # look-ahead
    assert len(errors) == 1 and "RE2 cannot compile it" in errors[0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"x_1": 1, "name": "a"}, []),
        ({"x_1": "one"}, ["'one' is not of type 'integer'"]),
        ({"other": 1}, ["additional properties are not allowed ('other' unexpected)"]),
    ],
)
def test_pattern_properties_and_additional_properties(value: dict, expected: list[str]) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "patternProperties": {"^x_[0-9]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert _errors(schema, value) == expected
