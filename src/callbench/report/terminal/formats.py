"""Number and interval formats shared by the terminal report's tables, and its id column."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from callbench.report.model.build import Report
from callbench.stats.bootstrap import MIN_SCORED_FOR_INTERVAL, BootstrapResult
from callbench.stats.paired import MIN_PAIRED_SCENARIOS


def fmt(x: float | None, digits: int = 1) -> str:
    """A number with ``digits`` decimals, or an em dash for undefined."""
    return "—" if x is None else f"{x:.{digits}f}"


FEW_MARK = "†"
FEW_NOTE = (
    f"{FEW_MARK} from fewer than {MIN_SCORED_FOR_INTERVAL} scored calls: too few to mean much, "
    "however narrow the interval looks."
)


PAIRED_FEW_NOTE = (
    f"{FEW_MARK} from fewer than {MIN_PAIRED_SCENARIOS} shared scenarios: too few to mean much, "
    "whether or not the interval excludes zero."
)


def fmt_ci(r: BootstrapResult) -> str:
    """``estimate [low, high]``, or an em dash when undefined; :data:`FEW_MARK` is appended when
    fewer than :data:`MIN_SCORED_FOR_INTERVAL` calls stand behind the interval (:data:`FEW_NOTE`)."""
    if r.estimate is None:
        return "—"
    text = f"{r.estimate:.1f} [{fmt(r.low)}, {fmt(r.high)}]"
    if r.too_few:
        text += FEW_MARK
    return text


def judged_note(report: Report) -> str:
    """The judge-validation status every judged figure carries (``" — judges not validated"``),
    markup-escaped; empty when every grade set's judges passed validation."""
    return f" — {escape(report.judged_status)}" if report.judged_status else ""


def fmt_cost(cost: float | None) -> str:
    """Dollars to four decimals, or ``unknown``."""
    return "unknown" if cost is None else f"${cost:.4f}"


def id_column(t: Table, name: str, values: list[str]) -> None:
    """A column for ids: never wrapped or cut, as wide as the longest id."""
    t.add_column(name, no_wrap=True, overflow="ignore", min_width=max([len(name), *map(len, values)]))
