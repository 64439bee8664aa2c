"""The progress display of ``callbench run`` and ``callbench demo``: two lines.

The first line counts episodes: a bar, done/total, skipped, tokens (every role, judges included),
cost, and the elapsed time. The elapsed time comes right after the counts' bar, before the free
text, so a narrow terminal shortens the text, never the timer (at 80 columns the timer used to be
the column cut off). Below 120 columns the line is compact: a short bar, token totals as ``1.2M``,
no time left.

The second line says what is under way between finished episodes, with its own bar when that
phase is counted: a local model reading a long prompt reports tokens read of how many
(:mod:`callbench.models.activity`), and that is the progress a user watches during the first
minutes of the demo, while the episode bar still stands at 0.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from callbench.models.activity import Activity

NARROW = 120
"""Terminals narrower than this get the compact line."""


def compact_count(n: int) -> str:
    """``987``, ``12.3k``, ``1.23M``: a token total in at most six characters."""
    if n < 10_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


class RunProgress:
    """The two progress lines for ``console`` (episodes under ``title``; what is under way)."""

    def __init__(self, console: Console, title: str) -> None:
        self.narrow = console.width < NARROW
        counts = (
            "skipped {task.fields[skipped]} · tokens {task.fields[tokens]} · {task.fields[cost]}"
            if self.narrow
            else "skipped {task.fields[skipped]} · tokens {task.fields[tokens]} (all roles) · "
            "cost {task.fields[cost]}"
        )
        columns = [
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=10 if self.narrow else 40),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn(counts),
        ]
        if not self.narrow:
            columns += [TextColumn("left"), TimeRemainingColumn()]
        self.episodes = Progress(*columns, console=console)
        self.task: TaskID = self.episodes.add_task(title, total=None, skipped=0, tokens="0", cost="$0.00")
        self.doing = Progress(
            TextColumn("  {task.description}"),
            BarColumn(bar_width=10 if self.narrow else 20),
            TextColumn("{task.fields[share]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.now: TaskID = self.doing.add_task(
            "starting: checking the run folder, the bundle and every role's model", total=None, share="")
        self.phase = "episodes: simulating and grading"
        self._shown = ""

    def group(self) -> Group:
        """Both lines, for ``rich.live.Live``."""
        return Group(self.episodes, self.doing)

    def on_activity(self, act: Activity | None) -> None:
        """Show ``act`` (None: the run's own phase) on the second line; a counted activity fills
        the line's bar with done/total and shows its share in percent."""
        text = escape(act.describe() if act is not None else self.phase)
        what = act.what if act is not None else self.phase
        counted = act is not None and act.total is not None and act.done is not None and act.total > 0
        total = float(act.total) if counted and act is not None and act.total else None
        done = act.done if counted and act is not None and act.done is not None else 0
        share = f"{100 * done / total:.0f}%" if total else ""
        if what != self._shown:  # a new activity: its own elapsed time, and its own bar (a task
            # is replaced, since rich cannot set a counted task's total back to "not counted")
            self._shown = what
            self.doing.remove_task(self.now)
            self.now = self.doing.add_task(text, total=total, completed=done, share=share)
        else:
            self.doing.update(self.now, description=text, total=total, completed=done, share=share)

    def plan(self, total: int, completed: int) -> None:
        """The run's episodes are known: ``completed`` of ``total`` done already."""
        self.episodes.update(self.task, total=total, completed=completed)
        self.on_activity(None)

    def episode_done(self) -> None:
        """One more episode finished."""
        self.episodes.update(self.task, advance=1)

    def totals(self, skipped: int, tokens: int, cost: str) -> None:
        """The running totals of the first line."""
        shown = compact_count(tokens) if self.narrow else f"{tokens:,}"
        self.episodes.update(self.task, skipped=skipped, tokens=shown, cost=cost)
