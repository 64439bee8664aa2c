"""Typed grading output: one :class:`EpisodeGrade` per trace, grouped in a grade set.

On disk (``RUN_DIR/grades/<grade_set_id>/``): ``grade_set.json`` (:class:`GradeSetManifest`) and
``episodes/<episode_id>.json.gz`` (:class:`EpisodeGrade`). A regrade writes a new grade set and leaves
earlier ones in place.

Scores follow the paper's equations (DESIGN.md "Scores"): labels not met / partial / met map to
r = 0 / 0.5 / 1; ratings g in 1..5 map to r = (g - 1) / 4; weights w in {1, 2, 3}; not-applicable
items and judge errors enter neither sum; pillar = 100 * sum(w r) / sum(w), undefined (None) when
no item applies; overall = mean of the defined pillars (None when neither is defined).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from callbench.bundle.models import Diagnostic, Pillar
from callbench.models.base import Usage
from callbench.models.faults import RoleFaults
from callbench.trace import RoleInfo


class Label(StrEnum):
    MET = "met"
    PARTIAL = "partial"
    NOT_MET = "not_met"
    NOT_APPLICABLE = "not_applicable"
    JUDGE_ERROR = "judge_error"  # excluded and counted, never scored as not met


LABEL_VALUE: dict[Label, float] = {Label.MET: 1.0, Label.PARTIAL: 0.5, Label.NOT_MET: 0.0}


class GradedItem(BaseModel):
    """One scored item: an action check, a judged criterion or a conversation rating.

    A rating carries ``rating`` and no label, except when it is not applicable
    (``label=not_applicable``) or unusable (``label=judge_error``); both leave ``r`` None.
    """

    id: str
    source: Literal["action_check", "task_criterion", "conversation_criterion", "rating"]
    pillar: Pillar
    diagnostic: Diagnostic
    weight: int = Field(ge=1, le=3)
    label: Label | None = None  # None for ratings
    rating: int | None = Field(default=None, ge=1, le=5)
    r: float | None = None  # 0..1; None when not applicable or judge error
    reason: str = ""
    cited_messages: list[int] = Field(default_factory=list)  # TraceMessage.index values
    cited_events: list[int] = Field(default_factory=list)  # ToolEvent.index values
    critical: bool = False  # outcome-critical (bundle: ActionCheck/StateCheck.is_critical)
    # predecessors whose miss alone failed this check (bundle/checks.py CheckResult.not_reached):
    # the item keeps its label in the pillar but enters no diagnostic, so one slip counts once there
    not_reached: list[str] = Field(default_factory=list)


class PointTotals(BaseModel):
    """Raw totals so a reader can reweight: points = sum(w r), weight = sum(w) over applicable items."""

    points: float = 0.0
    weight: float = 0.0
    items: int = 0

    @property
    def score(self) -> float | None:
        """100 * points / weight, or None when no item applies."""
        return None if self.weight == 0 else 100.0 * self.points / self.weight


PassRule = Literal["outcome_and_overall", "overall", "outcome_overall_latency"]
"""How a pass is decided. ``outcome_and_overall`` (the default): the outcome is met (every
applicable critical item met) and overall >= cutoff; an episode without an outcome (its scenario
has no critical item, with the reason given) passes on the overall score alone.
``overall``: the paper's rule, overall >= cutoff alone (grade sets written before outcomes existed
were graded by it). ``outcome_overall_latency``: ``outcome_and_overall`` and the call's p90 time
to first word within the grade set's latency budget (``latency_budget_s``); a call without timings
gets no verdict under it, a timed call whose agent never spoke fails it. docs/validity.md "Outcome
and pass", docs/latency.md."""
PASS_RULES: tuple[str, ...] = ("outcome_and_overall", "overall", "outcome_overall_latency")
PAPER_PASS_RULE: PassRule = "overall"

DEFAULT_LATENCY_BUDGET_S = 0.8
"""The default latency budget for a turn's time to first word: 800 ms. Voice-agent practice puts
the tolerable pause before a reply at roughly 0.5 to 1 s (a benchmark of models for voice agents
used about 700 ms to first token); 800 ms sits in that range. ``--latency-budget`` changes it."""


class JudgeRequestTiming(BaseModel):
    """The timings of one judge request (``models/timing.py``), seconds from its first send:
    ``ask`` is 0 for the first question, 1 for the re-ask with the problems appended;
    ``waited_s`` the answer complete (HTTP retries and backoff included, ``retries`` of them);
    ``first_token_s`` its first token (not streamed: the whole answer); ``replayed``: served from
    the response cache (the original request's times, not measured now). Measurements, not
    content: no score depends on them."""

    ask: int
    waited_s: float
    first_token_s: float
    streamed: bool = False
    retries: int = 0
    replayed: bool = False


class EpisodeGrade(BaseModel):
    """Grades of one episode. Skipped episodes carry no items and no scores."""

    episode_id: str
    grade_set_id: str
    trace_sha256: str
    agent_id: str
    scenario_id: str
    language: str
    difficulty: str
    repeat: int
    candidate: str
    skipped: bool = False
    skip_reason: str | None = None
    end_reason: str
    items: list[GradedItem] = Field(default_factory=list)
    task: PointTotals = Field(default_factory=PointTotals)
    conversation: PointTotals = Field(default_factory=PointTotals)
    task_score: float | None = None
    conversation_score: float | None = None
    overall: float | None = None
    passed: bool | None = None
    cutoff: float = 70.0
    pass_rule: PassRule = PAPER_PASS_RULE  # grades written before outcomes existed: the paper's rule
    outcome_met: bool | None = None
    """Every applicable critical item met (True), one not met or not applicable (False), or no
    outcome: the scenario has no critical item, or the call was cut by a turn cap (``cut``)."""
    outcome_reason: str = ""  # which critical item failed, or why there is no outcome
    cut: bool = False
    """Ended by a caller-turn cap below what the scenario's authored correct call needs: its
    outcome is "not reached" rather than failed, and it enters no pass or outcome rate."""
    diagnostics: dict[Diagnostic, PointTotals] = Field(default_factory=dict)
    judge_errors: int = 0
    usage: dict[str, Usage] = Field(default_factory=dict)  # judge usage by role
    judge_attempts: dict[str, int] = Field(default_factory=dict)  # requests made, by role
    judge_reasks: dict[str, str] = Field(default_factory=dict)
    """By judge role, why it was asked again: the first problem of its unusable first reply (or the
    provider's error), at most :data:`~callbench.grade.judges.REASK_CHARS` characters; absent when the
    first reply was usable. Read it to tell a judge that wanders from one that cannot answer."""
    judge_timings: dict[str, list[JudgeRequestTiming]] = Field(default_factory=dict)
    """By judge role, the timings of each request whose client timed it (scripted judges: none)."""
    not_graded: bool = False
    """True when a pillar's judged items mostly errored (``scoring.NOT_GRADED_SHARE``): no score,
    excluded from means, pass rates and comparisons, graded again by the next grading pass."""
    not_graded_reason: str | None = None  # "judge_outage: ..." or "judge_output: ..."
    faults: dict[str, RoleFaults] = Field(default_factory=dict)  # judge requests/retries/faults by role
    timed: bool = False  # the trace held turn timings
    first_word_p90_s: float | None = None
    """The call's p90 time to first word over its candidate turns that spoke (inverted CDF;
    seconds); None without timings or when no turn spoke."""
    latency_budget_s: float | None = None  # the budget of ``outcome_overall_latency`` (seconds)


class GradeSetManifest(BaseModel):
    """Which judges produced a grade set, with what settings, when, from which code."""

    grade_set_id: str
    created: str
    task_judge: RoleInfo
    conversation_judge: RoleInfo
    cutoff: float = 70.0
    pass_rule: PassRule = PAPER_PASS_RULE  # grade sets written before outcomes existed: the paper's
    latency_budget_s: float | None = None  # the budget under ``outcome_overall_latency`` (seconds)
    code_version: str = ""
    episodes: int = 0
    skipped: int = 0
    judge_errors: int = 0
    not_graded: int = 0
    run_id: str = ""
    bundle_hash: str = ""
    prompt_version: str = ""  # judge prompt version (grade/prompts.py PROMPT_VERSION)
    rubric: dict[str, Any] = Field(default_factory=dict)  # the rating rubric used (grade/rubric.py)
    finished: str | None = None  # set when every trace of the run was graded into this set
    # "judge": graded by the task and conversation judges; "human": imported labels
    # (grade/labels.py), whose judges are "human:<hash of the labels file>"
    kind: Literal["judge", "human"] = "judge"
    source_grade_set: str | None = None  # human: the grade set the labelling sheet was exported from
    labels_file: str | None = None  # human: the imported sheet
