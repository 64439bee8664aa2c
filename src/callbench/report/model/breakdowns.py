"""Per-agent breakdowns and the scenario x candidate score matrix, from episode records.

- Per agent (for each candidate): the mean overall score of the agent's scored episodes with a
  hierarchical bootstrap interval (:func:`callbench.stats.bootstrap.hierarchical_bootstrap` with
  one agent, so it redraws scenarios, then repeats), generator derived from
  ``(seed, "hierarchical", candidate, "overall", "agent", agent_id)``.
- Scenario cells: per (candidate, agent, scenario) the mean overall score over scored repeats,
  how many repeats passed (overall >= the grade's cutoff) and the episode ids behind the cell,
  so the HTML matrix can link each cell to its calls.
- Persona comparisons (a persona sweep): per candidate, every pair of personas compared on the
  scenarios both were played on (:func:`callbench.stats.paired.paired_comparison`: means over
  repeats per scenario, differences resampled by agent then scenario), generator derived from
  ``(seed, "persona_paired", candidate, persona a, persona b)``: which kind of caller the agent
  fails, on the same scenarios.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations

from pydantic import BaseModel, Field

from callbench.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    BootstrapResult,
    derive_rng,
    hierarchical_bootstrap,
)
from callbench.stats.paired import PairedComparison, paired_comparison
from callbench.stats.summary import EpisodeRecord


class PersonaComparison(BaseModel):
    """Persona a minus persona b for one candidate (``comparison.candidate_a``/``candidate_b`` hold
    the persona ids), overall score points on shared scenarios."""

    candidate: str
    comparison: PairedComparison


def persona_comparisons(
    records: Sequence[EpisodeRecord],
    *,
    seed: int,
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[PersonaComparison]:
    """Every pair of personas per candidate (module docstring), in (candidate, persona a, persona
    b) order; empty when the records hold no persona sweep."""
    by: dict[str, dict[str, list[EpisodeRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.persona:
            by[r.candidate][r.persona].append(r)
    out: list[PersonaComparison] = []
    for cand, personas in sorted(by.items()):
        for a, b in combinations(sorted(personas), 2):
            out.append(PersonaComparison(candidate=cand, comparison=paired_comparison(
                a, [(r.agent_id, r.scenario_id, r.value("overall")) for r in personas[a]],
                b, [(r.agent_id, r.scenario_id, r.value("overall")) for r in personas[b]],
                derive_rng(seed, "persona_paired", cand, a, b),
                n_samples=n_samples, confidence=confidence,
            )))
    return out


class ScenarioCell(BaseModel):
    """One candidate on one scenario. ``mean_overall`` in score points (None when no repeat has a
    defined overall score); ``passed``/``scored`` count repeats; ``episode_ids`` in repeat order."""

    candidate: str
    agent_id: str
    scenario_id: str
    language: str = ""
    difficulty: str = ""
    mean_overall: float | None = None
    scored: int = 0
    passed: int = 0
    judged: int = 0  # scored repeats with a pass verdict (a call cut by a turn cap has none)
    cut: int = 0  # scored repeats cut by a caller-turn cap
    skipped: int = 0
    episode_ids: list[str] = Field(default_factory=list)


def by_agent(
    records: Sequence[EpisodeRecord],
    *,
    seed: int,
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> dict[str, dict[str, BootstrapResult]]:
    """``candidate -> agent_id -> overall score`` over scored episodes (module docstring).
    Agents without a scored episode for a candidate are left out of that candidate's map."""
    groups: dict[tuple[str, str], list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        if r.status == "scored":
            groups[(r.candidate, r.agent_id)].append(r)
    out: dict[str, dict[str, BootstrapResult]] = {}
    for (cand, agent), recs in sorted(groups.items()):
        out.setdefault(cand, {})[agent] = hierarchical_bootstrap(
            [r.agent_id for r in recs],
            [r.scenario_id for r in recs],
            [r.value("overall") for r in recs],
            derive_rng(seed, "hierarchical", cand, "overall", "agent", agent),
            n_samples,
            confidence,
        )
    return out


def scenario_cells(records: Sequence[EpisodeRecord]) -> list[ScenarioCell]:
    """One :class:`ScenarioCell` per (candidate, agent, scenario) planned, sorted by agent,
    scenario, candidate."""
    cells: dict[tuple[str, str, str], ScenarioCell] = {}
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.repeat):
        key = (r.candidate, r.agent_id, r.scenario_id)
        cell = cells.setdefault(
            key,
            ScenarioCell(
                candidate=r.candidate,
                agent_id=r.agent_id,
                scenario_id=r.scenario_id,
                language=r.language,
                difficulty=r.difficulty,
            ),
        )
        cell.episode_ids.append(r.episode_id)
        cell.skipped += r.status == "skipped"
        overall = r.value("overall")
        if overall is not None:
            values[key].append(overall)
            cell.scored += 1
            cell.passed += r.value("pass") == 100.0
            cell.judged += r.value("pass") is not None
            cell.cut += bool(r.grade is not None and r.grade.cut)
    for key, vs in values.items():
        cells[key].mean_overall = sum(vs) / len(vs)
    return sorted(cells.values(), key=lambda c: (c.agent_id, c.scenario_id, c.candidate))
