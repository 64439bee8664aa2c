"""JSON Schema export of the bundle file types, and the composition summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from rich.console import Console

from callbench.bundle.inspect import Spread, composition, composition_tables, shared_prefix_chars
from callbench.bundle.render import render_instructions
from callbench.bundle.schema import DRAFT_2020_12, bundle_schemas, write_schemas
from callbench.bundle.validate.audits import load_bundle

from .conftest import AGENT, BOOKING, CANCEL, MINIMAL, MiniBundle

# ------------------------------------------------------------------ schema export


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(bundle_schemas()[name])


def test_schemas_are_valid_draft_2020_12() -> None:
    schemas = bundle_schemas()
    assert sorted(schemas) == ["agent.schema.json", "bundle.schema.json", "provenance.schema.json",
                              "scenario.schema.json"]
    for name, s in schemas.items():
        Draft202012Validator.check_schema(s)
        assert s["$schema"] == DRAFT_2020_12
        assert s["$id"].endswith(name)
        assert "_Invalid" not in json.dumps(s)


def test_schemas_accept_the_minimal_bundle() -> None:
    agent_dir = MINIMAL / "agents" / AGENT
    meta = yaml.safe_load((MINIMAL / "bundle.yaml").read_text())
    assert list(_validator("bundle.schema.json").iter_errors(meta)) == []
    agent = yaml.safe_load((agent_dir / "agent.yaml").read_text())
    assert list(_validator("agent.schema.json").iter_errors(agent)) == []
    for sid in (BOOKING, CANCEL):
        data = yaml.safe_load((agent_dir / "scenarios" / f"{sid}.yaml").read_text())
        assert list(_validator("scenario.schema.json").iter_errors(data)) == []


def _scenario() -> dict[str, Any]:
    path = MINIMAL / "agents" / AGENT / "scenarios" / f"{BOOKING}.yaml"
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


@pytest.mark.parametrize(
    ("matcher", "valid"),
    [
        ("evening", True), (30, True), (None, True), (["a", "b"], True), ({"eq": {"a": 1}}, True),
        ({"regex": "a.*", "full": False, "ignore_case": True}, True), ({"range": {"min": 1}}, True),
        ({"all": [{"contains": ["x"]}, {"not": {"present": True}}]}, True),
        ({"subset": {"a.b": {"one_of": [1, 2]}}}, True),
        ({"shift": "evening"}, False), ({"eq": 1, "one_of": [1]}, False), ({"all": []}, False),
        ({"regex": "a", "extra": 1}, False), ({}, False),
    ],
)
def test_matcher_schema_matches_the_parser(matcher: Any, valid: bool) -> None:
    data = _scenario()
    data["action_checks"][0]["args"] = {"account_number": matcher}
    errors = list(_validator("scenario.schema.json").iter_errors(data))
    assert (errors == []) is valid, errors


def test_schema_rejects_wrong_fields() -> None:
    data = _scenario()
    data["difficulty"] = "easy"
    data["criteria"][0]["importance"] = 4
    data["brief"]["mood"] = "x"
    errors = _validator("scenario.schema.json").iter_errors(data)
    paths = sorted(".".join(map(str, e.absolute_path)) for e in errors)
    assert paths == ["brief", "criteria.0.importance", "difficulty"]


def test_schema_describes_applies_after() -> None:
    schema = bundle_schemas()["scenario.schema.json"]
    prop = schema["$defs"]["ActionCheck"]["properties"]["applies_after"]
    assert prop["type"] == "array" and prop["items"] == {"type": "string"} and prop["maxItems"] == 20
    assert "not applicable" in prop["description"]
    data = _scenario()
    data["action_checks"][2]["applies_after"] = ["verify"]
    assert list(_validator("scenario.schema.json").iter_errors(data)) == []
    data["action_checks"][2]["applies_after"] = "verify"
    errors = list(_validator("scenario.schema.json").iter_errors(data))
    assert [".".join(map(str, e.absolute_path)) for e in errors] == ["action_checks.2.applies_after"]


def test_write_schemas_atomically(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "schemas"
    written = write_schemas(out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["agent.schema.json", "bundle.schema.json", "provenance.schema.json",
                     "scenario.schema.json"]
    assert {p.name for p in written} == set(bundle_schemas())
    for p in written:
        assert json.loads(p.read_text()) == bundle_schemas()[p.name]
    write_schemas(out)  # overwrite in place, no temporary files left behind
    assert len(list(out.iterdir())) == 4


# ------------------------------------------------------------------ composition


def test_composition_of_the_minimal_bundle() -> None:
    b = load_bundle(MINIMAL)
    c = composition(b)
    assert (c.agents, c.active_agents, c.scenarios) == (1, 1, 2)
    assert c.by_language == {"en-IN": {"medium": 1, "hard": 0, "total": 1},
                             "hi-IN": {"medium": 0, "hard": 1, "total": 1}}
    assert c.by_difficulty == {"medium": 1, "hard": 1}
    assert c.domains == {"logistics": 1}
    assert c.tools_total == 4 and c.tools_per_agent == Spread(median=4.0, min=4, max=4)
    agent, first = b.scenario(CANCEL)  # the agent's first scenario by id
    n = len(render_instructions(agent, first))
    assert c.instruction_chars == Spread(median=float(n), min=n, max=n)
    assert c.agent_rows[0].instruction_chars == n and c.agent_rows[0].call_ending_tools == 1
    assert c.content_hash == b.content_hash
    # The shared prefix ends where the two scenarios' documents first differ.
    a, b_ = (render_instructions(agent, s) for s in sorted(agent.scenarios, key=lambda s: s.id))
    k = c.agent_rows[0].shared_prefix_chars
    assert k is not None and 0 < k < n
    assert a[:k] == b_[:k] and a[k] != b_[k]


def test_shared_prefix_grows_when_the_variables_move_to_the_end(mb: MiniBundle) -> None:
    """With its call-specific lines in a final section the whole rest of the document is
    shared by every scenario (what a prompt cache reuses)."""
    path = mb.agent_dir / "prompt.md"
    text = path.read_text(encoding="utf-8")
    before = composition(load_bundle(mb.root)).agent_rows[0].shared_prefix_chars
    first = text.splitlines(keepends=True)
    variable_lines = [ln for ln in first if "{{" in ln and "agent_name" not in ln]
    static = "".join(ln for ln in first if ln not in variable_lines)
    path.write_text(static + "\n## Call context\n\n" + "".join(variable_lines), encoding="utf-8")
    b = load_bundle(mb.root)
    row = composition(b).agent_rows[0]
    assert before is not None and row.shared_prefix_chars is not None
    assert row.shared_prefix_chars > before
    assert row.shared_prefix_chars >= len(static)
    agent = b.agents[AGENT]
    assert shared_prefix_chars(agent) == row.shared_prefix_chars
    agent.scenarios = []
    assert shared_prefix_chars(agent) is None


def test_composition_counts_active_agents_only(mb: MiniBundle) -> None:
    other = mb.root / "agents" / "archive_desk"
    shutil.copytree(mb.agent_dir, other)
    shutil.rmtree(other / "scenarios")

    def archive(d: dict[str, Any]) -> None:
        d.update(id="archive_desk", active=False, domain="retail")
        d["tools"] = d["tools"][:1]
        d["call_ending_tools"] = []

    mb.edit(other / "agent.yaml", archive)
    c = composition(load_bundle(mb.root))
    assert (c.agents, c.active_agents, c.scenarios, c.tools_total) == (2, 1, 2, 4)
    assert c.domains == {"logistics": 1}
    rows = [(r.id, r.active, r.scenarios) for r in c.agent_rows]
    assert rows == [("archive_desk", False, 0), (AGENT, True, 2)]


def test_spread() -> None:
    assert Spread.of([]) == Spread()
    assert Spread.of([21658, 30834, 43969, 25000]) == Spread(median=27917.0, min=21658, max=43969)


def test_composition_tables_render() -> None:
    c = composition(load_bundle(MINIMAL))
    console = Console(record=True, width=140)
    for t in composition_tables(c):
        console.print(t)
    text = console.export_text()
    assert "2 (1 / 1)" in text and "4 (4-4, 4)" in text
    assert "en-IN" in text and "hi-IN" in text and AGENT in text
