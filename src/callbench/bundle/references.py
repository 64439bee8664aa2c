"""Fixture references: ``${caller.<fact>}`` and ``${state.<path>}`` (DESIGN.md "Bundle on disk").

A string that is exactly one reference takes the referenced value with its type (a number stays a
number); a reference inside a longer string is interpolated as text. References resolve against
the scenario's caller known facts and hidden state; an unresolved reference raises
:class:`ReferenceError_` naming it (the validator reports it as ``ref.unresolved``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from callbench.bundle.matchers import lookup_path

REF = re.compile(r"\$\{(caller|state)\.([^${}\s]{1,200})\}")


class ReferenceError_(ValueError):
    """A ``${...}`` reference that does not resolve; ``ref`` is the reference text."""

    def __init__(self, ref: str, where: str = "") -> None:
        self.ref = ref
        self.where = where
        super().__init__(f"reference {ref} does not resolve")


def _lookup(kind: str, path: str, caller_facts: dict[str, Any], state: dict[str, Any]) -> Any:
    src = caller_facts if kind == "caller" else state
    present, value = lookup_path(src, path)
    if not present:
        raise ReferenceError_(f"${{{kind}.{path}}}")
    return value


def resolve(value: Any, caller_facts: dict[str, Any], state: dict[str, Any], where: str = "") -> Any:
    """Return ``value`` with every reference replaced, recursively through lists and objects.

    Works on plain JSON values and on pydantic models (their ``model_dump(by_alias=True)``).
    Raises :class:`ReferenceError_` (with ``where`` set to the dotted path) on the first unresolved one.
    The dotted path is built only for that error, not for every value walked.
    """
    try:
        return _resolve(value, caller_facts, state)
    except _Unresolved as e:
        for part in reversed(e.parts):  # outermost first, each joined as it always was
            where = f"{where}.{part}".strip(".")
        raise ReferenceError_(e.ref, where) from None


class _Unresolved(Exception):
    """An unresolved reference on its way out of :func:`_resolve`; ``parts``: the keys and indices
    from the failing string outwards."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.parts: list[Any] = []


def _resolve(value: Any, caller_facts: dict[str, Any], state: dict[str, Any]) -> Any:
    if isinstance(value, str):
        if "${" not in value:  # no reference can match
            return value
        m = REF.fullmatch(value)
        try:
            if m:
                return _lookup(m.group(1), m.group(2), caller_facts, state)

            def sub(mm: re.Match[str]) -> str:
                v = _lookup(mm.group(1), mm.group(2), caller_facts, state)
                return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

            return REF.sub(sub, value)
        except ReferenceError_ as e:
            raise _Unresolved(e.ref) from None
    if isinstance(value, list):
        out = []
        for i, x in enumerate(value):
            try:
                out.append(_resolve(x, caller_facts, state))
            except _Unresolved as e:
                e.parts.append(i)
                raise
        return out
    if isinstance(value, dict):
        got = {}
        for k, x in value.items():
            try:
                got[k] = _resolve(x, caller_facts, state)
            except _Unresolved as e:
                e.parts.append(k)
                raise
        return got
    if hasattr(value, "model_dump"):
        return _resolve(value.model_dump(by_alias=True, exclude_defaults=False), caller_facts, state)
    return value


def find_references(value: Any, where: str = "") -> list[tuple[str, str]]:
    """List (dotted path, reference text) for every reference inside ``value``."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(by_alias=True)
    out: list[tuple[str, str]] = []
    if isinstance(value, str):
        out.extend((where, m.group(0)) for m in REF.finditer(value))
    elif isinstance(value, list):
        for i, x in enumerate(value):
            out.extend(find_references(x, f"{where}.{i}".strip(".")))
    elif isinstance(value, dict):
        for k, x in value.items():
            out.extend(find_references(x, f"{where}.{k}".strip(".")))
    return out
