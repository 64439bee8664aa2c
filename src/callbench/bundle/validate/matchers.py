"""Validator audit: matchers against the tool's JSON Schema (paper: "matcher types must agree with
the tool schemas"; among them: a range on a string parameter, a one_of value of the wrong type,
a matcher on a parameter the tool lacks).

:class:`SchemaView` answers the few questions the audit asks of a parameter schema (its JSON types,
its allowed values, the sub-schema of a field), following local ``$ref``s and combining
``allOf``/``anyOf``/``oneOf``. When a schema does not say, the audit stays silent (no false alarms).
"""

from __future__ import annotations

from typing import Any

from callbench.bundle.matchers import (
    AllOf,
    AnyOf,
    Contains,
    Eq,
    Not,
    OneOf,
    Range,
    Regex,
    Subset,
    values_equal,
)
from callbench.bundle.validate.tools import Report

_MAX_REF_HOPS = 32


class SchemaView:
    """A read-only view of one sub-schema of a tool's parameters, following local ``$ref``s and
    combining ``allOf`` / ``anyOf`` / ``oneOf`` for the questions the matcher audit asks."""

    def __init__(self, schema: Any, root: Any) -> None:
        self.root = root
        self.schema = self._deref(schema)

    def _deref(self, s: Any) -> Any:
        for _ in range(_MAX_REF_HOPS):
            if not (isinstance(s, dict) and isinstance(s.get("$ref"), str) and s["$ref"].startswith("#")):
                return s
            target: Any = self.root
            for part in s["$ref"][1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                    target = target[int(part)]
                else:
                    return {}
            s = target
        return {}

    def _branches(self) -> list[SchemaView]:
        s = self.schema if isinstance(self.schema, dict) else {}
        out: list[SchemaView] = []
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list):
                out.extend(SchemaView(b, self.root) for b in s[key])
        return out

    def types(self) -> set[str] | None:
        """JSON types a value may have, or None when the schema does not say."""
        s = self.schema if isinstance(self.schema, dict) else {}
        t = s.get("type")
        found: set[str] | None = None
        if isinstance(t, str):
            found = {t}
        elif isinstance(t, list) and all(isinstance(x, str) for x in t):
            found = set(t)
        branches = self._branches()
        if found is None and branches:
            union: set[str] = set()
            for b in branches:
                bt = b.types()
                if bt is None:
                    return None
                union |= bt
            found = union
        for sub in s.get("allOf", []) if isinstance(s.get("allOf"), list) else []:
            st = SchemaView(sub, self.root).types()
            if st is not None:
                found = st if found is None else found & _widen(st)
        if found is None:
            enum = self.enum()
            if enum is not None:
                found = set().union(*(json_types(v) for v in enum)) if enum else set()
        return found

    def enum(self) -> list[Any] | None:
        """Allowed values (``enum`` or ``const``), or None when any value of the type is allowed."""
        s = self.schema if isinstance(self.schema, dict) else {}
        if "const" in s:
            return [s["const"]]
        if isinstance(s.get("enum"), list):
            return list(s["enum"])
        return None

    def child(self, part: str) -> tuple[str, SchemaView | None]:
        """Sub-schema of a property or list index: ("ok", view), ("open", None) when the schema
        allows it without describing it, or ("unknown", None) when the schema has no such field."""
        s = self.schema if isinstance(self.schema, dict) else {}
        props = s.get("properties")
        if isinstance(props, dict) and part in props:
            return "ok", SchemaView(props[part], self.root)
        pattern_props = s.get("patternProperties")
        if isinstance(pattern_props, dict) and pattern_props:
            return "open", None
        items = s.get("items")
        if part.isdigit() and (isinstance(items, dict) or isinstance(s.get("prefixItems"), list)):
            prefix = s.get("prefixItems")
            if isinstance(prefix, list) and int(part) < len(prefix):
                return "ok", SchemaView(prefix[int(part)], self.root)
            return ("ok", SchemaView(items, self.root)) if isinstance(items, dict) else ("open", None)
        for b in self._branches():
            status, view = b.child(part)
            if status != "unknown":
                return status, view
        for sub in s.get("allOf", []) if isinstance(s.get("allOf"), list) else []:
            status, view = SchemaView(sub, self.root).child(part)
            if status == "ok":
                return status, view
        extra = s.get("additionalProperties")
        if extra is False:
            return "unknown", None
        if isinstance(extra, dict):
            return "ok", SchemaView(extra, self.root)
        if extra is True or not isinstance(props, dict):
            return "open", None
        return "unknown", None  # properties declared, the field is not among them

    def items_view(self) -> SchemaView | None:
        s = self.schema if isinstance(self.schema, dict) else {}
        return SchemaView(s["items"], self.root) if isinstance(s.get("items"), dict) else None


def _widen(types: set[str]) -> set[str]:
    return types | ({"integer"} if "number" in types else set())


def json_types(v: Any) -> set[str]:
    """JSON Schema types a Python JSON value satisfies (an integral float is also an integer)."""
    if isinstance(v, bool):
        return {"boolean"}
    if isinstance(v, int):
        return {"integer", "number"}
    if isinstance(v, float):
        return {"integer", "number"} if v.is_integer() else {"number"}
    if isinstance(v, str):
        return {"string"}
    if v is None:
        return {"null"}
    if isinstance(v, list):
        return {"array"}
    return {"object"}


def view_at(root_view: SchemaView, name: str) -> tuple[str, SchemaView | None]:
    """Follow a matcher field name (a key, or a dotted path ``a.b.0``) through a schema."""
    status, view = root_view.child(name)
    if status == "ok" or "." not in name:
        return status, view
    cur: SchemaView | None = root_view
    for part in name.split("."):
        if cur is None:
            return "open", None
        status, cur = cur.child(part)
        if status != "ok":
            return status, None
    return "ok", cur


# ---------------------------------------------------------------- matchers vs schema


def _kind(types: set[str]) -> str:
    return " or ".join(sorted(types)) if types else "no type"


def _type_name(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    return "number" if isinstance(v, float) else sorted(json_types(v))[0]


def _check_value(v: Any, view: SchemaView, what: str, path: str, report: Report) -> None:
    types = view.types()
    if types is not None and not (json_types(v) & _widen(types)):
        report(path, "matcher.type",
               f"{what} {v!r} is {_type_name(v)}, but the parameter is {_kind(types)}"[:400])
        return
    enum = view.enum()
    if enum is not None and not any(values_equal(v, e) for e in enum):
        report(path, "matcher.enum", f"{what} {v!r} is not one of the allowed values {enum!r}"[:400])


def audit_matcher(m: Any, view: SchemaView | None, path: str, report: Report) -> None:
    """Check one (resolved) matcher against the parameter schema it applies to.

    Codes: ``matcher.type`` (range on a non-number, regex on a non-string, contains on a non-array,
    subset on a non-object, an eq/one_of/contains value of the wrong type), ``matcher.enum`` (an
    eq/one_of value outside the parameter's ``enum``/``const``), ``matcher.param_unknown`` (a subset
    key the object schema does not have). ``all``/``any``/``not`` are checked member by member.
    """
    if view is None:
        return
    types = view.types()
    if isinstance(m, Eq):
        _check_value(m.eq, view, "eq value", f"{path}.eq", report)
    elif isinstance(m, OneOf):
        for i, v in enumerate(m.one_of):
            _check_value(v, view, "one_of value", f"{path}.one_of.{i}", report)
    elif isinstance(m, Range):
        if types is not None and not types & {"number", "integer"}:
            report(f"{path}.range", "matcher.type", f"range matcher on a parameter of type {_kind(types)}")
    elif isinstance(m, Regex):
        if types is not None and "string" not in types:
            report(f"{path}.regex", "matcher.type", f"regex matcher on a parameter of type {_kind(types)}")
    elif isinstance(m, Contains):
        if types is not None and "array" not in types:
            report(f"{path}.contains", "matcher.type",
                   f"contains matcher on a parameter of type {_kind(types)}")
            return
        iv = view.items_view()
        if iv is not None:
            for i, v in enumerate(m.contains):
                _check_value(v, iv, "contains item", f"{path}.contains.{i}", report)
    elif isinstance(m, Subset):
        if types is not None and "object" not in types:
            report(f"{path}.subset", "matcher.type", f"subset matcher on a parameter of type {_kind(types)}")
            return
        audit_fields(m.subset, view, f"{path}.subset", report)
    elif isinstance(m, AllOf):
        for i, x in enumerate(m.all_):
            audit_matcher(x, view, f"{path}.all.{i}", report)
    elif isinstance(m, AnyOf):
        for i, x in enumerate(m.any_):
            audit_matcher(x, view, f"{path}.any.{i}", report)
    elif isinstance(m, Not):
        audit_matcher(m.not_, view, f"{path}.not", report)


def audit_fields(matchers: dict[str, Any], view: SchemaView, path: str, report: Report) -> None:
    """Check a field -> matcher mapping against an object schema (see :func:`audit_matcher`)."""
    for name, m in matchers.items():
        status, sub = view_at(view, name)
        if status == "unknown":
            report(f"{path}.{name}", "matcher.param_unknown", f"no parameter {name!r} in the tool's schema")
            continue
        audit_matcher(m, sub, f"{path}.{name}", report)


