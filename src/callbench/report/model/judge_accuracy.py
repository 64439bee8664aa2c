"""Judge accuracy on known answers in a run's report.

``callbench audit BUNDLE --judges ... --save`` measures each judge on traces whose right labels are
known (:mod:`callbench.audit.judges`); a run's report shows that accuracy beside the judge when
an audit file was made on the run's bundle hash with the same judge (spec and settings:
:func:`callbench.audit.store.matching_accuracy`). Where none matches, the report says the
judges' accuracy is not measured.
"""

from __future__ import annotations

from callbench.audit.store import JudgeAccuracy, JudgeAudit, JudgeRole, matching_accuracy
from callbench.report.model.load import RunData

JUDGE_ACCURACY_COLUMNS = ["role", "judge", "audit traces (scenarios)", "reference: met",
                          "null floor: expected label", "all"]
NOT_MEASURED = (
    "Judge accuracy on known answers: not measured for these judges on this bundle (run callbench "
    "audit BUNDLE --judges --task-judge SPEC --conversation-judge SPEC --save RUN_DIR)."
)


def run_judge_accuracy(run: RunData, audits: list[JudgeAudit]) -> dict[JudgeRole, JudgeAccuracy]:
    """Each judge role of ``run``'s grade set whose judge was audited on the run's bundle hash."""
    out: dict[JudgeRole, JudgeAccuracy] = {}
    roles: tuple[JudgeRole, ...] = ("task_judge", "conversation_judge")
    for role in roles:
        acc = matching_accuracy(audits, run.manifest.bundle_hash, role, getattr(run.grade_set, role))
        if acc is not None:
            out[role] = acc
    return out


def _cell(agree: int, n: int) -> str:
    return "—" if n == 0 else f"{100 * agree / n:.1f}% ({agree}/{n})"


def accuracy_cells(acc: JudgeAccuracy) -> list[str]:
    """Table cells for one judge (:data:`JUDGE_ACCURACY_COLUMNS` after the role): its spec, accuracy
    on the reference replays, on the null-floor traces, and over all, each as ``pct (agree/n)``."""
    ref = [e for e in acc.by_expectation if e.traces == "reference"]
    floor = [e for e in acc.by_expectation if e.traces != "reference"]
    return [
        acc.judge.spec,
        f"{acc.episodes} ({acc.scenarios})",
        _cell(sum(e.agree for e in ref), sum(e.n for e in ref)),
        _cell(sum(e.agree for e in floor), sum(e.n for e in floor)),
        _cell(acc.agree, acc.n),
    ]


def accuracy_rows(run_id: str, accuracy: dict[JudgeRole, JudgeAccuracy]) -> list[tuple[str, list[str]]]:
    """(``run_id role``, cells) per audited judge of a run, for the terminal and HTML tables."""
    return [(f"{run_id} {role.replace('_', ' ')}", accuracy_cells(acc)) for role, acc in accuracy.items()]
