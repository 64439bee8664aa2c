"""The terminal table of ``callbench agreement``: two grade sets of a run compared item by item
(:func:`callbench.report.model.agreement.run_agreement`), over all items, per pillar and per
diagnostic, with the exclusions."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from callbench.stats.agreement import Interval
from callbench.stats.grade_agreement import (
    CriteriaAgreement,
    GradeSetAgreement,
    GroupAgreement,
    RatingsAgreement,
)


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
