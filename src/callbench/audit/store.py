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


class JudgeAccuracy(BaseModel):
    """One judge's accuracy on the audit's known answers: per expectation and over all of them
    (``n``, ``agree``, ``accuracy`` = agree / n, None when n is 0), from ``episodes`` traces of
    ``scenarios`` scenarios."""

    role: JudgeRole
    judge: RoleInfo
    episodes: int = 0
    scenarios: int = 0
    by_expectation: list[ExpectationTally] = Field(default_factory=list)
    n: int = 0
    agree: int = 0
    accuracy: float | None = None
    judge_errors: int = 0


class JudgeAudit(BaseModel):
    """The judges-on-known-answers audit of one bundle (by content hash), one entry per judge role:
    ``episodes`` traces graded, from the scenarios ``scenario_ids`` (all or a ``--scenarios`` subset)."""

    bundle_name: str
    bundle_version: str
    bundle_hash: str
    created: str
    episodes: int
    scenario_ids: list[str] = Field(default_factory=list)
    judges: dict[JudgeRole, JudgeAccuracy] = Field(default_factory=dict)


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
        digest = hashlib.sha256("|".join(_key(j.judge) for j in audit.judges.values()).encode()).hexdigest()
        return target / JUDGE_AUDITS / f"{audit.bundle_hash[:12]}-{digest[:12]}.json"
    return target


def save_judge_audit(audit: JudgeAudit, target: Path) -> Path:
    """Write ``audit`` atomically (see :func:`judge_audit_path`); returns the file written. Raises
    ``OSError`` when it cannot be written."""
    path = judge_audit_path(target, audit)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, audit.model_dump_json(indent=1) + "\n")
    return path


def load_judge_audits(run_dirs: list[Path], files: list[Path]) -> tuple[list[JudgeAudit], list[str]]:
    """Every judge audit in ``RUN_DIR/judge_audits/*.json`` of each run and in ``files``; returns
    (audits, warnings): an unreadable or malformed file is a warning naming it, never an error
    (the report does not depend on it)."""
    paths = [p for d in run_dirs for p in sorted((d / JUDGE_AUDITS).glob("*.json"))] + list(files)
    out: list[JudgeAudit] = []
    warnings: list[str] = []
    for p in paths:
        try:
            out.append(JudgeAudit.model_validate_json(p.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, ValidationError, ValueError) as e:
            warnings.append(f"{p}: not a judge audit file, ignored: {str(e).splitlines()[0][:200]}")
    return out, warnings


def matching_accuracy(
    audits: list[JudgeAudit], bundle_hash: str, role: JudgeRole, judge: RoleInfo
) -> JudgeAccuracy | None:
    """The accuracy of ``judge`` in ``role`` from the latest audit made on ``bundle_hash`` with that
    same judge (:func:`same_judge`), else None."""
    fits = [
        a
        for a in audits
        if a.bundle_hash == bundle_hash and role in a.judges and same_judge(a.judges[role].judge, judge)
    ]
    if not fits:
        return None
    return max(fits, key=lambda a: a.created).judges[role]
