"""``callbench review``: readable display, accept / reject recorded in generation.yaml and
provenance.yaml, validate's warning, and the run manifest's count of reviewed scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callbench.bundle.provenance import load_provenance, unreviewed_generated
from callbench.generate.manifest import load_manifest

from .conftest import AGENT, REPAIRED, VALID, invoke


def _generated(bundle: Path, script: Path) -> Path:
    invoke(
        "generate",
        str(bundle),
        "--agent",
        AGENT,
        "--model",
        f"scripted:generator:{script}",
        "--n",
        "3",
        "--seed",
        "7",
    )
    return bundle


def test_review_shows_each_unreviewed_scenario(agent_bundle: Path, script: Path) -> None:
    _generated(agent_bundle, script)
    code, out, _ = invoke("review", str(agent_bundle), "--agent", AGENT)
    assert code == 0 and "(1/2)" in out and "(2/2)" in out
    for part in (
        "GOAL (graders only)",
        "BRIEF (the caller's private knowledge)",
        "HIDDEN STATE (backend only)",
        "ACTION CHECKS",
        "CRITERIA",
        "REFERENCE PATH (one correct call)",
        "- no_morning_booking [policy_compliance, importance 2]: book_tanker slot_id: T13-MOR -- never; "
        "applies after complaint_logged",
        "1. state_problem: when The agent greets you and asks how it can help.",
        "calls book_tanker(consumer_number='4417093562', slot_id='T13-EVE')",
        'excerpt: "Never promise a time the tool did not return."',
        "[unreviewed] generated in batch g-",
        "item 2, 2 attempt(s)",
    ):
        assert part in out, part
    code, out, _ = invoke("review", str(agent_bundle), "--agent", "other_agent")
    assert code == 0 and "no generated scenario awaits review" in out


def test_accept_and_reject_are_recorded(agent_bundle: Path, script: Path) -> None:
    _generated(agent_bundle, script)
    code, out, err = invoke(
        "review",
        str(agent_bundle),
        "--accept",
        VALID,
        "--reject",
        REPAIRED,
        "--reviewer",
        "R. Iyer",
        "--notes",
        "read whole",
    )
    assert code == 0, out + err
    m = load_manifest(agent_bundle)
    acc, rej = m.scenarios[VALID].review, m.scenarios[REPAIRED].review
    assert (
        acc.status == "accepted" and acc.by == "R. Iyer" and acc.at is not None and acc.at.endswith("+00:00")
    )
    assert rej.status == "rejected" and rej.by == "R. Iyer" and acc.notes == "read whole"
    assert not (agent_bundle / m.scenarios[REPAIRED].file).exists()
    prov = load_provenance(agent_bundle, [])
    assert prov is not None and sorted(prov.scenarios) == [VALID]
    review = prov.scenarios[VALID].review
    assert review.status == "reviewed" and review.by == ["R. Iyer"] and review.date == acc.at[:10]
    assert unreviewed_generated(agent_bundle) == []
    code, out, err = invoke("validate", str(agent_bundle))
    assert code == 0 and "not reviewed" not in out + err and "1 scenario(s), no problems" in out


def test_review_refuses_bad_decisions(agent_bundle: Path, script: Path) -> None:
    _generated(agent_bundle, script)
    before = (agent_bundle / "generation.yaml").read_bytes()
    code, _, err = invoke("review", str(agent_bundle), "--accept", VALID)
    assert code == 2 and "--reviewer" in err
    code, _, err = invoke("review", str(agent_bundle), "--accept", "no_such_id", "--reviewer", "R")
    assert code == 2 and "no_such_id" in err
    code, _, err = invoke(
        "review", str(agent_bundle), "--accept", VALID, "--reject", VALID, "--reviewer", "R"
    )
    assert code == 2 and "both accepted and rejected" in err
    assert (agent_bundle / "generation.yaml").read_bytes() == before


def test_validate_warning_never_changes_the_exit_code(agent_bundle: Path, script: Path) -> None:
    _generated(agent_bundle, script)
    code, out, err = invoke("validate", str(agent_bundle), "--json")
    assert code == 0 and json.loads(out) == [] and "2 generated scenario(s) not reviewed yet" in err
    (agent_bundle / "agents" / AGENT / "scenarios" / f"{VALID}.yaml").write_text("id: [", encoding="utf-8")
    code, out, _ = invoke("validate", str(agent_bundle))
    assert code == 1 and "[parse]" in out


def test_a_run_records_how_many_of_its_scenarios_were_reviewed(
    tmp_path: Path, agent_bundle: Path, script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a clean checkout of one code version: only the review can make the run unofficial
    monkeypatch.setattr("callbench.runs.executor.git_state", lambda: ("abc", False))
    monkeypatch.setattr("callbench.runs.executor.code_version", lambda: "0.1.0+gabc")
    _generated(agent_bundle, script)
    invoke("review", str(agent_bundle), "--accept", VALID, "--reviewer", "R. Iyer")
    out_dir = tmp_path / "run"
    code, out, err = invoke(
        "run",
        str(agent_bundle),
        "--candidate",
        "scripted:reference",
        "--caller",
        "scripted:plan",
        "--task-judge",
        "scripted:met",
        "--conversation-judge",
        "scripted:met",
        "--out",
        str(out_dir),
        "--no-preflight",
    )
    assert code == 0, out + err
    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["completed"] == 2
    assert manifest["scenarios_reviewed"] == 1
    assert manifest["scenario_review"] == {"reviewed": 1, "unreviewed": 1}
    # unreviewed means unofficial, and the report says how many
    assert manifest["awaiting_review"] == 1 and manifest["official"] is False
    code, out, err = invoke("report", str(out_dir), "--no-html", "--samples", "50")
    assert code == 0, out + err
    assert "official no (clean tree; 1 generated scenario(s) awaiting review)" in " ".join(out.split())
    # once every scenario is reviewed, the same run is official
    invoke("review", str(agent_bundle), "--accept", REPAIRED, "--reviewer", "R. Iyer")
    code, out, err = invoke("run", str(agent_bundle), "--candidate", "scripted:reference", "--caller",
                            "scripted:plan", "--task-judge", "scripted:met", "--conversation-judge",
                            "scripted:met", "--out", str(tmp_path / "run2"), "--no-preflight")
    assert code == 0, out + err
    second = json.loads((tmp_path / "run2" / "manifest.json").read_text(encoding="utf-8"))
    assert second["awaiting_review"] == 0 and second["official"] is True
