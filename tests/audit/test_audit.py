"""``callbench audit``: reference replay, null floor, leaks, channel events,
judges on known answers, the saved judge accuracy in a run's report."""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from callbench.audit.contrast import contrast_expectation
from callbench.audit.core import (
    FLOOR_CANDIDATES,
    FLOOR_MAX,
    FLOOR_MEAN,
    NULL_CANDIDATES,
    AuditReport,
    audit_bundle,
)
from callbench.audit.judges import AuditJudges
from callbench.audit.store import load_judge_audits, matching_accuracy, save_judge_audit
from callbench.bundle.checks import CallRecord, evaluate_checks
from callbench.bundle.models import CONTRAST_KINDS, Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.models.scripted.judge import create_scripted_judge

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
BANK = "bank_duplicate_charge_dispute"
DAIRY = "dairy_zero_supply_mastitis"
runner = CliRunner()


@pytest.fixture(scope="module")
def starter() -> Bundle:
    return load_bundle(STARTER)


@pytest.fixture(scope="module")
def full(starter: Bundle) -> AuditReport:
    return asyncio.run(audit_bundle(starter))


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "starter"
    shutil.copytree(STARTER, dst)
    return dst


def _audit_json(path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    res = runner.invoke(app, ["audit", str(path), "--json", *args])
    return res.exit_code, json.loads(res.stdout)


# ---------------------------------------------------------------- the starter bundle passes


def test_starter_reference_replay_meets_every_check(starter: Bundle, full: AuditReport) -> None:
    assert full.problems == []
    assert [s.scenario_id for s in full.scenarios] == [s.id for _, s in starter.scenarios()]
    for s in full.scenarios:
        _, scen = starter.scenario(s.scenario_id)
        assert s.reference is not None and s.reference.end_reason in ("call_ended", "caller_done")
        assert [c.id for c in s.reference.checks] == [c.id for c in scen.action_checks]
        assert all(c.label == "met" for c in s.reference.checks), s.scenario_id
        authored = len(scen.channel.asr_events) + len(scen.channel.vad_splits)
        assert s.reference.channel.applied == authored, s.scenario_id


def test_starter_null_floor_within_bounds(full: AuditReport) -> None:
    for spec in NULL_CANDIDATES:
        summary = full.null_floor.candidates[spec]
        shares = [s.floor[spec].share for s in full.scenarios]
        assert summary.scenarios == len(full.scenarios) == len(shares)
        assert summary.mean == pytest.approx(statistics.fmean(shares))
        assert summary.mean <= FLOOR_MEAN and summary.max <= FLOOR_MAX
        assert summary.max == max(shares)


def _independent_share(starter: Bundle, full: AuditReport, sid: str, spec: str) -> float:
    """The floor share recomputed from the audit's own trace with the bundle's check evaluator."""
    _, scen = starter.scenario(sid)
    trace = next(t for t in full.traces if t.scenario_id == sid and t.candidate.spec == spec)
    calls = [
        CallRecord(index=e.index, name=e.name, arguments=e.arguments) for e in trace.tool_events if e.executed
    ]
    weight = {c.id: c.importance for c in scen.action_checks}
    applicable = [r for r in evaluate_checks(scen, calls) if r.applicable]
    total = sum(weight[r.id] for r in applicable)
    return sum(weight[r.id] for r in applicable if r.met) / total if total else 0.0


def test_floor_share_agrees_with_an_independent_computation(starter: Bundle, full: AuditReport) -> None:
    nonzero = 0
    for s in full.scenarios:
        for spec in NULL_CANDIDATES:
            got = s.floor[spec].share
            assert got == pytest.approx(_independent_share(starter, full, s.scenario_id, spec))
            nonzero += got > 0
    assert nonzero > 0  # the starter's talk-only floor is not zero everywhere (a real comparison)


async def test_unguarded_negatives_raise_the_floor_and_are_a_problem(starter: Bundle) -> None:
    """Without their guards, the paper's example scenario's negative checks give a hang-up agent a
    share of the weight over the bound: a located ``audit.floor_high`` problem."""
    bundle = starter.model_copy(deep=True)
    agent, scen = bundle.scenario(DAIRY)
    for c in scen.action_checks:
        c.applies_after = []
    rep = await audit_bundle(bundle, scenario_ids=[DAIRY], static_problems=[])
    [s] = rep.scenarios
    assert s.floor["scripted:hangup"].share > FLOOR_MAX
    high = [p for p in rep.problems if p.code == "audit.floor_high"]
    assert {p.file for p in high} == {f"agents/{agent.config.id}/scenarios/{DAIRY}.yaml"}
    # the mean bound is the bundle's: an audit of one scenario holds it to the per-scenario bound
    assert not any(p.code == "audit.floor_mean_high" for p in rep.problems)


async def test_scoped_audit_replays_only_the_named_scenarios(starter: Bundle) -> None:
    rep = await audit_bundle(starter, scenario_ids=[BANK])
    assert [s.scenario_id for s in rep.scenarios] == [BANK]
    assert {t.scenario_id for t in rep.traces} == {BANK}
    assert sorted(t.candidate.spec for t in rep.traces) == sorted(["scripted:reference", *FLOOR_CANDIDATES])
    with pytest.raises(KeyError, match="no_such_scenario"):
        await audit_bundle(starter, scenario_ids=["no_such_scenario"])


# ---------------------------------------------------------------- problems the audit finds


def test_hidden_value_in_prompt_is_located(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    prompt = root / "agents" / "bank_card_services" / "prompt.md"
    prompt.write_text(
        prompt.read_text(encoding="utf-8") + "\nFor example DSP26031100418 is read in groups.\n",
        encoding="utf-8",
    )
    code, out = _audit_json(root, "--scenarios", BANK)
    assert code == 1
    leaks = [p for p in out["problems"] if p["code"] == "audit.leak"]
    assert leaks and all(p["file"] == "agents/bank_card_services/prompt.md" for p in leaks)
    line = prompt.read_text(encoding="utf-8").count("\n")
    assert any(
        "hidden_state.dispute_reference" in p["message"]
        and f"line {line}:" in p["message"]
        and "DSP26031100418" in p["message"]
        for p in leaks
    )
    # The terminal output names the file and the field too.
    res = runner.invoke(app, ["audit", str(root), "--scenarios", BANK])
    assert res.exit_code == 1
    text = " ".join(res.stdout.split())
    assert "agents/bank_card_services/prompt.md" in text and "hidden_state.dispute_reference" in text


def test_hidden_value_in_tool_schema_and_secret_values(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    afile = root / "agents" / "dairy_milk_collection" / "agent.yaml"
    agent = yaml.safe_load(afile.read_text(encoding="utf-8"))
    agent["tools"][0]["description"] += " e.g. BMC-2417-02"
    afile.write_text(yaml.safe_dump(agent, allow_unicode=True, sort_keys=False), encoding="utf-8")
    # A value the author marks secret leaks whatever its form (here a short word of the prompt).
    sfile = root / "agents" / "dairy_milk_collection" / "scenarios" / f"{DAIRY}.yaml"
    scen = yaml.safe_load(sfile.read_text(encoding="utf-8"))
    word = next(
        w
        for w in (root / "agents" / "dairy_milk_collection" / "prompt.md").read_text().split()
        if w.isalpha() and len(w) >= 6
    )
    scen["secrets"] = [word]
    sfile.write_text(yaml.safe_dump(scen, allow_unicode=True, sort_keys=False), encoding="utf-8")
    code, out = _audit_json(root, "--scenarios", DAIRY)
    assert code == 1
    leaks = [p for p in out["problems"] if p["code"] == "audit.leak"]
    tool = [p for p in leaks if p["file"] == "agents/dairy_milk_collection/agent.yaml"]
    assert [p["path"] for p in tool if "hidden_state.member_profile.center_code" in p["message"]] == [
        "tools.0.description"
    ]
    assert any(
        p["file"] == "agents/dairy_milk_collection/prompt.md"
        and "secrets.0" in p["message"]
        and repr(word) in p["message"]
        for p in leaks
    )


def test_channel_event_that_never_applies_is_a_problem(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    sfile = root / "agents" / "bank_card_services" / "scenarios" / f"{BANK}.yaml"
    scen = yaml.safe_load(sfile.read_text(encoding="utf-8"))
    n_plan = len(scen["brief"]["plan"])
    scen["channel"]["asr_events"] = [
        {"turn": n_plan + 5, "kind": "drop", "span": "two"},  # the call never has that many caller turns
        {"turn": 1, "kind": "drop", "span": "4417"},  # digits the caller's first turn does not contain
    ]
    sfile.write_text(yaml.safe_dump(scen, allow_unicode=True, sort_keys=False), encoding="utf-8")
    code, out = _audit_json(root, "--scenarios", BANK)
    assert code == 1
    chan = [p for p in out["problems"] if p["code"].startswith("audit.channel_")]
    file = f"agents/bank_card_services/scenarios/{BANK}.yaml"
    assert sorted((p["file"], p["path"], p["code"]) for p in chan) == [
        (file, "channel.asr_events.0", "audit.channel_never_reached"),
        (file, "channel.asr_events.1", "audit.channel_not_applied"),
    ]


def test_json_shape_and_exit_codes(tmp_path: Path) -> None:
    code, out = _audit_json(STARTER, "--scenarios", f"{BANK},{DAIRY}")
    assert code == 0
    assert set(out) == {"bundle", "scenarios", "null_floor", "problems"}
    assert out["problems"] == []
    assert [s["scenario_id"] for s in out["scenarios"]] == [BANK, DAIRY]
    s = out["scenarios"][0]
    assert set(s) == {"agent_id", "scenario_id", "file", "reference", "floor"}
    assert {c["label"] for c in s["reference"]["checks"]} == {"met"}
    assert set(s["floor"]) == set(FLOOR_CANDIDATES)
    assert set(out["null_floor"]["candidates"]) == set(FLOOR_CANDIDATES)
    assert out["null_floor"]["mean_bound"] == FLOOR_MEAN
    assert runner.invoke(app, ["audit", str(tmp_path / "nope")]).exit_code == 2
    assert runner.invoke(app, ["audit", str(STARTER), "--scenarios", "no_such"]).exit_code == 2
    assert runner.invoke(app, ["audit", str(STARTER), "--judges"]).exit_code == 2


# ---------------------------------------------------------------- judges on known answers


async def test_judge_accuracy_with_scripted_judges(starter: Bundle) -> None:
    bundle = starter.model_copy(deep=True)
    _, scen = bundle.scenario(BANK)
    task = [c for c in scen.criteria if c.pillar == "task"]
    conv = [c for c in scen.criteria if c.pillar == "conversation"]
    assert len(task) >= 3 and conv
    task[0].null_floor = "met"
    task[1].null_floor = "any"
    judges = AuditJudges(create_scripted_judge("scripted:met"), create_scripted_judge("scripted:not_met"))
    rep = await audit_bundle(bundle, scenario_ids=[BANK], judges=judges, static_problems=[])
    assert rep.judges is not None
    tj, cj = rep.judges.judges["task_judge"], rep.judges.judges["conversation_judge"]
    # Independently: the always-"met" task judge agrees on every task criterion of the reference
    # replay, and on the floor traces only with the criterion whose null_floor is met; "any" is left out.
    n_floor = len(NULL_CANDIDATES)  # the gaming agents are graded too, for their scores only
    t_rows = {(e.traces, e.expected): (e.agree, e.n) for e in tj.by_expectation}
    assert t_rows[("reference", "met")] == (len(task), len(task))
    for spec in NULL_CANDIDATES:
        assert t_rows[(spec, "met")] == (1, 1)
        assert t_rows[(spec, "not_met")] == (0, len(task) - 2)
    # Contrastive traces: the always-"met" judge is wrong on every item the bundle declares not_met.
    contrast = {k: sum(contrast_expectation(bundle, c, k) == "not_met" for c in task) for k in CONTRAST_KINDS}
    for k, n in contrast.items():
        assert t_rows.get((k, "not_met"), (0, 0)) == (0, n)
    n_contrast = sum(contrast.values())
    assert (tj.agree, tj.n) == (len(task) + n_floor, len(task) + n_floor * (len(task) - 1) + n_contrast)
    assert tj.accuracy == pytest.approx(tj.agree / tj.n)
    assert tj.balanced_accuracy == 0.5 and not tj.gate.passed
    # The always-"not met" conversation judge: wrong on the reference, right on the floor.
    c_rows = {(e.traces, e.expected): (e.agree, e.n) for e in cj.by_expectation}
    assert c_rows[("reference", "met")] == (0, len(conv))
    assert all(c_rows[(spec, "not_met")] == (len(conv), len(conv)) for spec in NULL_CANDIDATES)
    derived = sum(c.derived for c in rep.judges.contrast.values())
    assert cj.judge.spec == "scripted:not_met" and rep.judges.episodes == 1 + len(FLOOR_CANDIDATES) + derived
    assert cj.balanced_accuracy == 0.5 and not cj.gate.passed


async def test_judge_errors_are_counted_apart(starter: Bundle) -> None:
    judges = AuditJudges(create_scripted_judge("scripted:garbage"), create_scripted_judge("scripted:met"))
    rep = await audit_bundle(starter, scenario_ids=[BANK], judges=judges, static_problems=[])
    assert rep.judges is not None
    tj = rep.judges.judges["task_judge"]
    _, scen = starter.scenario(BANK)
    n_task = sum(c.pillar == "task" for c in scen.criteria)
    contrast = sum(
        contrast_expectation(starter, c, k) is not None
        for c in scen.criteria if c.pillar == "task" for k in CONTRAST_KINDS
    )
    assert (tj.n, tj.accuracy) == (0, None)
    assert tj.judge_errors == n_task * (1 + len(NULL_CANDIDATES)) + contrast
    assert tj.balanced_accuracy is None and not tj.gate.passed
    assert "cannot be measured" in tj.gate.reasons[0]


def test_report_shows_the_accuracy_of_the_same_judges(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "run",
            str(STARTER),
            "--candidate",
            "scripted:reference",
            "--caller",
            "scripted:plan",
            "--task-judge",
            "scripted:met",
            "--conversation-judge",
            "scripted:met",
            "--out",
            str(run_dir),
            "--scenarios",
            BANK,
            "--concurrency",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        [
            "audit",
            str(STARTER),
            "--scenarios",
            BANK,
            "--judges",
            "--task-judge",
            "scripted:met",
            "--conversation-judge",
            "scripted:not_met",
            "--save",
            str(run_dir),
        ],
    )
    assert res.exit_code == 1, res.output  # both constant judges fail the gate
    audits, warnings = load_judge_audits([run_dir], [])
    assert len(audits) == 1 and warnings == []
    saved = audits[0].judges["task_judge"]
    out = tmp_path / "report.json"
    html = tmp_path / "report.html"
    res = runner.invoke(app, ["report", str(run_dir), "--html", str(html), "--json", str(out)])
    assert res.exit_code == 0, res.output
    section = html.read_text(encoding="utf-8").split('id="judge-accuracy"', 1)[1].split("<h2", 1)[0]
    assert "task judge" in section and "scripted:met" in section and "conversation judge" not in section
    run = json.loads(out.read_text())["runs"][0]
    # Same task judge (scripted:met) and bundle hash: shown; the conversation judge differs: not shown.
    assert set(run["judge_accuracy"]) == {"task_judge"}
    assert run["judge_accuracy"]["task_judge"]["accuracy"] == pytest.approx(saved.accuracy)
    assert run["judge_accuracy"]["task_judge"]["agree"] == saved.agree
    assert "Judge accuracy on known answers" in res.stdout
    # Another bundle hash: not matched.
    other = audits[0].model_copy(update={"bundle_hash": "0" * 64})
    assert matching_accuracy([other], audits[0].bundle_hash, "task_judge", saved.judge) is None
    # A file given with --judge-audit is read too; a malformed one is a warning, not an error.
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    good = save_judge_audit(audits[0], tmp_path / "audit.json")
    found, warns = load_judge_audits([], [good, bad])
    assert len(found) == 1 and len(warns) == 1 and "bad.json" in warns[0]


async def test_reference_replay_that_misses_a_check_is_located(starter: Bundle) -> None:
    """Drop the reference path's first tool call: every check it met alone is unmet on the replay,
    each a problem at its ``action_checks.N``; a scenario without a path cannot be replayed."""
    bundle = starter.model_copy(deep=True)
    _, scen = bundle.scenario(BANK)
    assert scen.reference_path is not None
    turn = next(t for t in scen.reference_path if t.tool_calls)
    dropped = turn.tool_calls.pop(0)
    rep = await audit_bundle(bundle, scenario_ids=[BANK], static_problems=[])
    [s] = rep.scenarios
    assert s.reference is not None
    unmet = [c.id for c in s.reference.checks if c.label != "met"]
    assert unmet and not s.reference_met
    index = {c.id: i for i, c in enumerate(scen.action_checks)}
    got = [(p.path, p.code) for p in rep.problems if p.code == "audit.reference_unmet"]
    assert got == [(f"action_checks.{index[c]}", "audit.reference_unmet") for c in unmet]
    assert any(c.tool == dropped.name for c in scen.action_checks if c.id in unmet)
    scen.reference_path = None
    rep = await audit_bundle(bundle, scenario_ids=[BANK], static_problems=[])
    assert [p.code for p in rep.problems] == ["audit.reference_missing"]
    assert rep.scenarios[0].reference is None and set(rep.scenarios[0].floor) == set(FLOOR_CANDIDATES)
