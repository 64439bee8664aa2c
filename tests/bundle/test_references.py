"""Fixture references resolved (callbench.bundle.references.resolve): the dotted path of an
unresolved reference is built only on the way out, the same as before."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle.matchers import lookup_path
from callbench.bundle.references import REF, ReferenceError_, resolve

FACTS = {"name": "Asha", "age": 41, "ids": ["PK-1"]}
STATE = {"account": {"id": "AC-9", "balance": 12.5}}


def _eager(value: Any, where: str = "") -> Any:
    """The resolver as it was: every value's dotted path built as it walks (the reference)."""
    if isinstance(value, str):
        def look(kind: str, path: str) -> Any:
            present, v = lookup_path(FACTS if kind == "caller" else STATE, path)
            if not present:
                raise ReferenceError_(f"${{{kind}.{path}}}", where)
            return v

        m = REF.fullmatch(value)
        if m:
            return look(m.group(1), m.group(2))

        def sub(mm: re.Match[str]) -> str:
            v = look(mm.group(1), mm.group(2))
            return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

        return REF.sub(sub, value)
    if isinstance(value, list):
        return [_eager(x, f"{where}.{i}".strip(".")) for i, x in enumerate(value)]
    if isinstance(value, dict):
        return {k: _eager(x, f"{where}.{k}".strip(".")) for k, x in value.items()}
    return value


_leaf = st.one_of(st.none(), st.integers(), st.sampled_from([
    "${caller.name}", "${caller.age}", "${state.account.balance}", "id ${state.account.id}!",
    "${caller.nope}", "x ${state.account.nope} y", "${caller.ids.0}", "plain", "$ {caller.name}", ""]))
_values = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "", ".b", "c."]), inner, max_size=3)),
    max_leaves=12)


def _outcome(fn: Any, value: Any, where: str) -> Any:
    try:
        return "ok", fn(value, where)
    except ReferenceError_ as e:
        return "error", e.ref, e.where, str(e)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_values, st.sampled_from(["", "fixtures.f.queue.0", "x."]))
def test_resolve_is_the_eager_resolver(value: Any, where: str) -> None:
    """Same values, and for an unresolved reference the same reference and dotted path."""
    assert _outcome(lambda v, w: resolve(v, FACTS, STATE, w), value, where) == _outcome(_eager, value, where)


def test_unresolved_reference_names_its_path() -> None:
    with pytest.raises(ReferenceError_) as info:
        resolve({"queue": [{"args": {"who": "${caller.nope}"}}]}, FACTS, STATE, "fixtures.f")
    assert info.value.where == "fixtures.f.queue.0.args.who" and info.value.ref == "${caller.nope}"
    assert resolve({"n": "${caller.age}", "t": "id ${state.account.id}"}, FACTS, STATE) == {
        "n": 41, "t": "id AC-9"}
