"""A saved judge validation carries to a later bundle version only when the audited scenarios,
their agents and the judge prompts are unchanged; a report then finds it for the new hash."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from callbench.audit.carry import carry
from callbench.audit.store import PACKAGED_VALIDATIONS, JudgeAudit, matching_audit
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.prompts import PROMPT_VERSION

STARTER = Path(__file__).resolve().parents[2] / "src" / "callbench" / "examples" / "starter"
AUDITED = "lpg_en_late_delivery_no_second_booking"
OTHER = "bank_atm_cash_not_dispensed"


def _copy(tmp: Path, name: str) -> Path:
    dst = tmp / name
    shutil.copytree(STARTER, dst)
    return dst


def _file(tmp: Path, bundle_hash: str) -> Path:
    shipped = next(PACKAGED_VALIDATIONS.glob("*.json"))
    audit = JudgeAudit.model_validate_json(shipped.read_text(encoding="utf-8"))
    audit.bundle_hash, audit.scenario_ids, audit.carried_to = bundle_hash, [AUDITED], []
    audit.prompt_version = PROMPT_VERSION
    path = tmp / "v.json"
    path.write_text(audit.model_dump_json(), encoding="utf-8")
    return path


def _edit(bundle: Path, scenario: str) -> None:
    (p,) = bundle.glob(f"agents/*/scenarios/{scenario}.yaml")
    p.write_text(p.read_text(encoding="utf-8").replace("title: ", "title: Edited. ", 1), encoding="utf-8")
    prov = bundle / "provenance.yaml"  # keep the bundle loadable: drop the pinned hashes' check
    prov.unlink()


def test_an_edit_elsewhere_carries_and_the_report_finds_it(tmp_path: Path) -> None:
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    _edit(new, OTHER)
    old_hash = load_bundle(old).content_hash
    f = _file(tmp_path, old_hash)
    new_hash = carry(old, new, f)
    assert new_hash != old_hash
    audit = JudgeAudit.model_validate_json(f.read_text(encoding="utf-8"))
    assert audit.carried_to == [new_hash]
    judge = next(iter(audit.judges.values())).judge
    role = next(iter(audit.judges))
    assert matching_audit([audit], new_hash, role, judge) is audit
    assert matching_audit([audit], "f" * 64, role, judge) is None
    carry(old, new, f)  # twice: recorded once
    assert JudgeAudit.model_validate_json(f.read_text(encoding="utf-8")).carried_to == [new_hash]


def test_an_edit_of_the_audited_scenario_does_not_carry(tmp_path: Path) -> None:
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    _edit(new, AUDITED)
    f = _file(tmp_path, load_bundle(old).content_hash)
    before = f.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=f"scenario {AUDITED} or its agent reads differently"):
        carry(old, new, f)
    assert f.read_text(encoding="utf-8") == before


def test_the_old_bundle_must_be_the_audited_one(tmp_path: Path) -> None:
    old = _copy(tmp_path, "old")
    f = _file(tmp_path, "0" * 64)
    with pytest.raises(ValueError, match="the validation was made on 000000000000"):
        carry(old, old, f)
