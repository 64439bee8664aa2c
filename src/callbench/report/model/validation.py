"""Whether a grade set's judges passed validation, and the status every judged figure carries
(docs/validity.md "The judge-validation gate").

A grade set's judges are *validated* when, for each of the task and conversation judges, a saved
validation (``callbench audit --judges --save``, or one shipped with the package) was made on the
run's bundle hash with the same judge spec, settings and judge prompt version
(:func:`callbench.audit.store.matching_audit`), and it passed the gate. Otherwise the grade set is
not official, and the report says so beside every judged figure:

- ``judges not validated`` (no matching validation for a judge);
- ``judges failed validation: balanced accuracy 0.31`` (the lowest failing judge's balanced
  accuracy; or what else failed, e.g. ``null-trace criteria called met 40%``).

A human label set (``kind: human``) has no judges to validate. The audit's floor agents' scores with
these same judges (``JudgeAudit.floor_scores``) come along when the validation matches.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from callbench.audit.store import FloorScore, JudgeAudit, JudgeRole, matching_audit
from callbench.report.model.load import RunData
from callbench.report.model.official import run_is_official

ROLES: tuple[JudgeRole, ...] = ("task_judge", "conversation_judge")
NOT_VALIDATED = "judges not validated"
FAILED = "judges failed validation"


class RoleValidation(BaseModel):
    """One judge's matching validation: its balanced accuracy, null-trace share called met, gate,
    the scenarios it covers (of the bundle's) and when it was made."""

    spec: str
    balanced_accuracy: float | None = None
    null_met: float | None = None
    passed: bool = False
    reasons: list[str] = Field(default_factory=list)
    scenarios: int = 0
    scenarios_in_bundle: int = 0
    created: str = ""
    note: str = ""


class JudgeValidation(BaseModel):
    """A grade set's judge-validation status (``grade_sets[].judge_validation`` in the JSON
    report): ``status`` and the ``text`` shown beside every judged figure, per judge the matching
    validation (absent when none), and the floor agents' overall scores with these judges."""

    status: Literal["validated", "not_validated", "failed", "human_labels"]
    text: str
    judges: dict[JudgeRole, RoleValidation] = Field(default_factory=dict)
    floor_scores: dict[str, FloorScore] = Field(default_factory=dict)


class GradeSetInfo(BaseModel):
    """The grade set a report shows for one run: id, kind, cutoff, whether it is official (the run
    is official, :func:`callbench.report.model.official.run_is_official`, and its judges passed
    validation) and its judge validation."""

    run_id: str
    grade_set_id: str
    kind: str
    cutoff: float
    official: bool
    judge_validation: JudgeValidation


def _role(audit: JudgeAudit, role: JudgeRole) -> RoleValidation:
    acc = audit.judges[role]
    return RoleValidation(
        spec=acc.judge.spec,
        balanced_accuracy=acc.balanced_accuracy,
        null_met=acc.null_met.value,
        passed=acc.gate.passed,
        reasons=list(acc.gate.reasons),
        scenarios=len(audit.scenario_ids),
        scenarios_in_bundle=audit.scenarios_in_bundle,
        created=audit.created,
        note=audit.note,
    )


def _failed_text(failed: list[RoleValidation]) -> str:
    low = [
        r.balanced_accuracy
        for r in failed
        if r.balanced_accuracy is not None and any(x.startswith("balanced accuracy") for x in r.reasons)
    ]
    if low:
        return f"{FAILED}: balanced accuracy {min(low):.2f}"
    if any(r.balanced_accuracy is None for r in failed):
        return f"{FAILED}: balanced accuracy not measurable"
    worst = max(r.null_met or 0.0 for r in failed)
    return f"{FAILED}: null-trace criteria called met {worst:.0%}"


def judge_validation(run: RunData, audits: list[JudgeAudit]) -> JudgeValidation:
    """The judge-validation status of ``run``'s grade set (module docstring)."""
    gs = run.grade_set
    if gs.kind == "human":
        return JudgeValidation(status="human_labels", text="human labels (no judges to validate)")
    found: dict[JudgeRole, JudgeAudit] = {}
    for role in ROLES:
        audit = matching_audit(audits, run.manifest.bundle_hash, role, getattr(gs, role), gs.prompt_version)
        if audit is not None:
            found[role] = audit
    out = JudgeValidation(status="not_validated", text=NOT_VALIDATED)
    out.judges = {role: _role(a, role) for role, a in found.items()}
    if set(found) == set(ROLES) and found["task_judge"] is found["conversation_judge"]:
        out.floor_scores = dict(found["task_judge"].floor_scores)
    failed = [r for r in out.judges.values() if not r.passed]
    if failed:
        out.status, out.text = "failed", _failed_text(failed)
    elif len(found) < len(ROLES):
        if found:
            missing = [r.replace("_", " ") for r in ROLES if r not in found]
            out.text = f"{NOT_VALIDATED} ({', '.join(missing)})"
    else:
        parts = [f"{(r.balanced_accuracy or 0):.2f} ({role.split('_')[0]})" for role, r in out.judges.items()]
        out.status, out.text = "validated", f"judges validated: balanced accuracy {', '.join(parts)}"
    covered = {(r.scenarios, r.scenarios_in_bundle) for r in out.judges.values()}
    if out.judges and any(n < total for n, total in covered):
        n, total = min(covered)
        out.text += f" (on {n} of {total} scenarios)"
    return out


def grade_set_info(run: RunData, audits: list[JudgeAudit]) -> GradeSetInfo:
    """The :class:`GradeSetInfo` of ``run``'s reported grade set."""
    v = judge_validation(run, audits)
    gs = run.grade_set
    return GradeSetInfo(
        run_id=run.manifest.run_id,
        grade_set_id=gs.grade_set_id,
        kind=gs.kind,
        cutoff=gs.cutoff,
        official=run_is_official(run) and v.status == "validated",
        judge_validation=v,
    )


def judged_status(infos: list[GradeSetInfo]) -> str:
    """The one line every judged figure of a report carries: the status of its grade set, or of
    each run's (``run r1: ...; run r2: ...``) when they differ; empty when every grade set is
    validated or human labels."""
    shown = ("not_validated", "failed")
    texts = {i.run_id: i.judge_validation.text for i in infos if i.judge_validation.status in shown}
    if not texts:
        return ""
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return "; ".join(f"run {rid}: {t}" for rid, t in texts.items())
