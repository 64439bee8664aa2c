"""``callbench agreement``: load two grade sets of a run, compare them
(:mod:`callbench.stats.grade_agreement`) and print the result as a terminal table."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.grade.action_checks import GradeError
from callbench.grade.models import GradeSetManifest
from callbench.grade.store import load_episode_grades, load_grade_set, read_run_manifest
from callbench.runfolder.manifest import GRADES
from callbench.stats.agreement import Interval
from callbench.stats.grade_agreement import (
    CriteriaAgreement,
    GradeSetAgreement,
    GroupAgreement,
    RatingsAgreement,
    grade_set_agreement,
)


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


def _ci(value: float | None, interval: Interval | None, digits: int, reason: str | None = None) -> str:
    if value is None:
        return f"undefined ({reason})" if reason else "—"
    text = f"{value:.{digits}f}"
    if interval is not None:
        text += f" [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"
    return text


def _rows(name: str, g: GroupAgreement) -> list[list[str]]:
    rows = []
    c: CriteriaAgreement | None = g.criteria
    r: RatingsAgreement | None = g.ratings
    if c is not None:
        rows.append(
            [name, "criteria", f"{c.n} ({c.n_episodes})",
             _ci(c.percent_agreement, c.percent_agreement_interval, 1),
             _ci(c.kappa, c.interval, 3, c.undefined_reason)]
        )  # fmt: skip
    if r is not None:
        rows.append(
            [name, f"ratings ({r.weights}-weighted)", f"{r.n} ({r.n_episodes})",
             _ci(r.percent_agreement, r.percent_agreement_interval, 1),
             _ci(r.weighted_kappa, r.interval, 3, r.undefined_reason)]
        )  # fmt: skip
    return rows


def render_agreement(result: GradeSetAgreement, console: Console) -> None:
    """Print the agreement table: all items, per pillar, per diagnostic; then the exclusions."""
    conf = f"{100 * result.confidence:g}%"
    t = Table(
        title=f"Agreement of grade sets {escape(result.grade_set_a)} (A) and "
        f"{escape(result.grade_set_b)} (B) (\\[{conf} interval, {result.n_samples} bootstrap samples "
        f"over episodes, seed {result.seed}])",
        title_justify="left",
    )
    for col in ("group", "items", "n items (episodes)", "% agreement", "kappa"):
        t.add_column(col, overflow="fold")
    rows = _rows("all", GroupAgreement(criteria=result.criteria, ratings=result.ratings))
    for pillar, g in result.by_pillar.items():
        rows += _rows(f"pillar {pillar}", g)
    for diag, g in result.by_diagnostic.items():
        rows += _rows(f"diagnostic {diag}", g)
    for row in rows:
        t.add_row(*(escape(x) for x in row))
    if result.description_a:
        console.print(escape(f"A = {result.description_a}"))
    if result.description_b:
        console.print(escape(f"B = {result.description_b}"))
    console.print(t)
    ex = result.excluded
    console.print(
        escape(
            f"Excluded: episodes only in A {ex.episodes_only_in_a}, only in B {ex.episodes_only_in_b}, "
            f"skipped in either {ex.episodes_skipped}; items only in A {ex.items_only_in_a}, only in B "
            f"{ex.items_only_in_b}, judge errors {ex.judge_error}, not applicable {ex.not_applicable}."
        )
    )
    console.print(
        "Criteria: Cohen's kappa (unweighted) on met / partial / not met. Ratings: weighted kappa with "
        "quadratic weights (Cohen 1968) on 1-5. Intervals resample episodes; see docs/validity.md."
    )
