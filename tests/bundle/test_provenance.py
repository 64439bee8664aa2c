"""The provenance file: validate checks its hashes and coverage; ``callbench provenance --update``
keeps it in step."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from callbench.bundle.provenance import Generation, Review, audit_provenance, update_provenance
from callbench.bundle.schema import bundle_schemas
from callbench.cli import app

from .conftest import AGENT, BOOKING, CANCEL, MiniBundle

runner = CliRunner()
PROV = "provenance.yaml"


def _files() -> dict[str, str]:
    return {sid: f"agents/{AGENT}/scenarios/{sid}.yaml" for sid in (BOOKING, CANCEL)}


def _record(mb: MiniBundle) -> None:
    update_provenance(mb.root, _files(), made="hand_authored", authors=["A. Author"],
                      review=Review(status="reviewed", by=["R. Viewer"], date="2026-12-01"))


def test_no_file_no_problem(mb: MiniBundle) -> None:
    assert mb.problems() == []


def test_update_records_every_scenario_at_its_hash(mb: MiniBundle) -> None:
    _record(mb)
    data = yaml.safe_load((mb.root / PROV).read_text(encoding="utf-8"))
    entry = data["scenarios"][BOOKING]
    want = hashlib.sha256(mb.scenario_file().read_bytes()).hexdigest()
    assert entry["sha256"] == want and entry["file"] == _files()[BOOKING]
    assert entry["made"] == "hand_authored" and entry["authors"] == ["A. Author"]
    assert entry["review"] == {"status": "reviewed", "by": ["R. Viewer"], "date": "2026-12-01", "notes": ""}
    assert set(data["scenarios"]) == {BOOKING, CANCEL}
    assert mb.problems() == []
    # The written file fits the published schema.
    schema = bundle_schemas()["provenance.schema.json"]
    assert list(Draft202012Validator(schema).iter_errors(data)) == []


def test_changed_scenario_is_a_located_hash_mismatch(mb: MiniBundle) -> None:
    _record(mb)
    path = mb.scenario_file()
    path.write_text(path.read_text(encoding="utf-8") + "# edited after review\n", encoding="utf-8")
    [p] = mb.only("provenance.hash_mismatch")
    assert (p.file, p.path) == (PROV, f"scenarios.{BOOKING}.sha256")
    assert _files()[BOOKING] in p.message and "'reviewed'" in p.message and "--update" in p.message
    # Updating records the new hash, and the old review no longer stands.
    res = update_provenance(mb.root, _files())
    assert (res.rehashed, res.added, res.unchanged) == ([BOOKING], [], 1)
    entry = yaml.safe_load((mb.root / PROV).read_text(encoding="utf-8"))["scenarios"][BOOKING]
    assert entry["review"]["status"] == "unreviewed"
    assert mb.problems() == []


def test_missing_and_unknown_entries(mb: MiniBundle) -> None:
    _record(mb)
    data = yaml.safe_load((mb.root / PROV).read_text(encoding="utf-8"))
    data["scenarios"]["gone_scenario"] = data["scenarios"].pop(CANCEL)
    (mb.root / PROV).write_text(yaml.safe_dump(data), encoding="utf-8")
    found = {(p.code, p.path) for p in mb.problems()}
    assert found == {("provenance.missing_entry", f"scenarios.{CANCEL}"),
                     ("provenance.unknown_scenario", "scenarios.gone_scenario")}


def test_bad_file_is_a_located_schema_problem(mb: MiniBundle) -> None:
    (mb.root / PROV).write_text(yaml.safe_dump(
        {"scenarios": {BOOKING: {"file": "x.yaml", "sha256": "nothex", "made": "typed"}}}), encoding="utf-8")
    found = {(p.file, p.code, p.path) for p in mb.problems()}
    assert (PROV, "schema", f"scenarios.{BOOKING}.sha256") in found
    assert (PROV, "schema", f"scenarios.{BOOKING}.made") in found


def test_generated_needs_its_generation_record(mb: MiniBundle) -> None:
    gen = Generation(model="gpt-5.6-sol", settings={"reasoning_effort": "high"}, seed=7)
    update_provenance(mb.root, _files(), made="generated", generation=gen)
    data = yaml.safe_load((mb.root / PROV).read_text(encoding="utf-8"))
    assert data["scenarios"][BOOKING]["generation"]["settings"] == {"reasoning_effort": "high"}
    assert mb.problems() == []
    del data["scenarios"][BOOKING]["generation"]
    (mb.root / PROV).write_text(yaml.safe_dump(data), encoding="utf-8")
    [p] = mb.only("provenance.generation")
    assert p.path == f"scenarios.{BOOKING}.generation"


def test_audit_without_file_is_empty(tmp_path: Path) -> None:
    assert audit_provenance(tmp_path, {"x": "agents/a/scenarios/x.yaml"}) == []


def test_cli_update_then_check(mb: MiniBundle) -> None:
    root = str(mb.root)
    res = runner.invoke(app, ["provenance", root])
    assert res.exit_code == 1 and "no provenance file" in res.output
    res = runner.invoke(app, ["provenance", root, "--update"])
    assert res.exit_code == 1 and "--made" in res.output
    res = runner.invoke(app, ["provenance", root, "--update", "--made", "generated", "--model", "m1",
                              "--settings-json", '{"temperature": 0.7}', "--seed", "3",
                              "--review-status", "machine_checked", "--reviewer", "callbench validate"])
    assert res.exit_code == 0, res.output
    assert "2 added, 0 re-hashed, 0 removed" in res.output
    entry = yaml.safe_load((mb.root / PROV).read_text(encoding="utf-8"))["scenarios"][CANCEL]
    assert entry["generation"]["model"] == "m1" and entry["generation"]["seed"] == 3
    assert entry["review"]["status"] == "machine_checked"
    res = runner.invoke(app, ["provenance", root])
    assert res.exit_code == 0 and "every one recorded at its current hash" in res.output
    res = runner.invoke(app, ["validate", "--json", root])
    assert res.exit_code == 0 and json.loads(res.output) == []
    bad = runner.invoke(app, ["provenance", root, "--update", "--review-status", "great"])
    assert bad.exit_code == 1 and "--review-status" in bad.output


def test_a_scenario_that_fails_to_parse_keeps_its_entry(mb: MiniBundle) -> None:
    """Regression (new-user trial): a YAML error in a scenario also reported its provenance entry as
    an unknown scenario, advising --update, which then deleted the entry and its review."""
    _record(mb)
    path = mb.scenario_file()
    path.write_text(path.read_text(encoding="utf-8") + "\n  : : broken: [\n", encoding="utf-8")
    problems = mb.problems()
    assert "provenance.unknown_scenario" not in {p.code for p in problems}
    assert any(p.code == "parse" for p in problems)
    loaded = {CANCEL: _files()[CANCEL]}  # the broken one does not load
    res = update_provenance(mb.root, loaded)
    assert res.removed == [] and res.unchanged == 2
    entry = yaml.safe_load((mb.root / PROV).read_text(encoding="utf-8"))["scenarios"][BOOKING]
    assert entry["review"]["status"] == "reviewed"
