"""Hypothesis fuzz of loading and validation: malformed YAML, wrong types, huge values.

The contract: ``validate_path`` never raises on bad content (only ``OSError`` for an unreadable
path), and every problem carries a documented code; ``internal`` (an audit that crashed) never
appears.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callbench.bundle.validate import audits as validate
from callbench.bundle.validate.audits import PROBLEM_CODES, validate_path

from .conftest import AGENT, BOOKING, MINIMAL

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**300, max_value=10**4000),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["${caller.name}", "${state.account.id}", "${state.nope}", "(?=x)", "2026-02-30",
                     "evening", "", "x" * 60_000]),
)
_keys = st.one_of(st.text(max_size=8), st.sampled_from(
    ["eq", "regex", "range", "all", "not", "subset", "min", "max", "turn", "step"]))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=20,
)


def _paths(v: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*prefix, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*prefix, i))
    return out


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    cur = data
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return data


def _check(root: Path) -> None:
    _, problems = validate_path(root)
    for p in problems:
        assert p.code in PROBLEM_CODES, p
        assert p.code != "internal", p
        assert isinstance(p.file, str) and isinstance(p.message, str) and p.message


def _fresh() -> tuple[tempfile.TemporaryDirectory[str], Path]:
    tmp = tempfile.TemporaryDirectory()
    root = Path(tmp.name) / "b"
    shutil.copytree(MINIMAL, root)
    return tmp, root


def _dump(data: Any) -> str:
    try:
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    except (ValueError, yaml.YAMLError):  # e.g. an integer too long for str()
        return "a: 1\n"


@SETTINGS
@given(st.data())
def test_fuzz_scenario_field_replaced(data: st.DataObject) -> None:
    tmp, root = _fresh()
    with tmp:
        f = root / "agents" / AGENT / "scenarios" / f"{BOOKING}.yaml"
        doc = yaml.safe_load(f.read_text())
        path = data.draw(st.sampled_from(_paths(doc)))
        doc = _replace(doc, path, data.draw(_values))
        f.write_text(_dump(doc))
        _check(root)


@SETTINGS
@given(st.data())
def test_fuzz_agent_field_replaced(data: st.DataObject) -> None:
    tmp, root = _fresh()
    with tmp:
        f = root / "agents" / AGENT / "agent.yaml"
        doc = yaml.safe_load(f.read_text())
        path = data.draw(st.sampled_from(_paths(doc)))
        doc = _replace(doc, path, data.draw(_values))
        f.write_text(_dump(doc))
        _check(root)


@SETTINGS
@given(st.data())
def test_fuzz_scenario_as_json_with_deleted_field(data: st.DataObject) -> None:
    tmp, root = _fresh()
    with tmp:
        f = root / "agents" / AGENT / "scenarios" / f"{BOOKING}.yaml"
        doc = yaml.safe_load(f.read_text())
        path = data.draw(st.sampled_from([p for p in _paths(doc) if p]))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        del parent[path[-1]]
        f.unlink()
        f.with_suffix(".json").write_text(json.dumps(doc, ensure_ascii=False))
        _check(root)


_yamlish = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.sampled_from(list("{}[]:-,&*!|>'\"#%@` \n\tab01?")), max_size=200),
    st.builds(lambda a, b: a + b, st.sampled_from(["id: x\n", "- ", "&a [*a]\n", "!!binary ", "? [a]\n: b\n",
                                                  "x: !!set {a}\n", "x: 2026-01-01\n", "<<: *a\n"]),
              st.text(max_size=50)),
)


@SETTINGS
@given(_yamlish, st.sampled_from(["bundle.yaml", "agent.yaml", "scenario", "prompt.md"]))
def test_fuzz_malformed_text(text: str, which: str) -> None:
    tmp, root = _fresh()
    with tmp:
        target = {
            "bundle.yaml": root / "bundle.yaml",
            "agent.yaml": root / "agents" / AGENT / "agent.yaml",
            "scenario": root / "agents" / AGENT / "scenarios" / f"{BOOKING}.yaml",
            "prompt.md": root / "agents" / AGENT / "prompt.md",
        }[which]
        target.write_text(text)
        _check(root)


@SETTINGS
@given(st.binary(max_size=300))
def test_fuzz_binary_scenario(blob: bytes) -> None:
    tmp, root = _fresh()
    with tmp:
        (root / "agents" / AGENT / "scenarios" / f"{BOOKING}.yaml").write_bytes(blob)
        _check(root)


def test_documented_codes_are_in_the_docstring() -> None:
    assert validate.__doc__ is not None
    missing = [c for c in PROBLEM_CODES if f"``{c}``" not in validate.__doc__]
    assert missing == []
