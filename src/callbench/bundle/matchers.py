"""Typed, composable argument matchers (DESIGN.md "Bundle on disk"; paper section on the backend).

On disk a matcher is a one-key mapping naming its kind, or a bare value as shorthand for ``eq``::

    eq: 25                      # numbers compare numerically: 25 == 25.0 (bool is never a number)
    present: true               # the field exists (false: the field is absent)
    one_of: [evening, EVENING]
    range: {min: 1, max: 40}    # numeric, inclusive bounds, either may be omitted
    regex: "[0-9]{4}"           # RE2 syntax, full match by default (set full: false to search)
    contains: [a, b]            # a list that contains every listed item (order free)
    contains: [a, b]            # ... and nothing else, duplicates counted (a multiset):
    exactly: true
    subset: {shift: evening}    # an object whose listed keys match, recursively (values are matchers)
    all: [m1, m2]  /  any: [m1, m2]  /  not: m

Strings compare after Unicode NFC normalisation. Every matcher's ``evaluate(value, present)``
returns a :class:`MatchResult` with a plain reason; missing values fail every matcher except
``present: false`` and ``not`` of a matcher that fails on absence.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Annotated, Any, Literal, Union

import re2
from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator

JSONValue = Any
MISSING: Any = object()


class MatchResult(BaseModel):
    """Outcome of one matcher on one value: ``ok`` and a human-readable ``reason``."""

    model_config = ConfigDict(frozen=True)
    ok: bool
    reason: str


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def normalize(v: Any) -> Any:
    """Canonical form for comparison: strings NFC-normalised, integral floats as int, recursively."""
    if isinstance(v, str):
        return unicodedata.normalize("NFC", v)
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [normalize(x) for x in v]
    if isinstance(v, dict):
        return {normalize(k): normalize(x) for k, x in v.items()}
    return v


def values_equal(a: Any, b: Any) -> bool:
    """Equality under DESIGN.md rules: 25 == 25.0, True != 1, strings equal after NFC."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) or _is_number(b):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    return bool(normalize(a) == normalize(b))


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def _missing(self) -> MatchResult:
        return MatchResult(ok=False, reason="value is absent")


class Eq(_Base):
    """``eq``: equal to ``value`` (numeric for numbers, NFC for strings, deep for lists/objects)."""

    kind: Literal["eq"] = "eq"
    eq: JSONValue

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        if not present:
            return self._missing()
        ok = values_equal(value, self.eq)
        return MatchResult(ok=ok, reason=f"{_short(value)} {'==' if ok else '!='} {_short(self.eq)}")


class Present(_Base):
    """``present``: true requires the field to exist (any value, null included); false requires absence."""

    kind: Literal["present"] = "present"
    present: bool = True

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        ok = present == self.present
        return MatchResult(ok=ok, reason="present" if present else "absent")


class OneOf(_Base):
    """``one_of``: equal (as ``eq``) to one of the listed values."""

    kind: Literal["one_of"] = "one_of"
    one_of: list[JSONValue] = Field(min_length=1)

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        if not present:
            return self._missing()
        ok = any(values_equal(value, c) for c in self.one_of)
        return MatchResult(ok=ok, reason=f"{_short(value)} {'in' if ok else 'not in'} {_short(self.one_of)}")


class RangeBounds(_Base):
    """Inclusive numeric bounds; either may be omitted, not both."""

    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _check(self) -> RangeBounds:
        if self.min is None and self.max is None:
            raise ValueError("range needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"range min {self.min} is greater than max {self.max}")
        return self


class Range(_Base):
    """``range``: a number (not a bool, not a numeric string) within inclusive ``min``..``max``."""

    kind: Literal["range"] = "range"
    range: RangeBounds

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        if not present:
            return self._missing()
        if not _is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
            return MatchResult(ok=False, reason=f"{_short(value)} is not a finite number")
        lo, hi = self.range.min, self.range.max
        ok = (lo is None or value >= lo) and (hi is None or value <= hi)
        return MatchResult(ok=ok, reason=f"{value} {'within' if ok else 'outside'} [{lo}, {hi}]")


class Regex(_Base):
    """``regex``: RE2 pattern (linear time); full match of the NFC string unless ``full`` is false.

    Raises ``ValueError`` at construction when RE2 cannot compile the pattern.
    """

    kind: Literal["regex"] = "regex"
    regex: str = Field(max_length=2000)
    full: bool = True
    ignore_case: bool = False

    @model_validator(mode="after")
    def _compile(self) -> Regex:
        self._compiled()
        return self

    def _compiled(self) -> Any:
        opts = re2.Options()
        opts.case_sensitive = not self.ignore_case
        opts.log_errors = False
        try:
            return re2.compile(unicodedata.normalize("NFC", self.regex), opts)
        except re2.error as e:
            raise ValueError(f"RE2 cannot compile {self.regex!r}: {e}") from None

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        if not present:
            return self._missing()
        if not isinstance(value, str):
            return MatchResult(ok=False, reason=f"{_short(value)} is not a string")
        pat = self._compiled()
        s = unicodedata.normalize("NFC", value)
        ok = (pat.fullmatch(s) if self.full else pat.search(s)) is not None
        return MatchResult(
            ok=ok, reason=f"{_short(value)} {'matches' if ok else 'does not match'} /{self.regex}/"
        )


class Contains(_Base):
    """``contains``: the value is a list holding an equal item for every listed item. With
    ``exactly: true`` the list holds those items and nothing else, in any order, each as often as
    listed (multiset equality: an argument whose order carries nothing, as tau2-bench sorts the
    item lists of an exchange before storing them)."""

    kind: Literal["contains"] = "contains"
    contains: list[JSONValue]
    exactly: bool = False

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        if not present:
            return self._missing()
        if not isinstance(value, list):
            return MatchResult(ok=False, reason=f"{_short(value)} is not a list")
        if self.exactly:
            rest = list(value)
            for c in self.contains:
                hit = next((i for i, v in enumerate(rest) if values_equal(v, c)), None)
                if hit is None:
                    return MatchResult(ok=False, reason=f"list lacks {_short(c)} (as often as listed)")
                rest.pop(hit)
            if rest:
                return MatchResult(ok=False, reason=f"list also holds {_short(rest)}")
            return MatchResult(ok=True, reason=f"list holds exactly {_short(self.contains)} in some order")
        missing = [c for c in self.contains if not any(values_equal(v, c) for v in value)]
        if missing:
            return MatchResult(ok=False, reason=f"list lacks {_short(missing)}")
        return MatchResult(ok=True, reason=f"list contains {_short(self.contains)}")


class Subset(_Base):
    """``subset``: the value is an object whose listed keys each satisfy their matcher (recursive)."""

    kind: Literal["subset"] = "subset"
    subset: dict[str, Matcher]

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        if not present:
            return self._missing()
        if not isinstance(value, dict):
            return MatchResult(ok=False, reason=f"{_short(value)} is not an object")
        res = match_fields(self.subset, value)
        return MatchResult(ok=res.ok, reason=res.reason)


class AllOf(_Base):
    """``all``: every listed matcher holds."""

    kind: Literal["all"] = "all"
    all_: list[Matcher] = Field(alias="all", min_length=1)

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        for m in self.all_:
            r = m.evaluate(value, present)
            if not r.ok:
                return MatchResult(ok=False, reason=f"all: {r.reason}")
        return MatchResult(ok=True, reason="all matched")


class AnyOf(_Base):
    """``any``: at least one listed matcher holds."""

    kind: Literal["any"] = "any"
    any_: list[Matcher] = Field(alias="any", min_length=1)

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        reasons = []
        for m in self.any_:
            r = m.evaluate(value, present)
            if r.ok:
                return MatchResult(ok=True, reason=f"any: {r.reason}")
            reasons.append(r.reason)
        return MatchResult(ok=False, reason="none matched: " + "; ".join(reasons))


class Not(_Base):
    """``not``: the inner matcher does not hold."""

    kind: Literal["not"] = "not"
    not_: Matcher = Field(alias="not")

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:
        r = self.not_.evaluate(value, present)
        return MatchResult(ok=not r.ok, reason=f"not ({r.reason})")


MATCHER_KEYS: dict[str, type[_Base]] = {
    "eq": Eq,
    "present": Present,
    "one_of": OneOf,
    "range": Range,
    "regex": Regex,
    "contains": Contains,
    "subset": Subset,
    "all": AllOf,
    "any": AnyOf,
    "not": Not,
}
_OPTION_KEYS = {"full", "ignore_case", "exactly"}


def _tag(v: Any) -> str:
    if isinstance(v, dict):
        if "kind" in v and v["kind"] in MATCHER_KEYS:
            return str(v["kind"])
        keys = [k for k in v if k in MATCHER_KEYS]
        if len(keys) == 1 and set(v) - {keys[0]} <= _OPTION_KEYS:
            return keys[0]
        return "invalid"
    if isinstance(v, BaseModel):
        return str(getattr(v, "kind", "invalid"))
    return "eq"


def _pre(v: Any) -> Any:
    """Bare values become ``{eq: value}``; a dict must name exactly one matcher kind."""
    if isinstance(v, BaseModel):
        return v
    if not isinstance(v, dict):
        return {"eq": v}
    return v


class _Invalid(_Base):
    kind: Literal["invalid"] = "invalid"

    @model_validator(mode="before")
    @classmethod
    def _fail(cls, v: Any) -> Any:
        keys = sorted(v) if isinstance(v, dict) else []
        raise ValueError(
            f"a matcher is one key of {sorted(MATCHER_KEYS)} (or a bare value for eq); got keys {keys}"
        )

    def evaluate(self, value: Any, present: bool = True) -> MatchResult:  # pragma: no cover
        raise AssertionError


Matcher = Annotated[
    Union[  # noqa: UP007
        Annotated[Eq, Tag("eq")],
        Annotated[Present, Tag("present")],
        Annotated[OneOf, Tag("one_of")],
        Annotated[Range, Tag("range")],
        Annotated[Regex, Tag("regex")],
        Annotated[Contains, Tag("contains")],
        Annotated[Subset, Tag("subset")],
        Annotated[AllOf, Tag("all")],
        Annotated[AnyOf, Tag("any")],
        Annotated[Not, Tag("not")],
        Annotated[_Invalid, Tag("invalid")],
    ],
    Discriminator(_tag),
    BeforeValidator(_pre),
]
"""Any matcher kind; parse with pydantic (``TypeAdapter(Matcher)``) from the on-disk forms above."""

for _m in (Subset, AllOf, AnyOf, Not):
    _m.model_rebuild()


class FieldsResult(BaseModel):
    """Result of matching named fields of an object: overall ``ok``, per-field results, a reason."""

    ok: bool
    fields: dict[str, MatchResult]
    reason: str


def match_fields(matchers: dict[str, Any], obj: dict[str, Any]) -> FieldsResult:
    """Match each named field of ``obj`` against its matcher; unnamed fields are ignored.

    Field names may be dotted paths (``patient.dob``) into nested objects.
    """
    results: dict[str, MatchResult] = {}
    for name, m in matchers.items():
        present, value = lookup_path(obj, name)
        results[name] = m.evaluate(value, present)
    bad = [f"{k}: {r.reason}" for k, r in results.items() if not r.ok]
    return FieldsResult(ok=not bad, fields=results, reason="; ".join(bad) if bad else "all fields matched")


def lookup_path(obj: Any, path: str) -> tuple[bool, Any]:
    """Follow a dotted path (``a.b.0.c``) through objects and lists; returns (present, value)."""
    if isinstance(obj, dict) and path in obj:
        return True, obj[path]
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return False, None
    return True, cur


def iter_matchers(m: Any) -> Any:
    """Yield ``m`` and every matcher nested in it (for audits)."""
    yield m
    if isinstance(m, Subset):
        for x in m.subset.values():
            yield from iter_matchers(x)
    elif isinstance(m, AllOf):
        for x in m.all_:
            yield from iter_matchers(x)
    elif isinstance(m, AnyOf):
        for x in m.any_:
            yield from iter_matchers(x)
    elif isinstance(m, Not):
        yield from iter_matchers(m.not_)
