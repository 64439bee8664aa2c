"""The fast YAML loading of bundle files (callbench.bundle.yaml_data.load_yaml):
the data PyYAML's own constructor builds, and PyYAML's own errors with their line numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle.loader import Problem, read_data_file
from callbench.bundle.yaml_data import YAML_LOADER, load_yaml


def _pyyaml(text: str) -> tuple[str, Any]:
    """("ok", data) or ("error", type and message) from PyYAML's own constructor."""
    try:
        return "ok", yaml.load(text, Loader=YAML_LOADER)  # a SafeLoader subclass: a safe load
    except Exception as e:
        return "error", (type(e).__name__, str(e))


def _ours(text: str) -> tuple[str, Any]:
    try:
        return "ok", load_yaml(text)
    except Exception as e:
        return "error", (type(e).__name__, str(e))


def _same(text: str) -> None:
    ours, theirs = _ours(text), _pyyaml(text)
    # repr: the same types (1 vs 1.0 vs True), NaN equal to itself, recursion shown as [...]
    assert repr(ours) == repr(theirs), text


_FRAGMENTS = [
    "a: 1\n", "b: &x {k: v, n: 2}\n", "c: *x\n", "d:\n  <<: *x\n  n: 3\n", "e:\n  <<: [*x, {m: 1}]\n",
    "f: [1, 2.5, yes, ~, 0x1f, 1:30, 1_000, .inf, -.NaN, 2026-03-14]\n", "g: !!str 12\n",
    "h: !!int '7'\n", "i: !!float 1\n", "j: =\n", "'=': 1\n", "k: !!set {x}\n", "l: !!omap [{a: 1}]\n",
    "m: !!int bad\n", "n: {<<: 5}\n", "o: {[1]: 2}\n", "1: one\n", "p: !!binary aGVsbG8=\n",
    "q: &r [1, *r]\n", "s: &t {u: *t}\n", "v: !custom x\n", "w: [a, b\n", "x: 'unclosed\n",
    "y: !!timestamp 2026-02-30\n", "z: {<<: [1]}\n", "aa: !!map x\n", "ab: !!str {a: 1}\n",
    "ac: \"\\u00e9\\\n  x\"\n", "ad: |\n  line one\n  line two\n", "ae: >-\n  folded\n  text\n",
    "af: {a: 1, a: 2}\n", "ag: &ag foo\n", "ah: *ag\n", "ai: *undefined\n", "yes: 1\n",
    "aj:\n  - &ak {x: 1}\n  - <<: *ak\n    y: 2\n", "---\nal: 1\n", "am: !!null ''\n",
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=0, max_size=6))
def test_load_yaml_is_pyyamls_load(parts: list[str]) -> None:
    """Documents mixing plain data, aliases, merge keys, special keys and tags, recursive nodes,
    and every kind of error: the same data, or the same error message, as PyYAML's constructor."""
    _same("".join(parts))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(),
              st.sampled_from(["yes", "off", "~", "0x1f", "1:30", "1_0", ".inf", "<<", "=", "2026-03-14"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20), st.booleans(), st.sampled_from([None, '"', "'"]))
def test_load_yaml_round_trips_like_pyyaml(data: object, flow: bool, style: str | None) -> None:
    _same(yaml.safe_dump(data, default_flow_style=flow, default_style=style, allow_unicode=True))


def test_aliases_share_one_object_and_bombs_stay_small() -> None:
    """An alias gives the very object of its anchor (as PyYAML): a billion-laughs file is built in
    linear time and memory; the loader's node count stops it afterwards."""
    data = load_yaml("a: &x [1, 2]\nb: *x\nc:\n  <<: {k: v}\n  d: 1\n")
    assert data["a"] is data["b"] and data["c"] == {"k": "v", "d": 1}
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 30)]
    bomb = load_yaml("\n".join(lines))
    assert bomb["a29"][0] is bomb["a28"]


@pytest.mark.parametrize(("text", "where"), [
    ("id: x\nbrief:\n  context: [a, b\n", "at line 4, column 1"),
    ("id: x\nplan:\n  - a\n  b: 1\n", "at line 4, column 3"),
    ("id: x\nx: 'open\n", "at line 3, column 1"),
    ("id: x\nn: {<<: 5}\n", "at line 2, column 9"),
    ("id: x\nm: !!int bad\n", "invalid value"),
])
def test_errors_keep_their_line(tmp_path: Path, text: str, where: str) -> None:
    """A bundle file's YAML error names its line and column (PyYAML's marks), as before the fast
    loading: losing the marks would fail here."""
    f = tmp_path / "s.yaml"
    f.write_text(text, encoding="utf-8")
    problems: list[Problem] = []
    assert read_data_file(tmp_path, f, problems) is None
    assert len(problems) == 1 and problems[0].file == "s.yaml" and problems[0].code == "parse"
    assert where in problems[0].message, problems[0].message


_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3),
              st.binary(max_size=2), st.just(frozenset({1})), st.tuples(st.integers())),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(), st.booleans()), inner, max_size=4)),
    max_leaves=30)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_values, st.integers(1, 6), st.integers(1, 40))
def test_quick_json_data_check_agrees_with_the_walk(data: Any, depth: int, nodes: int) -> None:
    """The quick check (no paths) finds a problem exactly when the walk that names its place does:
    keys, value types, depth and the count of values, at small limits so every limit is reached."""
    import callbench.bundle.loader as loader_module

    saved = loader_module.MAX_DEPTH, loader_module.MAX_NODES
    loader_module.MAX_DEPTH, loader_module.MAX_NODES = depth, nodes
    try:
        assert loader_module._is_json_data(data) is (
            loader_module._json_data_walk(data) is None)
    finally:
        loader_module.MAX_DEPTH, loader_module.MAX_NODES = saved


def test_quick_json_data_check_on_shared_and_recursive_values() -> None:
    """Each use of a shared value counts; a value holding itself is too deep, never a hang."""
    import callbench.bundle.loader as loader_module

    loop: list[Any] = []
    loop.append(loop)
    assert not loader_module._is_json_data(loop)
    assert loader_module.json_data_problem(loop) == (
        "size.depth", f"nested deeper than {loader_module.MAX_DEPTH} levels at " + ".".join(["0"] * 65))
    shared = ["x"] * 1000
    assert loader_module._is_json_data([shared] * 999)
    assert not loader_module._is_json_data([shared] * 1000)  # 1 + 1000 * 1001 values
