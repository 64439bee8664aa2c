"""Every matcher kind with its edge cases (DESIGN.md "Bundle on disk")."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from callbench.bundle.matchers import (
    AllOf,
    Eq,
    Matcher,
    Not,
    Regex,
    Subset,
    iter_matchers,
    lookup_path,
    match_fields,
    values_equal,
)

M: TypeAdapter[Any] = TypeAdapter(Matcher)


def ok(spec: Any, value: Any, present: bool = True) -> bool:
    return bool(M.validate_python(spec).evaluate(value, present).ok)


# ------------------------------------------------------------------ eq and values_equal


def test_numbers_compare_numerically() -> None:
    assert ok({"eq": 25}, 25.0)
    assert ok(25.0, 25)
    assert not ok({"eq": 25}, 25.5)
    assert not ok({"eq": 25}, "25")  # a numeric string is not a number


def test_bool_is_never_a_number() -> None:
    assert not ok({"eq": 1}, True)
    assert not ok({"eq": True}, 1)
    assert not ok({"eq": 0}, False)
    assert ok({"eq": True}, True)
    assert not values_equal(True, 1.0)


def test_strings_compare_after_nfc() -> None:
    composed = unicodedata.normalize("NFC", "é")
    decomposed = unicodedata.normalize("NFD", "é")
    assert composed != decomposed
    assert ok({"eq": composed}, decomposed)
    assert ok(decomposed, composed)
    # Devanagari with a nukta: precomposed QA (U+0958) is excluded from NFC composition,
    # so both spellings normalise to the same decomposed form.
    assert ok("\u0958", "\u0915\u093c")


def test_eq_is_case_sensitive_and_exact() -> None:
    assert not ok("Evening", "evening")
    assert not ok("evening", "evening ")


def test_deep_equality_of_lists_and_objects() -> None:
    assert ok({"eq": [1, 2.0]}, [1.0, 2])
    assert not ok({"eq": [1, 2]}, [2, 1])  # list order matters for eq
    assert ok({"eq": {"a": 1, "b": [True]}}, {"b": [True], "a": 1.0})
    assert not ok({"eq": {"a": 1}}, {"a": 1, "b": 2})
    assert not ok({"eq": {"a": 1}}, {"a": True})


def test_null_and_missing() -> None:
    assert ok({"eq": None}, None)
    assert not ok({"eq": None}, None, present=False)
    res = M.validate_python({"eq": 3}).evaluate(None, present=False)
    assert not res.ok and res.reason == "value is absent"


def test_bare_list_is_eq_not_one_of() -> None:
    m = M.validate_python(["a", "b"])
    assert isinstance(m, Eq)
    assert ok(["a", "b"], ["a", "b"])
    assert not ok(["a", "b"], "a")


# ------------------------------------------------------------------ present, one_of, range


def test_present() -> None:
    assert ok({"present": True}, None)  # null counts as present
    assert not ok({"present": True}, None, present=False)
    assert ok({"present": False}, None, present=False)
    assert not ok({"present": False}, 3)


def test_one_of() -> None:
    assert ok({"one_of": ["evening", 7]}, 7.0)
    assert not ok({"one_of": ["evening", 7]}, True)
    assert ok({"one_of": [unicodedata.normalize("NFD", "café")]}, "café")
    assert not ok({"one_of": ["a"]}, "a", present=False)
    with pytest.raises(ValidationError):
        M.validate_python({"one_of": []})


def test_range_bounds_are_inclusive() -> None:
    spec = {"range": {"min": 25, "max": 35}}
    assert ok(spec, 25) and ok(spec, 35) and ok(spec, 30.5) and ok(spec, 25.0)
    assert not ok(spec, 24.999) and not ok(spec, 35.001)
    assert ok({"range": {"min": 0}}, 10**12)
    assert ok({"range": {"max": 0}}, -5) and not ok({"range": {"max": 0}}, 0.1)


def test_range_rejects_non_numbers() -> None:
    spec = {"range": {"min": 0, "max": 10}}
    assert not ok(spec, True)
    assert not ok(spec, "5")
    assert not ok(spec, float("nan"))
    assert not ok({"range": {"min": 0}}, float("inf"))
    assert not ok(spec, None, present=False)


def test_range_bounds_validated() -> None:
    with pytest.raises(ValidationError, match="needs min, max or both"):
        M.validate_python({"range": {}})
    with pytest.raises(ValidationError, match="greater than max"):
        M.validate_python({"range": {"min": 5, "max": 1}})


# ------------------------------------------------------------------ regex (RE2)


def test_regex_full_match_by_default() -> None:
    assert ok({"regex": "[0-9]{4}"}, "1234")
    assert not ok({"regex": "[0-9]{4}"}, "12345")
    assert not ok({"regex": "[0-9]{4}"}, "a1234")


def test_regex_search_when_not_full() -> None:
    assert ok({"regex": "[0-9]{4}", "full": False}, "code 1234 ok")
    assert not ok({"regex": "[0-9]{5}", "full": False}, "code 1234 ok")


def test_regex_ignore_case_and_nfc() -> None:
    assert ok({"regex": "asha.*", "ignore_case": True}, "ASHA Rao")
    assert not ok({"regex": "asha.*"}, "ASHA Rao")
    assert ok({"regex": "caf\u00e9"}, unicodedata.normalize("NFD", "café"))


def test_regex_only_matches_strings() -> None:
    assert not ok({"regex": "[0-9]+"}, 1234)
    assert not ok({"regex": ".*"}, None, present=False)


def test_regex_re2_rejects_backreferences_and_lookaround() -> None:
    for pat in (r"(a)\1", r"(?=a)a", "(unclosed"):
        with pytest.raises(ValidationError, match="RE2 cannot compile"):
            M.validate_python({"regex": pat})


# ------------------------------------------------------------------ contains, subset


def test_contains_is_order_free_and_numeric() -> None:
    spec = {"contains": ["paper", 2]}
    assert ok(spec, [2.0, "glass", "paper"])
    assert not ok(spec, ["paper"])
    assert not ok(spec, "paper 2")  # a string is not a list
    assert ok({"contains": []}, [])


def test_subset_nested_with_dotted_paths() -> None:
    spec = {"subset": {"contact.name": {"regex": "asha.*", "ignore_case": True}, "items.0": "paper"}}
    value = {"contact": {"name": "Asha Rao", "phone": "x"}, "items": ["paper", "glass"], "extra": 1}
    assert ok(spec, value)
    assert not ok(spec, {"contact": {"name": "Ravi"}, "items": ["paper"]})
    assert not ok(spec, {"contact": {"name": "Asha"}, "items": []})
    assert not ok(spec, ["not", "an", "object"])


def test_subset_recursive_and_literal_dotted_key_wins() -> None:
    spec = {"subset": {"a": {"subset": {"b": {"range": {"min": 1}}}}}}
    assert ok(spec, {"a": {"b": 2}})
    assert not ok(spec, {"a": {"b": 0}})
    # A key that itself contains a dot is matched before the path interpretation.
    assert lookup_path({"a.b": 1, "a": {"b": 2}}, "a.b") == (True, 1)
    assert lookup_path({"a": [{"b": 5}]}, "a.0.b") == (True, 5)
    assert lookup_path({"a": [1]}, "a.3") == (False, None)


# ------------------------------------------------------------------ all / any / not


def test_all_any_not() -> None:
    both = {"all": [{"contains": ["paper"]}, {"not": {"contains": ["glass"]}}]}
    assert ok(both, ["paper"])
    assert not ok(both, ["paper", "glass"])
    either = {"any": ["resolved", {"regex": "caller_.*"}]}
    assert ok(either, "caller_request") and ok(either, "resolved") and not ok(either, "refused")
    assert ok({"not": "x"}, "y") and not ok({"not": "x"}, "x")


def test_not_of_absent_value() -> None:
    # "not eq 3" holds for an absent field (eq fails on absence), "not present" requires absence.
    assert ok({"not": 3}, None, present=False)
    assert ok({"not": {"present": True}}, None, present=False)
    assert not ok({"not": {"present": True}}, 1)


def test_iter_matchers_walks_nested() -> None:
    m = M.validate_python({"all": [{"subset": {"a": {"not": {"regex": "x"}}}}, 3]})
    kinds = [type(x).__name__ for x in iter_matchers(m)]
    assert kinds == ["AllOf", "Subset", "Not", "Regex", "Eq"]
    assert isinstance(m, AllOf) and isinstance(m.all_[0], Subset)
    inner = m.all_[0].subset["a"]
    assert isinstance(inner, Not) and isinstance(inner.not_, Regex)


# ------------------------------------------------------------------ bad matcher dicts


@pytest.mark.parametrize(
    "spec",
    [
        {"shift": "evening"},  # an object value must be wrapped in eq
        {"eq": 1, "one_of": [1]},  # two kinds
        {},
        {"regex": "a", "full": False, "extra": 1},
        {"range": {"min": "a"}},
        {"all": []},
        {"any": "not a list"},
        {"present": "maybe"},
        {"contains": "paper"},
        {"subset": ["a"]},
        {"kind": "eq"},  # kind without its value
    ],
)
def test_bad_matcher_dicts_are_rejected(spec: Any) -> None:
    with pytest.raises(ValidationError):
        M.validate_python(spec)


def test_bad_matcher_message_names_the_kinds() -> None:
    with pytest.raises(ValidationError) as ei:
        M.validate_python({"shift": "evening"})
    assert "a matcher is one key of" in str(ei.value) and "'shift'" in str(ei.value)


def test_eq_wrapped_object_is_accepted() -> None:
    assert ok({"eq": {"shift": "evening"}}, {"shift": "evening"})


def test_match_fields_reports_each_field() -> None:
    ms = {k: M.validate_python(v) for k, v in {"slot": "evening", "kg": {"range": {"max": 40}}}.items()}
    res = match_fields(ms, {"slot": "morning", "kg": 30})
    assert not res.ok
    assert res.fields["kg"].ok and not res.fields["slot"].ok
    assert res.reason.startswith("slot: ")
    assert match_fields({}, {"anything": 1}).ok


def test_contains_exactly_is_multiset_equality() -> None:
    from callbench.bundle.matchers import Contains

    m = Contains(contains=["a", "b", "b"], exactly=True)
    assert m.evaluate(["b", "a", "b"]).ok
    assert not m.evaluate(["a", "b"]).ok  # one b short
    assert not m.evaluate(["a", "b", "b", "c"]).ok and "also holds" in m.evaluate(["a", "b", "b", "c"]).reason
    assert Contains(contains=["a", "b"]).evaluate(["a", "b", "c"]).ok  # without exactly: a superset passes
