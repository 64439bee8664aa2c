"""The saved result of the judges-on-known-answers audit (issue 12 item 3c), and how a report
finds the one that fits a run (docs/decisions.md, "Judge accuracy on known answers").

``callbench audit BUNDLE --judges ... --save PATH`` writes a :class:`JudgeAudit` JSON file: to
``PATH`` itself, or, when ``PATH`` is a run folder (it holds ``manifest.json``), to
``PATH/judge_audits/<key>.json`` (:func:`judge_audit_path`). ``callbench report`` reads every file
in each run folder's ``judge_audits/`` and any given with ``--judge-audit FILE``, and shows a
judge's accuracy for a run only when the audit was made on the same bundle hash with the same judge
(spec and settings: :func:`same_judge`, :func:`matching_accuracy`). A file is data for the
report, never trusted to run anything.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from callbench.bundle.models import Bundle
from callbench.models.base import OPERATIONAL_SETTINGS
from callbench.trace import RoleInfo, atomic_write_text

JUDGE_AUDITS = "judge_audits"
"""Folder of a run that holds judge-audit files the report reads."""

JudgeRole = Literal["task_judge", "conversation_judge"]


class ExpectationTally(BaseModel):
    """A judge's labels on one kind of known answer.

    ``traces`` is ``reference`` (the reference replay) or a null-floor candidate spec;
    ``expected`` the known label; ``n`` the items the judge labelled (judge errors excluded, counted
    in ``judge_errors``); ``agree`` those it labelled as expected (``partial`` never agrees);
    ``accuracy`` = agree / n (None when n is 0); ``labels`` the judge's labels by name."""

    traces: str
    expected: Literal["met", "not_met"]
    n: int = 0
    agree: int = 0
    accuracy: float | None = None
    judge_errors: int = 0
    labels: dict[str, int] = Field(default_factory=dict)


class Rate(BaseModel):
    """``k`` of ``n`` (``value`` = k / n, None when n is 0) with its Wilson score interval
    ``[low, high]`` at 95% (:func:`callbench.audit.validation.wilson_interval`)."""

    k: int = 0
    n: int = 0
    value: float | None = None
    low: float | None = None
    high: float | None = None


class ClassSplit(BaseModel):
    """A judge's recall on the items whose known label is ``met`` and on those whose known label is
    ``not_met``, and their mean, the balanced accuracy (None unless both classes have items)."""

    recall_met: Rate = Field(default_factory=Rate)
    recall_not_met: Rate = Field(default_factory=Rate)
    balanced_accuracy: float | None = None


class Gate(BaseModel):
    """The judge-validation gate (docs/validity.md): ``passed`` when the balanced accuracy is at
    least ``min_balanced_accuracy`` and the share of null-trace criteria (known label ``not_met``)
    the judge calls met is at most ``max_null_met``; ``reasons`` says what failed."""

    passed: bool = False
    min_balanced_accuracy: float = 0.80
    max_null_met: float = 0.10
    reasons: list[str] = Field(default_factory=list)


class JudgeAccuracy(BaseModel):
    """One judge's accuracy on the audit's known answers, from ``episodes`` traces of ``scenarios``
    scenarios: per expectation (trace kind, known label) and over all of them (``n``, ``agree``,
    ``accuracy`` = agree / n, None when n is 0); per class (``classes``: recall on known ``met``
    and known ``not_met`` items, and the balanced accuracy, their mean, so that any constant judge
    scores 0.5) with a bootstrap interval ``balanced_accuracy_low``/``high``; the same split
    ``by_diagnostic``; agreement ``by_kind`` (reference, each floor agent, each contrastive kind);
    ``null_met``: null-trace criteria expected ``not_met`` that it called met; and the ``gate``."""

    role: JudgeRole
    judge: RoleInfo
    episodes: int = 0
    scenarios: int = 0
    by_expectation: list[ExpectationTally] = Field(default_factory=list)
    n: int = 0
    agree: int = 0
    accuracy: float | None = None
    judge_errors: int = 0
    classes: ClassSplit = Field(default_factory=ClassSplit)
    balanced_accuracy: float | None = None
    balanced_accuracy_low: float | None = None
    balanced_accuracy_high: float | None = None
    by_diagnostic: dict[str, ClassSplit] = Field(default_factory=dict)
    by_kind: dict[str, Rate] = Field(default_factory=dict)
    null_met: Rate = Field(default_factory=Rate)
    gate: Gate = Field(default_factory=Gate)


class FloorScore(BaseModel):
    """The mean scores (points 0..100) a floor agent's audit traces get from the audited judges,
    over ``episodes`` graded traces (None when no trace has that score)."""

    episodes: int = 0
    overall: float | None = None
    task: float | None = None
    conversation: float | None = None


class ContrastCount(BaseModel):
    """Contrastive traces of one kind: ``derived`` traces, and the scenarios where none could be
    derived with the reason (``scenario_id: note``)."""

    derived: int = 0
    not_derived: list[str] = Field(default_factory=list)


class JudgeAudit(BaseModel):
    """The judges-on-known-answers audit of one bundle (by content hash), one entry per judge role:
    ``episodes`` traces graded, from the scenarios ``scenario_ids`` (all or a ``--scenarios`` subset)."""

    bundle_name: str
    bundle_version: str
    bundle_hash: str
    created: str
    episodes: int
    scenario_ids: list[str] = Field(default_factory=list)
    scenarios_in_bundle: int = 0
    prompt_version: str = ""
    """The judge prompts' version (:data:`callbench.grade.prompts.PROMPT_VERSION`) the audit ran with:
    a validation only counts for grade sets made with the same prompts."""
    judges: dict[JudgeRole, JudgeAccuracy] = Field(default_factory=dict)
    contrast: dict[str, ContrastCount] = Field(default_factory=dict)
    floor_scores: dict[str, FloorScore] = Field(default_factory=dict)
    """Per floor agent (null and gaming candidates of :mod:`callbench.audit.core`), its mean scores
    with these judges."""
    note: str = ""
    """Free text saved with the validation (e.g. what a benchmark's subset covers)."""
    carried_to: list[str] = Field(default_factory=list)
    """Content hashes of later versions of the bundle in which everything the audit's judges read
    is unchanged (:func:`audited_content_sha256`: the audited scenarios and their agents); the
    validation holds for them too (``benchmarks/carry_judge_validation.py`` checks and adds them)."""

    @property
    def passed(self) -> bool:
        """True when both judges are audited and pass the gate."""
        return len(self.judges) == 2 and all(j.gate.passed for j in self.judges.values())


def _key(role: RoleInfo) -> str:
    kept = role.settings.model_dump(mode="json", exclude=set(OPERATIONAL_SETTINGS))
    return json.dumps([role.spec, kept], sort_keys=True)


def same_judge(a: RoleInfo, b: RoleInfo) -> bool:
    """Same spec and same settings, leaving out those that never change what a model says
    (headers, retries: :data:`~callbench.models.base.OPERATIONAL_SETTINGS`)."""
    return _key(a) == _key(b)


def judge_audit_path(target: Path, audit: JudgeAudit) -> Path:
    """Where ``--save target`` writes ``audit``: inside ``target/judge_audits/`` when ``target`` is a
    run folder (named by the bundle hash and a digest of the judges), else ``target`` itself."""
    if (target / "manifest.json").is_file():
        keys = [audit.prompt_version, *(_key(j.judge) for j in audit.judges.values())]
        digest = hashlib.sha256("|".join(keys).encode()).hexdigest()
        return target / JUDGE_AUDITS / f"{audit.bundle_hash[:12]}-{digest[:12]}.json"
    return target


def save_judge_audit(audit: JudgeAudit, target: Path) -> Path:
    """Write ``audit`` atomically (see :func:`judge_audit_path`); returns the file written. Raises
    ``OSError`` when it cannot be written."""
    path = judge_audit_path(target, audit)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, audit.model_dump_json(indent=1) + "\n")
    return path


PACKAGED_VALIDATIONS = Path(__file__).parent / "validations"
"""Validations shipped with the package (measured by ``benchmarks/judge_validation_bench.py``:
the embedded model as the demo's judges on the starter), read by every ``callbench report``."""


def load_judge_audits(
    run_dirs: list[Path], files: list[Path], *, packaged: bool = False
) -> tuple[list[JudgeAudit], list[str]]:
    """Every judge audit in ``RUN_DIR/judge_audits/*.json`` of each run and in ``files`` (and, with
    ``packaged``, in :data:`PACKAGED_VALIDATIONS`); returns (audits, warnings): an unreadable or
    malformed file is a warning naming it, never an error (the report does not depend on it)."""
    paths = [p for d in run_dirs for p in sorted((d / JUDGE_AUDITS).glob("*.json"))] + list(files)
    if packaged:
        paths += sorted(PACKAGED_VALIDATIONS.glob("*.json"))
    out: list[JudgeAudit] = []
    warnings: list[str] = []
    for p in paths:
        try:
            out.append(JudgeAudit.model_validate_json(p.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, ValidationError, ValueError) as e:
            warnings.append(f"{p}: not a judge audit file, ignored: {str(e).splitlines()[0][:200]}")
    return out, warnings


def matching_audit(
    audits: list[JudgeAudit],
    bundle_hash: str,
    role: JudgeRole,
    judge: RoleInfo,
    prompt_version: str | None = None,
) -> JudgeAudit | None:
    """The latest audit made on ``bundle_hash`` with the same ``judge`` in ``role`` (spec and
    settings: :func:`same_judge`) and, when ``prompt_version`` is given, the same judge prompts:
    the key of a saved validation (issue 23 item 2). None when there is none."""
    fits = [
        a
        for a in audits
        if (a.bundle_hash == bundle_hash or bundle_hash in a.carried_to)
        and role in a.judges
        and same_judge(a.judges[role].judge, judge)
        and (prompt_version is None or a.prompt_version == prompt_version)
    ]
    return max(fits, key=lambda a: a.created) if fits else None


def matching_accuracy(
    audits: list[JudgeAudit],
    bundle_hash: str,
    role: JudgeRole,
    judge: RoleInfo,
    prompt_version: str | None = None,
) -> JudgeAccuracy | None:
    """The accuracy of ``judge`` in ``role`` from :func:`matching_audit`, else None."""
    found = matching_audit(audits, bundle_hash, role, judge, prompt_version)
    return None if found is None else found.judges[role]


def audited_content_sha256(bundle: Bundle, scenario_ids: list[str]) -> str:
    """SHA-256 over what the judges of an audit of ``scenario_ids`` read: each scenario (its typed
    content) and its agent (configuration and operating document template), in id order. Two
    bundle versions with the same value give the judges the same inputs on those scenarios, so a
    validation made on one holds on the other. A scenario's action and state checks (and its
    ``no_critical_reason``) are left out: no judge reads them (DESIGN.md "Who sees what") and they
    change none of the audit's traces, which the fixtures, the brief and the reference path make.
    Raises ``KeyError`` naming a scenario the bundle lacks."""
    h = hashlib.sha256()
    for sid in sorted(scenario_ids):
        agent, scen = bundle.scenario(sid)
        seen = scen.model_dump(mode="json", exclude={"action_checks", "state_checks", "no_critical_reason"})
        part = {"scenario": seen, "agent": agent.config.model_dump(mode="json"),
                "instructions": agent.instructions_template}
        h.update(json.dumps(part, sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()
