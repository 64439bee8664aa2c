"""``callbench agreement``: load two grade sets of a run and compare them
(:mod:`callbench.stats.grade_agreement`); :mod:`callbench.report.terminal.agreement` prints the
result."""

from __future__ import annotations

from pathlib import Path

from callbench.grade.action_checks import GradeError
from callbench.grade.models import GradeSetManifest
from callbench.grade.store import load_episode_grades, load_grade_set, read_run_manifest
from callbench.runfolder.manifest import GRADES
from callbench.stats.grade_agreement import GradeSetAgreement, grade_set_agreement


def resolve_grade_set(run_dir: Path, given: str) -> str:
    """The grade set id ``given`` names: itself when its folder exists, else the one folder under
    ``RUN_DIR/grades`` whose id starts with ``given`` (so ``gs002`` names ``gs002-3f9a...``).
    Raises :class:`GradeError` listing the known ids when none or several match."""
    root = Path(run_dir) / GRADES
    if (root / given).is_dir():
        return given
    known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    matches = [k for k in known if k.startswith(given)] if given else []
    if len(matches) == 1:
        return matches[0]
    what = "matches several grade sets" if matches else "is not a grade set of this run"
    raise GradeError(f"{root}: {given!r} {what} (known: {', '.join(known) or 'none'})")


def describe_grade_set(gs: GradeSetManifest) -> str:
    """One line saying who produced a grade set: its judges, or the human labels file."""
    if gs.kind == "human":
        return f"{gs.grade_set_id}: human labels from {gs.labels_file} (sheet of {gs.source_grade_set})"
    return (
        f"{gs.grade_set_id}: task judge {gs.task_judge.spec}, conversation judge "
        f"{gs.conversation_judge.spec} ({gs.created})"
    )


def run_agreement(
    run_dir: Path,
    grade_set_a: str,
    grade_set_b: str,
    *,
    seed: int | None = None,
    n_samples: int = 2000,
    confidence: float = 0.95,
) -> GradeSetAgreement:
    """Compare grade sets ``grade_set_a`` and ``grade_set_b`` of the run in ``run_dir`` (full ids
    or unique prefixes, :func:`resolve_grade_set`).

    ``seed`` defaults to the run's seed. Raises :class:`GradeError` (naming the file) when the run
    or either grade set cannot be read, or when both ids are the same; ``ValueError`` for bad
    bootstrap settings."""
    manifest = read_run_manifest(run_dir)
    grade_set_a, grade_set_b = (
        resolve_grade_set(run_dir, grade_set_a),
        resolve_grade_set(run_dir, grade_set_b),
    )
    if grade_set_a == grade_set_b:
        raise GradeError(f"{run_dir}: give two different grade sets (both are {grade_set_a!r})")
    # raises naming grade_set.json when missing or unreadable
    sets = [load_grade_set(run_dir, gid) for gid in (grade_set_a, grade_set_b)]
    result = grade_set_agreement(
        load_episode_grades(run_dir, grade_set_a),
        load_episode_grades(run_dir, grade_set_b),
        grade_set_a=grade_set_a,
        grade_set_b=grade_set_b,
        seed=manifest.seed if seed is None else seed,
        n_samples=n_samples,
        confidence=confidence,
    )
    result.description_a, result.description_b = (describe_grade_set(gs) for gs in sets)
    return result
