"""``--max-cost USD``: stop starting episodes before a run's spend would pass its budget.

The budget covers the whole run folder, every invocation together: a run stopped at ``--max-cost
5`` and resumed with ``--max-cost 8`` spends at most about 3 more. Before an episode starts,
:meth:`Budget.reserve` checks ``spent + projected cost of the episodes in flight + projected cost
of this one <= max``; the first refusal stops the run from starting any further episode (the ones
in flight finish and are saved and graded), and :class:`BudgetReached` is raised at the end with
the line the command prints. An episode's projected cost is the mean actual cost (every role,
judges included) of that candidate's episodes finished so far, or the cost plan's expected figure
(:mod:`callbench.runs.costplan`) before any finished. Spend counts every priced call as it is
saved (traces) or graded (judges).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from callbench.models.base import Usage
from callbench.runfolder.manifest import EpisodeKey

EXIT_BUDGET = 5
"""Exit code of a run stopped by ``--max-cost`` (finished episodes are kept; resume with more)."""


class BudgetReached(Exception):
    """The run stopped starting episodes at its ``--max-cost``; the message is one line."""


class Budget:
    """Spend against ``max_usd`` (USD). ``spent`` starts at the run's earlier spend;
    ``projected`` maps candidate slugs to the cost plan's expected USD per episode.
    Raises ``ValueError`` when a needed figure is unknown (a price missing from the table)."""

    def __init__(self, max_usd: float, spent: float | None, projected: dict[str, float | None]) -> None:
        if spent is None:
            raise ValueError("--max-cost: the run's earlier spend is unknown (a model without a price); "
                             "add its price to the price table or run without --max-cost")
        unknown = sorted(s for s, c in projected.items() if c is None)
        if unknown:
            raise ValueError(f"--max-cost: the cost of candidate {unknown[0]}'s episodes is unknown (a role "
                             "without a price in callbench/models/prices.yaml); run without --max-cost")
        self.max_usd = max_usd
        self.spent = spent
        self.start_spent = spent
        self.planned: dict[str, float] = {s: float(c or 0.0) for s, c in projected.items()}
        self.actual: dict[str, list[float]] = {}
        self.in_flight: dict[str, float] = {}
        self.episode_cost: dict[str, float] = {}
        self.refused: EpisodeKey | None = None
        self.refused_projection = 0.0
        self.not_started = 0

    def projection(self, slug: str) -> float:
        """The projected USD of one more episode of candidate ``slug``."""
        seen = self.actual.get(slug)
        return statistics.mean(seen) if seen else self.planned.get(slug, 0.0)

    @property
    def stopped(self) -> bool:
        """True once an episode was refused: no further episode starts."""
        return self.refused is not None

    def reserve(self, key: EpisodeKey) -> bool:
        """Reserve the projected cost of ``key`` if the budget allows it (see module docstring)."""
        if self.refused is not None:
            self.not_started += 1
            return False
        cost = self.projection(key.candidate)
        if self.spent + sum(self.in_flight.values()) + cost > self.max_usd:
            self.refused, self.refused_projection = key, cost
            self.not_started += 1
            return False
        self.in_flight[key.episode_id] = cost
        return True

    def charge(self, episode_id: str, usages: Iterable[Usage]) -> None:
        """Add the cost of an episode's calls (its trace's, then its judges') to the spend."""
        for u in usages:
            c = u.cost_usd or 0.0
            self.spent += c
            self.episode_cost[episode_id] = self.episode_cost.get(episode_id, 0.0) + c
            if episode_id in self.in_flight:  # what is spent no longer needs reserving
                self.in_flight[episode_id] = max(0.0, self.in_flight[episode_id] - c)

    def release(self, key: EpisodeKey, finished: bool) -> None:
        """The episode is saved and graded (``finished``) or was dropped: free its reservation
        and, when finished, learn its actual cost for later projections."""
        self.in_flight.pop(key.episode_id, None)
        if finished:
            self.actual.setdefault(key.candidate, []).append(self.episode_cost.get(key.episode_id, 0.0))

    def message(self, finished: int, planned: int) -> str:
        """The one line printed when the budget stopped the run."""
        return (f"budget reached: spent ${self.spent:.4f} of --max-cost ${self.max_usd:.4f} "
                f"(${self.spent - self.start_spent:.4f} by this invocation); the next episode "
                f"(projected ${self.refused_projection:.4f}) would pass it, so {self.not_started} "
                f"episode(s) were not started; {finished} of {planned} episodes are finished and kept; "
                "run the same command with a higher --max-cost to resume")
