"""Judge validation: contrastive known-answer traces derived from the reference
replay, balanced accuracy with intervals, and the gate; scripted judges whose right answers are
known (constant judges, and an oracle that labels every audit trace as its kind requires)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from callbench.audit.contrast import contrast_expectation, derive_contrast_traces
from callbench.audit.core import AUDIT_SEED, CALLER, FLOOR_CANDIDATES, AuditReport, _episode, audit_bundle
from callbench.audit.judges import AuditJudges
from callbench.audit.store import PACKAGED_VALIDATIONS, JudgeAudit
from callbench.audit.validation import Observation as Obs
from callbench.audit.validation import class_split, gate, rate, wilson_interval
from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.grade.prompts import PROMPT_VERSION
from callbench.models.base import ModelRequest, ModelResponse
from callbench.models.scripted.judge import ScriptedJudge, create_scripted_judge

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
BANK = "bank_balance_salary_check"
CLINIC = "clinic_child_fever_no_advice"
runner = CliRunner()


@pytest.fixture(scope="module")
def starter() -> Bundle:
    return load_bundle(STARTER)


class OracleJudge(ScriptedJudge):
    """Labels every criterion met on a reference replay (episode ``audit-<id>-reference``) and
    not_met on every other audit trace: right wherever the starter declares an answer (its null
    floors and contrast expectations are all not_met)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        reference = request.context.episode_id.endswith("-reference")
        self.spec = "scripted:met" if reference else "scripted:not_met"
        try:
            return await super().complete(request)
        finally:
            self.spec = "test:oracle"


def _audit(bundle: Bundle, task: ScriptedJudge, conv: ScriptedJudge, **kw: float) -> AuditReport:
    judges = AuditJudges(task, conv, **kw)  # type: ignore[arg-type]
    return asyncio.run(audit_bundle(bundle, scenario_ids=[BANK, CLINIC], judges=judges, static_problems=[]))


# ---------------------------------------------------------------- statistics


def test_wilson_interval_matches_the_published_value() -> None:
    # 5 of 10 at 95%: [0.2366, 0.7634] (Newcombe 1998, table I, method 3)
    low, high = wilson_interval(5, 10)
    assert (round(low or 0, 4), round(high or 0, 4)) == (0.2366, 0.7634)
    assert wilson_interval(0, 0) == (None, None)
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_any_constant_judge_scores_one_half_whatever_the_class_sizes() -> None:
    expected = ["met"] * 3 + ["not_met"] * 17
    for label in ("met", "not_met", "partial"):
        obs = [Obs("k", False, "grounding", e, label) for e in expected]
        split = class_split(obs)
        want = 0.0 if label == "partial" else 0.5  # partial never agrees: both recalls 0
        assert split.balanced_accuracy == want
    right = class_split([Obs("k", False, "grounding", e, e) for e in expected])
    assert right.balanced_accuracy == 1.0 and right.recall_met.k == 3 and right.recall_not_met.k == 17


def test_gate_thresholds_and_reasons() -> None:
    split = class_split([Obs("k", True, "d", "met", "met"), Obs("k", True, "d", "not_met", "met")])
    g = gate(split, rate(1, 1))
    assert not g.passed and g.reasons == [
        "balanced accuracy 0.50 < 0.80",
        "calls 100% of null-trace criteria met (1/1; at most 10% allowed)",
    ]
    assert gate(split, rate(1, 1), min_balanced_accuracy=0.5, max_null_met=1.0).passed
    only_met = class_split([Obs("k", False, "d", "met", "met")])
    assert only_met.balanced_accuracy is None
    assert "cannot be measured" in gate(only_met, rate(0, 0)).reasons[0]


# ---------------------------------------------------------------- contrastive traces


async def test_contrastive_traces_differ_from_the_reference_as_declared(starter: Bundle) -> None:
    agent, scen = starter.scenario(CLINIC)
    ref, _ = await _episode(starter, agent, scen, "scripted:reference")
    kinds = {c.kind: c for c in await derive_contrast_traces(starter, agent, scen, ref, caller=CALLER,
                                                               run_seed=AUDIT_SEED)}
    no_tools, wrong, cut = (kinds[k].trace for k in ("no_tools", "wrong_argument", "cut_short"))
    assert no_tools is not None and wrong is not None and cut is not None
    # no_tools: no tool call, no tool result, and every reference word still said
    assert no_tools.tool_events == [] and not any(m.role == "tool" for m in no_tools.messages)
    said = " ".join(m.content or "" for m in no_tools.messages if m.role == "assistant")
    for m in ref.messages:
        if m.role == "assistant" and m.content:
            assert m.content in said
    # wrong_argument: the same calls, exactly one argument changed, answered by the mismatch or default
    assert [e.name for e in wrong.tool_events] == [e.name for e in ref.tool_events]
    pairs = zip(ref.tool_events, wrong.tool_events, strict=True)
    changed = [(a, b) for a, b in pairs if a.arguments != b.arguments]
    assert len(changed) == 1
    before, after = changed[0]
    assert after.outcome in ("mismatch", "default") and before.outcome == "authored"
    assert sum(after.arguments[k] != v for k, v in (before.arguments or {}).items()) == 1  # type: ignore[index]
    assert kinds["wrong_argument"].note.startswith("turn ")
    # cut_short: one caller turn, the agent's answer to it, then cut at the turn limit
    assert len(cut.caller_turns) == 1 and str(cut.end_reason) == "max_turns"
    assert cut.messages[-1].role == "assistant" and cut.messages[-1].candidate_turn == 1


async def test_a_reference_without_tool_calls_has_no_no_tools_trace(starter: Bundle) -> None:
    bundle = starter.model_copy(deep=True)
    agent, scen = bundle.scenario(CLINIC)
    for t in scen.reference_path or []:
        t.speech = " ".join(x for x in (t.before_tools, t.speech) if x) or None
        t.before_tools, t.tool_calls = None, []
    ref, _ = await _episode(bundle, agent, scen, "scripted:reference")
    kinds = {c.kind: c for c in await derive_contrast_traces(bundle, agent, scen, ref, caller=CALLER,
                                                               run_seed=AUDIT_SEED)}
    assert kinds["no_tools"].trace is None and kinds["wrong_argument"].trace is None
    assert kinds["cut_short"].trace is not None


def test_contrast_expectations_criterion_first_then_diagnostic(starter: Bundle) -> None:
    bundle = starter.model_copy(deep=True)
    _, scen = bundle.scenario(BANK)
    crit = {c.id: c for c in scen.criteria}
    # the scenario's own annotation
    assert contrast_expectation(bundle, crit["salary_confirmed"], "wrong_argument") == "not_met"
    # bundle.yaml: grounding is not met on no_tools; policy compliance has no known answer
    assert contrast_expectation(bundle, crit["salary_confirmed"], "no_tools") == "not_met"
    policy = next(c for c in scen.criteria if c.diagnostic == "policy_compliance")
    assert contrast_expectation(bundle, policy, "no_tools") is None
    crit["salary_confirmed"].contrast = {"no_tools": "any"}
    assert contrast_expectation(bundle, crit["salary_confirmed"], "no_tools") is None
    crit["balance_exact"].null_floor = "met"  # a do-nothing call meets it: no default applies
    assert contrast_expectation(bundle, crit["balance_exact"], "no_tools") is None


def test_bad_contrast_declarations_are_located(tmp_path: Path) -> None:
    root = tmp_path / "starter"
    shutil.copytree(STARTER, root)
    meta = yaml.safe_load((root / "bundle.yaml").read_text(encoding="utf-8"))
    meta["contrast"]["no_tool"] = {"grounding": "not_met"}
    meta["contrast"]["cut_short"]["grounding"] = "maybe"
    (root / "bundle.yaml").write_text(yaml.safe_dump(meta, allow_unicode=True), encoding="utf-8")
    res = runner.invoke(app, ["validate", str(root), "--json"])
    assert res.exit_code == 1
    found = {(p["file"], p["path"]) for p in json.loads(res.stdout)}
    assert ("bundle.yaml", "contrast.no_tool.[key]") in found
    assert ("bundle.yaml", "contrast.cut_short.grounding") in found


# ---------------------------------------------------------------- the gate on the starter


def test_constant_judges_get_one_half_and_fail_the_gate(starter: Bundle) -> None:
    rep = _audit(starter, create_scripted_judge("scripted:met"), create_scripted_judge("scripted:not_met"))
    assert rep.judges is not None and rep.judges.prompt_version == PROMPT_VERSION
    tj, cj = rep.judges.judges["task_judge"], rep.judges.judges["conversation_judge"]
    assert tj.balanced_accuracy == 0.5 and cj.balanced_accuracy == 0.5
    assert tj.classes.recall_met.value == 1.0 and tj.classes.recall_not_met.value == 0.0
    assert tj.null_met.value == 1.0 and cj.null_met.value == 0.0
    assert not tj.gate.passed and not cj.gate.passed and not rep.judges.passed
    # every contrastive kind is measured on the starter's annotations
    assert set(tj.by_kind) >= {"reference", "no_tools", "wrong_argument", "cut_short"}
    assert tj.by_kind["wrong_argument"].n == 3  # salary_confirmed, debits_truthful, booking_grounded
    gates = [p for p in rep.problems if p.code == "audit.judge_gate"]
    where = [(p.file, p.path) for p in gates]
    # the judges come from the command line, not the bundle: located at the option that named each
    assert where == [("--task-judge", ""), ("--conversation-judge", "")]
    assert str(gates[0]).startswith("--task-judge: [audit.judge_gate] the task judge scripted:met fails")
    assert "balanced accuracy 0.50 < 0.80" in gates[0].message


def test_an_oracle_judge_passes_the_gate(starter: Bundle) -> None:
    rep = _audit(starter, OracleJudge("test:oracle"), OracleJudge("test:oracle"))
    assert rep.judges is not None
    for acc in rep.judges.judges.values():
        assert acc.balanced_accuracy == 1.0 and acc.gate.passed and acc.null_met.k == 0
        low, high = acc.balanced_accuracy_low, acc.balanced_accuracy_high
        assert low == 1.0 and high == 1.0
    assert rep.judges.passed and not [p for p in rep.problems if p.code == "audit.judge_gate"]
    # floor agents with these judges: every criterion not met, so only rating points remain
    assert set(rep.judges.floor_scores) == set(FLOOR_CANDIDATES)  # null and gaming agents


def test_audit_cli_exits_1_on_the_gate_and_thresholds_are_settable() -> None:
    args = ["audit", str(STARTER), "--scenarios", CLINIC, "--judges", "--task-judge", "scripted:met",
            "--conversation-judge", "scripted:not_met", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert {p["code"] for p in out["problems"]} == {"audit.judge_gate"}
    assert out["judges"]["judges"]["task_judge"]["gate"]["passed"] is False
    assert [(p["file"], p["path"]) for p in out["problems"]] == [("--task-judge", ""),
                                                                   ("--conversation-judge", "")]
    shown = runner.invoke(app, [a for a in args if a != "--json"])
    assert shown.exit_code == 1
    lines = [line for line in shown.stdout.splitlines() if "[audit.judge_gate]" in line]
    assert [line.split(":", 1)[0] for line in lines] == ["--task-judge", "--conversation-judge"]
    assert "2 problem(s) on 2 command-line option(s)" in shown.stdout
    res = runner.invoke(app, [*args, "--min-balanced-accuracy", "0.5", "--max-null-met", "1.0"])
    assert res.exit_code == 0, res.stdout[-2000:]


def test_shipped_validations_load_and_say_what_they_cover(starter: Bundle) -> None:
    # benchmarks/judge_validation_bench.py writes the embedded model's validation here; a shipped
    # file must fit the starter it ships with, or the demo's report would not find it
    for f in sorted(PACKAGED_VALIDATIONS.glob("*.json")):
        audit = JudgeAudit.model_validate_json(f.read_text(encoding="utf-8"))
        assert "does not cover" in audit.note
        assert starter.content_hash in (audit.bundle_hash, *audit.carried_to), (
            f"{f.name} was measured on another starter: carry it with "
            "benchmarks/carry_judge_validation.py when the audited scenarios are unchanged, else rerun "
            "benchmarks/judge_validation_bench.py"
        )
        assert audit.prompt_version == PROMPT_VERSION


def test_the_demo_judges_find_the_shipped_validation_and_it_fails(starter: Bundle) -> None:
    # the embedded 0.5B judge fails the gate and the demo's report says so.
    # The demo records its judges as RoleInfo(spec, the client's settings), which for the local
    # client are demo_config's settings unchanged (checked against the real client in CI stage 2).
    from types import SimpleNamespace

    from callbench.report.model.validation import judge_validation
    from callbench.runs.demo import demo_config
    from callbench.trace import RoleInfo

    config = demo_config(None, model="local:0.5b", bundle=starter)
    audits = [JudgeAudit.model_validate_json(f.read_text(encoding="utf-8"))
              for f in sorted(PACKAGED_VALIDATIONS.glob("*.json"))]
    grade_set = SimpleNamespace(
        kind="llm",
        prompt_version=PROMPT_VERSION,
        task_judge=RoleInfo(spec=config.task_judge.spec, settings=config.task_judge.settings),
        conversation_judge=RoleInfo(spec=config.conversation_judge.spec,
                                    settings=config.conversation_judge.settings),
    )
    run = SimpleNamespace(grade_set=grade_set, manifest=SimpleNamespace(bundle_hash=starter.content_hash))
    v = judge_validation(run, audits)  # type: ignore[arg-type]
    assert set(v.judges) == {"task_judge", "conversation_judge"}
    assert v.status == "failed"
    low = min(r.balanced_accuracy for r in v.judges.values() if r.balanced_accuracy is not None)
    assert low < 0.80
    assert v.text.startswith(f"judges failed validation: balanced accuracy {low:.2f}")
    assert v.text.endswith(f"(on 1 of {len(starter.scenarios())} scenarios)")
