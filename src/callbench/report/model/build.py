"""Build the typed :class:`Report` (what the terminal, HTML, JSON and CSV outputs show) from
loaded runs: fairness checks, per-candidate summaries, paired comparisons and skipped episodes.

Seeds: every interval's generator derives from ``seed`` (default: the smallest run seed among the
runs, so the order of RUN_DIR arguments does not matter) plus stable labels
(:func:`callbench.stats.bootstrap.derive_rng`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations

from pydantic import BaseModel, Field

from callbench import __version__
from callbench.audit.store import JudgeAccuracy, JudgeAudit, JudgeRole
from callbench.report.model.breakdowns import (
    PersonaComparison,
    ScenarioCell,
    by_agent,
    persona_comparisons,
    scenario_cells,
)
from callbench.report.model.cost import CostPerCall, cost_per_call
from callbench.report.model.fairness import (
    FairnessFlag,
    check_fairness,
    deployed_notes,
    describe_role,
    reference_candidates,
    smoke_test_roles,
    stand_in_judges,
)
from callbench.report.model.faults import RunFaults
from callbench.report.model.judge_accuracy import run_judge_accuracy
from callbench.report.model.judge_latency import JudgeLatency, judge_latency
from callbench.report.model.latency import LatencySummary, latency_summaries, paired_latency
from callbench.report.model.ledger import RunLedger
from callbench.report.model.load import RunData
from callbench.report.model.measured import latency_warnings
from callbench.report.model.official import missing_traces, run_is_official
from callbench.report.model.validation import GradeSetInfo, grade_set_info, judged_status
from callbench.report.model.voice import VoiceSection, voice_section
from callbench.runfolder.manifest import MeasuredAt
from callbench.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_SAMPLES, BootstrapResult, derive_rng
from callbench.stats.latency import DEFAULT_LATENCY_BUDGET_S
from callbench.stats.paired import TIE_TOLERANCE, PairedComparison, paired_comparison
from callbench.stats.summary import (
    CandidateSummary,
    EpisodeRecord,
    Metric,
    group_by_candidate,
    sort_key,
    summarize_candidate,
)


class RunInfo(BaseModel):
    """What produced one run and which grade set the report used."""

    run_id: str
    run_dir: str
    bundle_name: str
    bundle_version: str
    bundle_hash: str
    callbench_version: str
    git_commit: str | None = None
    git_dirty: bool | None = None
    official: bool = False
    """The manifest's ``official``, unless a planned call lost its trace file (report/model/official.py)."""
    missing_traces: list[str] = Field(default_factory=list)
    """Planned calls with no trace file (episode ids): the run is then not official."""
    awaiting_review: int = 0
    """Generated scenarios of the run still awaiting review (the run is then not official)."""
    started: str
    ended: str | None = None
    seed: int
    repeats: int
    planned: int = 0
    completed: int = 0
    skipped: int = 0
    candidates: list[str] = Field(default_factory=list)
    caller: str
    task_judge: str
    conversation_judge: str
    grade_set_id: str
    grade_set_created: str
    cutoff: float
    simulator: RunLedger | None = None  # simulator and channel ledger (report/model/ledger.py)
    faults: RunFaults | None = None  # provider fault ledger (report/model/faults.py)
    # report/model/judge_accuracy.py
    judge_accuracy: dict[JudgeRole, JudgeAccuracy] = Field(default_factory=dict)
    # the judges' request timings, not the candidate's latency (report/model/judge_latency.py)
    judge_latency: dict[str, JudgeLatency] = Field(default_factory=dict)
    measured_at: list[MeasuredAt] = Field(default_factory=list)
    """Every invocation's machine, concurrency, note and rate-limit waits (the manifest's)."""


class SkippedEpisode(BaseModel):
    run_id: str
    episode_id: str
    candidate: str
    agent_id: str
    scenario_id: str
    repeat: int
    reason: str


class CallRow(BaseModel):
    """One planned call as the terminal's per-call table shows it. ``overall`` in score points
    (None when not scored or undefined); ``passed`` None when not scored."""

    candidate: str
    episode_id: str
    agent_id: str
    scenario_id: str
    repeat: int
    language: str
    difficulty: str
    status: str
    end_reason: str
    tool_calls: int
    overall: float | None = None
    passed: bool | None = None
    outcome_met: bool | None = None  # None: no outcome (no critical item, cut, or not scored)
    cut: bool = False  # ended by a caller-turn cap below what the authored correct call needs
    outcome_reason: str = ""


def call_rows(records: list[EpisodeRecord]) -> list[CallRow]:
    """One :class:`CallRow` per record, in (candidate, agent, scenario, repeat) order."""
    rows = []
    for r in records:
        overall = r.value("overall")
        rows.append(
            CallRow(
                candidate=r.candidate,
                episode_id=r.episode_id,
                agent_id=r.agent_id,
                scenario_id=r.scenario_id,
                repeat=r.repeat,
                language=r.language,
                difficulty=r.difficulty,
                status=r.status,
                end_reason=r.end_reason or r.status,
                tool_calls=r.tool_calls,
                overall=overall,
                passed=None if r.value("pass") is None else r.value("pass") == 100.0,
                outcome_met=None if r.value("outcome") is None else r.value("outcome") == 100.0,
                cut=bool(r.grade is not None and r.grade.cut),
                outcome_reason=r.grade.outcome_reason if r.grade is not None else "",
            )
        )
    return sorted(rows, key=lambda c: (c.candidate, c.agent_id, c.scenario_id, c.repeat))


class ReportSettings(BaseModel):
    seed: int
    n_samples: int = DEFAULT_SAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    tie_tolerance: float = TIE_TOLERANCE
    latency_budget_s: float = DEFAULT_LATENCY_BUDGET_S  # the budget of a turn's time to first word


class Report(BaseModel):
    """The whole report; ``--json`` writes exactly this model."""

    callbench_version: str = __version__
    runs: list[RunInfo]
    settings: ReportSettings
    fairness_flags: list[FairnessFlag] = Field(default_factory=list)
    smoke_test_roles: list[str] = Field(default_factory=list)
    reference_candidates: list[str] = Field(default_factory=list)
    deployed: list[str] = Field(default_factory=list)
    """One line per deployed candidate: what was checked of its deployment and what it hides
    (:func:`callbench.report.model.fairness.deployed_notes`)."""
    stand_in_judges: list[str] = Field(default_factory=list)
    """Judges that are scripted stand-ins (``report.fairness.stand_in_judges``): their grades are
    not a measurement of quality."""
    """Candidates that replay the bundle's reference path (a scripted ceiling, not a model)."""
    candidates: list[CandidateSummary] = Field(default_factory=list)  # leaderboard order
    paired: list[PairedComparison] = Field(default_factory=list)
    paired_outcome: list[PairedComparison] = Field(default_factory=list)
    persona_paired: list[PersonaComparison] = Field(default_factory=list)
    """A persona sweep: every pair of personas per candidate on shared scenarios (breakdowns.py)."""
    """The same pairs compared on the outcome (per scenario, the share of repeats whose outcome is
    met, in percentage points): wins, losses and ties count scenarios where one reached the outcome
    more often."""
    latency: dict[str, LatencySummary] = Field(default_factory=dict)
    """Candidate -> latency (report/model/latency.py); candidates without timed calls are absent."""
    cost_per_call: dict[str, CostPerCall] = Field(default_factory=dict)
    """Candidate -> its own model's mean cost per call in USD, None when a price is unknown
    (report/model/cost.py): the quality-latency chart's third axis."""
    paired_latency: list[PairedComparison] = Field(default_factory=list)
    """Pairs compared on each call's median time to first word (ms; a minus b, positive: a slower)."""
    latency_warnings: list[str] = Field(default_factory=list)
    """Where and when latency was measured, and comparisons it makes unfair (report/model/measured.py)."""
    skipped: list[SkippedEpisode] = Field(default_factory=list)
    calls: list[CallRow] = Field(default_factory=list)
    # candidate -> agent -> overall score with interval (report/model/breakdowns.py)
    by_agent: dict[str, dict[str, BootstrapResult]] = Field(default_factory=dict)
    scenario_cells: list[ScenarioCell] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    grade_sets: list[GradeSetInfo] = Field(default_factory=list)
    """Per run, the grade set shown: cutoff, official, judge validation (report/model/validation.py)."""
    judged_status: str = ""
    """Shown beside every judged figure when a grade set's judges are not validated or failed."""
    voice: VoiceSection | None = None
    """What the voice channel did and each candidate's voice retention (report/model/voice.py);
    None when no caller turn went through the voice channel."""


def run_info(run: RunData, judge_audits: list[JudgeAudit] | None = None) -> RunInfo:
    m, g = run.manifest, run.grade_set
    return RunInfo(
        run_id=m.run_id,
        run_dir=str(run.run_dir),
        bundle_name=m.bundle_name,
        bundle_version=m.bundle_version,
        bundle_hash=m.bundle_hash,
        callbench_version=m.callbench_version,
        git_commit=m.git_commit,
        git_dirty=m.git_dirty,
        official=run_is_official(run),
        missing_traces=missing_traces(run),
        awaiting_review=m.awaiting_review,
        started=m.started,
        ended=m.ended,
        seed=m.seed,
        repeats=m.repeats,
        planned=len(m.planned),
        completed=m.completed,
        skipped=m.skipped,
        candidates=[describe_role(c) for c in m.candidates],
        caller=describe_role(m.caller),
        task_judge=describe_role(g.task_judge),
        conversation_judge=describe_role(g.conversation_judge),
        grade_set_id=g.grade_set_id,
        grade_set_created=g.created,
        cutoff=g.cutoff,
        simulator=run.ledger,  # counted while the run was loaded (load.py)
        faults=run.faults,
        judge_accuracy=run_judge_accuracy(run, judge_audits or []),
        judge_latency=judge_latency(run.records),
        measured_at=m.measured_at,
    )


def all_records(runs: list[RunData]) -> list[EpisodeRecord]:
    return [r for run in runs for r in run.records]


PARALLEL_STATS_MIN = 2_000
"""Records from which candidates are summarised on threads (below, one thread is as fast)."""


def build_report(
    runs: list[RunData],
    *,
    seed: int | None = None,
    n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    judge_audits: list[JudgeAudit] | None = None,
    latency_budget_s: float = DEFAULT_LATENCY_BUDGET_S,
) -> Report:
    """Summarise ``runs`` (at least one). ``judge_audits``: saved judges-on-known-answers audits
    (:mod:`callbench.audit.store`); a run shows the accuracy of its judges from the one that
    matches them. ``latency_budget_s``: the budget of a turn's time to first word (seconds). Raises
    :class:`~callbench.report.model.fairness.UnfairComparisonError` for different bundle hashes and
    ``ValueError`` for no runs, bad bootstrap settings or a negative latency budget."""
    if not runs:
        raise ValueError("no runs to report")
    if n_samples < 1:
        raise ValueError(f"bootstrap samples must be >= 1, got {n_samples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not latency_budget_s >= 0.0 or latency_budget_s == float("inf"):
        raise ValueError(f"latency budget must be a non-negative number of seconds, got {latency_budget_s}")
    flags = check_fairness(runs)
    seed = min(r.manifest.seed for r in runs) if seed is None else seed
    records = all_records(runs)
    groups = list(group_by_candidate(records).items())
    # numpy releases the GIL in the bootstraps' array work, so candidates are summarised on
    # threads when the run is large; each interval has its own generator
    # (stats.bootstrap.derive_rng), so the summaries do not depend on the order they are made in
    threads = min(len(groups), os.cpu_count() or 1) if len(records) >= PARALLEL_STATS_MIN else 1
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        summaries = list(pool.map(
            lambda g: summarize_candidate(g[0], g[1], seed=seed, n_samples=n_samples, confidence=confidence),
            groups,
        ))
    summaries.sort(key=sort_key)
    by_cand = group_by_candidate(records)
    paired: list[PairedComparison] = []
    paired_outcome: list[PairedComparison] = []
    for a, b in combinations([s.candidate for s in summaries], 2):
        pairs: tuple[tuple[Metric, list[PairedComparison]], ...] = (
            ("overall", paired), ("outcome", paired_outcome))
        for metric, out in pairs:
            out.append(
                paired_comparison(
                    a,
                    [(r.agent_id, r.scenario_id, r.value(metric)) for r in by_cand[a]],
                    b,
                    [(r.agent_id, r.scenario_id, r.value(metric)) for r in by_cand[b]],
                    derive_rng(seed, "paired", a, b, metric),
                    metric=metric,
                    n_samples=n_samples,
                    confidence=confidence,
                )
            )
    skipped = [
        SkippedEpisode(
            run_id=r.run_id,
            episode_id=r.episode_id,
            candidate=r.candidate,
            agent_id=r.agent_id,
            scenario_id=r.scenario_id,
            repeat=r.repeat,
            reason=r.skip_reason or "unspecified",
        )
        for r in records
        if r.status == "skipped"
    ]
    infos = [grade_set_info(r, judge_audits or []) for r in runs]
    order = [s.candidate for s in summaries]
    return Report(
        grade_sets=infos,
        judged_status=judged_status(infos),
        runs=[run_info(r, judge_audits) for r in runs],
        settings=ReportSettings(seed=seed, n_samples=n_samples, confidence=confidence,
                                latency_budget_s=latency_budget_s),
        fairness_flags=flags,
        smoke_test_roles=smoke_test_roles(runs),
        reference_candidates=reference_candidates(runs),
        stand_in_judges=stand_in_judges(runs),
        deployed=deployed_notes(runs),
        candidates=summaries,
        paired=paired,
        paired_outcome=[p for p in paired_outcome if p.n_scenarios],
        latency=latency_summaries(records, order, budget_s=latency_budget_s, seed=seed, n_samples=n_samples,
                                  confidence=confidence),
        paired_latency=paired_latency(records, order, seed=seed, n_samples=n_samples, confidence=confidence),
        latency_warnings=latency_warnings(runs, order),
        cost_per_call=cost_per_call(records, order),
        skipped=skipped,
        calls=call_rows(records),
        by_agent=by_agent(records, seed=seed, n_samples=n_samples, confidence=confidence),
        persona_paired=persona_comparisons(records, seed=seed, n_samples=n_samples, confidence=confidence),
        scenario_cells=scenario_cells(records),
        warnings=[w for r in runs for w in r.warnings],
        voice=voice_section(runs, seed=seed, n_samples=n_samples, confidence=confidence),
    )


def pass_rule_text(candidates: list[CandidateSummary]) -> str:
    """One sentence naming how the passes shown were decided (the grades' pass rules and cutoffs),
    and how many calls were cut by a turn cap (no outcome, no verdict). Empty without candidates."""
    rules = sorted({r for c in candidates for r in c.pass_rules})
    cut = ", ".join(f"{x:g}" for x in sorted({x for c in candidates for x in c.cutoffs})) or "70"
    parts = []
    if "outcome_and_overall" in rules:
        parts.append(f"Pass = outcome met (every critical item) and overall >= {cut}; outcome % = calls "
                     "whose outcome is met, of those with one")
    if "outcome_overall_latency" in rules:
        parts.append(f"Pass = outcome met, overall >= {cut} and the call's p90 time to first word within the "
                     "latency budget its grade set recorded (--pass-rule outcome_overall_latency); a call "
                     "without timings has no verdict")
    if "overall" in rules:
        parts.append(f"Pass = overall >= {cut} alone (the paper's rule, --pass-rule overall"
                     + (", in grade sets made before outcomes existed" if len(rules) == 1 else "") + ")")
    n_cut = sum(c.n_cut for c in candidates)
    if n_cut:
        parts.append(f"{n_cut} call(s) cut at the caller-turn cap before the authored call could finish: "
                     "no outcome and no pass verdict (not failed)")
    return ". ".join(parts) + ("." if parts else "")
