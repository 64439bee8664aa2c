"""Per-candidate summaries: pillars and overall with hierarchical intervals, pass rate, splits,
diagnostics, counts of skipped/ungraded episodes and judge errors, cost and tokens.

Input is one :class:`EpisodeRecord` per planned episode (built by ``callbench.report.model.load`` from
run folders). Scores come from the grade files (``grade/models.py``): pillar and overall scores
as graded; *outcome success* = the share of episodes whose outcome is met (every applicable
critical item met), over the episodes that have an outcome; pass = the grade's verdict under its
pass rule (:func:`callbench.grade.scoring.verdict`: by default outcome met and overall >= cutoff;
the paper's rule, overall >= cutoff alone, by name). Calls cut by a turn cap before the authored
correct call could finish enter neither rate and are counted (``n_cut``). Skipped episodes
(simulator or infrastructure failure) are excluded from every mean and counted by reason, never
scored 0 (DESIGN.md, paper). Undefined pillar scores
(no applicable item) are excluded from that pillar's mean and counted in its ``n_excluded``.

Diagnostics (paper Table 3; DESIGN.md "Ten diagnostics"): for each diagnostic the
:class:`~callbench.grade.models.PointTotals` of every scored episode are summed, and
``score = 100 * sum(points) / sum(weight)``; ``mean_episode_score`` is the plain mean of the
per-episode diagnostic scores where defined. They explain the pillars; they do not sum to 100.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from callbench.bundle.models import Diagnostic
from callbench.grade.models import EpisodeGrade, PointTotals
from callbench.grade.scoring import grade_verdict
from callbench.models.base import Usage
from callbench.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    BootstrapResult,
    derive_rng,
    flat_bootstrap,
    hierarchical_bootstrap,
)
from callbench.stats.latency import CallTimings
from callbench.stats.repeats import RepeatStats, pass_hat_k_table, repeat_stats
from callbench.stats.sources import SourceShare, score_sources

# A language or difficulty slice drawing on fewer agents or scenarios than this gets a warning
# beside its interval: the hierarchical bootstrap cannot see agent-to-agent variation
# in a one-agent slice, and a handful of scenarios gives an unstable percentile interval.
SLICE_MIN_AGENTS = 2
SLICE_MIN_SCENARIOS = 10

Status = Literal["scored", "skipped", "ungraded", "not_run"]
Metric = Literal["overall", "task", "conversation", "pass", "outcome"]


class EpisodeRecord(BaseModel):
    """One planned episode as the report sees it.

    ``status``: ``scored`` (graded, not skipped), ``skipped`` (trace or grade says skipped),
    ``ungraded`` (trace present, no grade in the chosen grade set, or a grade left *not graded*
    by a judge outage: ``not_graded_reason``), ``not_run`` (planned, no
    trace). ``usage`` is the trace's usage by role (empty without a trace).
    """

    run_id: str
    episode_id: str
    candidate: str
    agent_id: str
    scenario_id: str
    language: str = ""
    difficulty: str = ""
    persona: str = ""  # the persona library id in a persona sweep ("" without one)
    repeat: int = 0
    status: Status
    skip_reason: str | None = None
    tool_calls: int = 0  # tool calls the candidate made (tool events in the trace)
    grade: EpisodeGrade | None = None
    usage: dict[str, Usage] = Field(default_factory=dict)
    end_reason: str | None = None  # the trace's end reason (None without a trace)
    not_graded_reason: str | None = None  # why the grade holds no score (a judge outage), if so
    timings: CallTimings | None = None  # the call's candidate-turn timings (None: none recorded)

    def value(self, metric: Metric) -> float | None:
        """The episode's value for ``metric`` (score points; pass and outcome as 100 or 0), or None
        when the episode is not scored or the value is undefined (no outcome; a call cut by a cap
        has neither a verdict nor an outcome)."""
        g = self.grade
        if self.status != "scored" or g is None:
            return None
        if metric == "overall":
            return g.overall
        if metric == "task":
            return g.task_score
        if metric == "conversation":
            return g.conversation_score
        if metric == "outcome":
            return None if g.outcome_met is None or g.cut else (100.0 if g.outcome_met else 0.0)
        passed = grade_verdict(g)
        return None if passed is None else (100.0 if passed else 0.0)


class DiagnosticSummary(BaseModel):
    """One diagnostic for one candidate: summed point totals and the mean episode score."""

    points: float = 0.0
    weight: float = 0.0
    items: int = 0
    score: float | None = None  # 100 * points / weight
    mean_episode_score: float | None = None
    n_episodes: int = 0  # episodes where the diagnostic had an applicable item


class CandidateSummary(BaseModel):
    """Everything the report shows for one candidate (score points on 0..100; pass rate in %)."""

    candidate: str
    runs: list[str] = Field(default_factory=list)
    n_planned: int = 0
    n_traces: int = 0
    n_scored: int = 0
    n_skipped: int = 0
    n_ungraded: int = 0
    n_not_run: int = 0
    n_overall_undefined: int = 0
    skip_reasons: dict[str, int] = Field(default_factory=dict)
    judge_errors: int = 0
    episodes_with_judge_errors: int = 0
    overall: BootstrapResult
    overall_flat: BootstrapResult
    task: BootstrapResult
    conversation: BootstrapResult
    pass_rate: BootstrapResult
    outcome_success: BootstrapResult  # % of episodes with an outcome whose outcome is met
    n_cut: int = 0  # scored episodes cut by a turn cap (no outcome, no verdict)
    n_no_outcome: int = 0  # scored, not cut, whose scenario has no critical item
    pass_rules: list[str] = Field(default_factory=list)  # the rules the grades' passes were decided by
    # pass^k on the outcome (tau2-bench's pass^k: every one of k trials reaches the outcome)
    outcome_pass_hat_k: dict[str, float] | None = None
    outcome_pass_hat_k_scenarios: dict[str, int] = Field(default_factory=dict)
    # reliability over repeats (stats/repeats.py); None with fewer than two repeats per scenario
    pass_hat_k: dict[str, float] | None = None  # str(k) -> fraction 0..1
    verdict_flip_rate: float | None = None  # fraction 0..1 of scenarios
    within_scenario_sd: float | None = None  # score points
    repeats: RepeatStats = Field(default_factory=RepeatStats)
    cutoffs: list[float] = Field(default_factory=list)
    # share of the overall score decided by action checks and by each judge (stats/sources.py)
    score_sources: dict[str, SourceShare] = Field(default_factory=dict)
    task_totals: PointTotals = Field(default_factory=PointTotals)
    conversation_totals: PointTotals = Field(default_factory=PointTotals)
    by_language: dict[str, BootstrapResult] = Field(default_factory=dict)
    by_difficulty: dict[str, BootstrapResult] = Field(default_factory=dict)
    by_language_difficulty: dict[str, dict[str, BootstrapResult]] = Field(default_factory=dict)
    by_persona: dict[str, BootstrapResult] = Field(default_factory=dict)
    """Overall score per persona of a persona sweep, with thin-slice warnings (empty without one)."""
    diagnostics: dict[Diagnostic, DiagnosticSummary] = Field(default_factory=dict)
    usage: dict[str, Usage] = Field(default_factory=dict)  # by role, summed over traces
    cost_usd: float | None = 0.0  # None when any role's price is unknown
    tokens: int = 0  # input + output tokens over all roles in the traces


def _sum_totals(parts: Iterable[PointTotals]) -> PointTotals:
    """The sum of ``parts`` field by field, added in order from zero (one model, not one per step)."""
    points, weight, items = 0.0, 0.0, 0
    for t in parts:
        points, weight, items = points + t.points, weight + t.weight, items + t.items
    return PointTotals(points=points, weight=weight, items=items)


def summarize_candidate(
    candidate: str,
    records: Sequence[EpisodeRecord],
    *,
    seed: int,
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> CandidateSummary:
    """Summarise one candidate's records (all with ``record.candidate == candidate``).

    Every interval uses its own generator derived from ``(seed, candidate, metric, split)``
    (:func:`~callbench.stats.bootstrap.derive_rng`). Raises ``ValueError`` if a record belongs
    to another candidate.
    """
    for r in records:
        if r.candidate != candidate:
            raise ValueError(f"episode {r.episode_id} belongs to {r.candidate!r}, not {candidate!r}")
    scored = [r for r in records if r.status == "scored"]

    def boot(metric: Metric, subset: Sequence[EpisodeRecord], *split: str) -> BootstrapResult:
        return hierarchical_bootstrap(
            [r.agent_id for r in subset],
            [r.scenario_id for r in subset],
            [r.value(metric) for r in subset],
            derive_rng(seed, "hierarchical", candidate, metric, *split),
            n_samples,
            confidence,
        )

    summary = CandidateSummary(
        candidate=candidate,
        runs=sorted({r.run_id for r in records}),
        n_planned=len(records),
        n_traces=sum(r.status != "not_run" for r in records),
        n_scored=len(scored),
        n_skipped=sum(r.status == "skipped" for r in records),
        n_ungraded=sum(r.status == "ungraded" for r in records),
        n_not_run=sum(r.status == "not_run" for r in records),
        n_overall_undefined=sum(r.value("overall") is None for r in scored),
        skip_reasons=dict(Counter(r.skip_reason or "unspecified" for r in records if r.status == "skipped")),
        overall=boot("overall", scored),
        overall_flat=flat_bootstrap(
            [r.value("overall") for r in scored],
            derive_rng(seed, "flat", candidate, "overall"),
            n_samples,
            confidence,
        ),
        task=boot("task", scored),
        conversation=boot("conversation", scored),
        pass_rate=boot("pass", scored),
        outcome_success=boot("outcome", scored),
    )
    grades = [r.grade for r in scored if r.grade is not None]
    summary.cutoffs = sorted({g.cutoff for g in grades})
    summary.pass_rules = sorted({g.pass_rule for g in grades})
    summary.n_cut = sum(g.cut for g in grades)
    summary.n_no_outcome = sum(g.outcome_met is None and not g.cut for g in grades)
    summary.score_sources = score_sources(grades)
    summary.judge_errors = sum(g.judge_errors for g in grades)
    summary.episodes_with_judge_errors = sum(g.judge_errors > 0 for g in grades)
    summary.task_totals = _sum_totals(g.task for g in grades)
    summary.conversation_totals = _sum_totals(g.conversation for g in grades)

    by_lang: dict[str, list[EpisodeRecord]] = defaultdict(list)
    by_diff: dict[str, list[EpisodeRecord]] = defaultdict(list)
    by_both: dict[tuple[str, str], list[EpisodeRecord]] = defaultdict(list)
    for r in scored:
        by_lang[r.language].append(r)
        by_diff[r.difficulty].append(r)
        by_both[(r.language, r.difficulty)].append(r)
    summary.by_language = {
        k: slice_warned(boot("overall", v, "language", k)) for k, v in sorted(by_lang.items())
    }
    summary.by_difficulty = {
        k: slice_warned(boot("overall", v, "difficulty", k)) for k, v in sorted(by_diff.items())
    }
    by_persona: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in scored:
        if r.persona:
            by_persona[r.persona].append(r)
    summary.by_persona = {
        k: slice_warned(boot("overall", v, "persona", k)) for k, v in sorted(by_persona.items())
    }
    for (lang, diff), subset in sorted(by_both.items()):
        summary.by_language_difficulty.setdefault(lang, {})[diff] = slice_warned(
            boot("overall", subset, "language_difficulty", lang, diff)
        )

    per_scenario: dict[tuple[str, str], list[float]] = defaultdict(list)
    per_pass: dict[tuple[str, str], list[bool]] = defaultdict(list)
    per_outcome: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r in sorted(scored, key=lambda r: r.repeat):
        key = (r.agent_id, r.scenario_id)
        passed, reached = r.value("pass"), r.value("outcome")
        if r.grade is not None and r.grade.overall is not None and passed is not None:
            per_scenario[key].append(r.grade.overall)
            per_pass[key].append(passed > 0)
        if reached is not None:
            per_outcome[key].append(reached > 0)
    summary.repeats = repeat_stats(per_scenario, passes=per_pass)
    if any(len(v) >= 2 for v in per_outcome.values()):
        summary.outcome_pass_hat_k, summary.outcome_pass_hat_k_scenarios = pass_hat_k_table(per_outcome)
    summary.pass_hat_k = summary.repeats.pass_hat_k
    summary.verdict_flip_rate = summary.repeats.verdict_flip_rate
    summary.within_scenario_sd = summary.repeats.within_scenario_sd

    summary.diagnostics = summarize_diagnostics(grades)
    summary.usage, summary.cost_usd, summary.tokens = summarize_usage(records)
    return summary


def slice_warning(result: BootstrapResult) -> str | None:
    """Why a slice's interval deserves caution, or None: it draws on fewer than
    :data:`SLICE_MIN_AGENTS` agents or fewer than :data:`SLICE_MIN_SCENARIOS` scenarios."""
    if result.n_episodes == 0:
        return None
    parts = []
    if result.n_agents < SLICE_MIN_AGENTS:
        parts.append(f"{result.n_agents} agent{'s' if result.n_agents != 1 else ''}")
    if result.n_scenarios < SLICE_MIN_SCENARIOS:
        parts.append(f"{result.n_scenarios} scenario{'s' if result.n_scenarios != 1 else ''}")
    if not parts:
        return None
    return (
        f"only {' and '.join(parts)} (fewer than {SLICE_MIN_AGENTS} agents or "
        f"{SLICE_MIN_SCENARIOS} scenarios): interval unreliable"
    )


def slice_warned(result: BootstrapResult) -> BootstrapResult:
    """``result`` with its ``warning`` set by :func:`slice_warning`."""
    result.warning = slice_warning(result)
    return result


def summarize_diagnostics(grades: Sequence[EpisodeGrade]) -> dict[Diagnostic, DiagnosticSummary]:
    """Per diagnostic: summed point totals, their score, and the mean of per-episode scores."""
    out: dict[Diagnostic, DiagnosticSummary] = {}
    for diag in Diagnostic:
        parts = [t for t in (g.diagnostics.get(diag) for g in grades) if t is not None]
        totals = _sum_totals(parts)
        episode_scores = [score for score in (t.score for t in parts) if score is not None]
        out[diag] = DiagnosticSummary(
            points=totals.points,
            weight=totals.weight,
            items=totals.items,
            score=totals.score,
            mean_episode_score=sum(episode_scores) / len(episode_scores) if episode_scores else None,
            n_episodes=len(episode_scores),
        )
    return out


def summarize_usage(records: Sequence[EpisodeRecord]) -> tuple[dict[str, Usage], float | None, int]:
    """Usage by role summed over every record's trace (skipped episodes included: their tokens
    were spent), the total cost (None when any role's cost is unknown) and total tokens."""
    by_role: dict[str, Usage] = {}
    for r in records:
        for role, usage in r.usage.items():
            by_role[role] = by_role[role] + usage if role in by_role else usage.model_copy()
    costs = [u.cost_usd for u in by_role.values()]
    cost: float | None = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
    tokens = sum(u.input_tokens + u.output_tokens for u in by_role.values())
    return by_role, cost, tokens


def group_by_candidate(records: Sequence[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    """Records grouped by candidate, in first-seen order."""
    out: dict[str, list[EpisodeRecord]] = {}
    for r in records:
        out.setdefault(r.candidate, []).append(r)
    return out


def sort_key(summary: CandidateSummary) -> tuple[int, float, str]:
    """Leaderboard order: candidates with a defined overall first, by overall descending."""
    est = summary.overall.estimate
    return (0 if est is not None else 1, -(est or 0.0), summary.candidate)
