"""The run manifest (``RUN_DIR/manifest.json``) and the run folder layout.

Layout::

    RUN_DIR/manifest.json                       RunManifest
    RUN_DIR/traces/<episode_id>.json.gz         one Trace per finished episode (gzip JSON, atomic writes;
                                                older runs: <episode_id>.json, still read)
    RUN_DIR/faults/<episode_id>.json            its fault ledger (requests, retries, faults by role)
    RUN_DIR/grades/<grade_set_id>/grade_set.json, episodes/<episode_id>.json.gz (or .json)

Names and format of the per-episode trace and grade files: :mod:`callbench.runfolder.episode_files`.
    RUN_DIR/index.sqlite                        run index (episodes, status, scores)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from callbench.models.faults import RateLimitWaits, RoleFaults
from callbench.trace import RoleInfo

MANIFEST = "manifest.json"
TRACES = "traces"
FAULTS = "faults"
GRADES = "grades"
WAIT_ROLES = ("candidate", "caller", "task_judge", "conversation_judge")
"""The roles whose rate-limit waits every invocation records (``MeasuredAt.rate_limits``)."""


class EpisodeKey(BaseModel):
    """Identifies one planned episode."""

    episode_id: str
    candidate: str
    agent_id: str
    scenario_id: str
    repeat: int
    persona: str | None = None  # the persona library id in a persona sweep, else None


class MeasuredAt(BaseModel):
    """Where and how one invocation of a run measured latency: when it started (UTC, ISO 8601),
    the machine (``platform.platform()``, CPU count), episodes at once (``--concurrency``), the
    executor, the event loop that ran it (``runs/event_loop.py``: ``"uvloop 0.21.0"`` or
    ``"asyncio"``; empty in runs made before callbench recorded it), the free-text note of
    ``--latency-note`` (region, network: what we cannot see), and the
    rate-limit waits of its requests by role and by candidate."""

    started: str
    platform: str = ""
    cpu_count: int | None = None
    concurrency: int = 1
    executor: str = "local"
    event_loop: str = ""
    note: str | None = None
    rate_limits: dict[str, RateLimitWaits] | None = None
    """Role (``candidate``, ``caller``, ``task_judge``, ``conversation_judge``) -> this invocation's
    requests answered 429 and seconds waited (:class:`~callbench.models.faults.RateLimitWaits`),
    summed over the episodes it ran and graded (None: made before callbench recorded them)."""
    candidate_rate_limits: dict[str, RateLimitWaits] = Field(default_factory=dict)
    """The ``candidate`` role's waits split by candidate (the plan's candidate slug)."""
    preflight_rate_limits: dict[str, RateLimitWaits] | None = None
    """Role -> the waits of this invocation's preflight (one minimal request to each network role's
    model before the run starts: ``runs/preflight.py``), kept apart from :attr:`rate_limits`
    because no call was measured then. None: no preflight ran (``--no-preflight``, a replay-only
    cache, a resumed run with nothing left to check) or the run was made before callbench
    recorded them."""

    def add_preflight(self, roles: dict[str, RoleFaults]) -> None:
        """Record the rate-limit waits of a preflight ledger's ``roles``."""
        self.preflight_rate_limits = _add_roles(None, roles)

    def add_waits(self, roles: dict[str, RoleFaults], candidate: str | None = None) -> None:
        """Add the rate-limit waits of one ledger's ``roles`` (an episode's, or its grading's) to
        this invocation's; the ``candidate`` role's also to ``candidate``'s own (when given)."""
        self.rate_limits = _add_roles(self.rate_limits, roles)
        if candidate is not None and "candidate" in roles:
            waits = RateLimitWaits.of(roles["candidate"])
            self.candidate_rate_limits.setdefault(candidate, RateLimitWaits()).add(waits)


def _add_roles(into: dict[str, RateLimitWaits] | None,
               roles: dict[str, RoleFaults]) -> dict[str, RateLimitWaits]:
    """``into`` (every role of :data:`WAIT_ROLES` at zero when None) with each role's waits in
    ``roles`` added, in place."""
    out = {r: RateLimitWaits() for r in WAIT_ROLES} if into is None else into
    for role, counts in roles.items():
        out.setdefault(role, RateLimitWaits()).add(RateLimitWaits.of(counts))
    return out


class RunManifest(BaseModel):
    """What produced a run: bundle hash, code version and git state, every role's model spec and
    settings, seeds, times, counts and skips by reason. ``official`` is true only when every
    invocation ran one code version (``code_versions``) from a clean working tree (``git_dirty``
    is true when any invocation's tree was dirty), every planned episode completed, and no
    scenario of the run awaits review (``awaiting_review``)."""

    run_id: str
    bundle_name: str
    bundle_version: str
    bundle_hash: str
    bundle_path: str
    deployed_configs: dict[str, str | None] = Field(default_factory=dict)
    """Deployed candidates: spec -> SHA-256 of the deployed configuration read before the run
    (None: the platform does not let us read it, so its tools were not checked)."""
    callbench_version: str
    git_commit: str | None = None
    git_dirty: bool | None = None
    candidates: list[RoleInfo]
    caller: RoleInfo
    task_judge: RoleInfo
    conversation_judge: RoleInfo
    seed: int
    repeats: int
    filters: dict[str, list[str] | int | None] = Field(default_factory=dict)
    loop_settings: dict[str, int | bool] = Field(default_factory=dict)
    voice: dict[str, Any] | None = None
    """The voice channel: mode (``--channel``), engines with versions and settings (None: text)."""
    personas: dict[str, Any] | None = None
    """A persona sweep: ``file``, ``sha256`` of the library's content and the swept ``ids``
    (None: no sweep; each scenario's own manner)."""
    planned: list[EpisodeKey] = Field(default_factory=list)
    started: str
    ended: str | None = None
    completed: int = 0
    skipped: int = 0
    skips_by_reason: dict[str, int] = Field(default_factory=dict)
    official: bool = False
    code_versions: list[str] = Field(default_factory=list)
    """Every callbench version (``+g<commit>[.dirty]``) an invocation of this run ran with, in
    order; a run resumed or extended by different code is never official."""
    grade_sets: list[str] = Field(default_factory=list)
    pass_rule: str | None = None
    """The pass rule the run was graded by (``outcome_and_overall`` or the paper's ``overall``;
    callbench.grade.models.PassRule); None for runs made before outcomes existed or not graded.
    Each grade set records its own (a regrade may differ)."""
    cost_usd: float | None = 0.0
    scenario_review: dict[str, int] = Field(default_factory=dict)
    """The run's scenarios by review status in the bundle's ``provenance.yaml`` when the run was
    planned (``reviewed``, ``machine_checked``, ``unreviewed``, ``no_record``)."""
    scenarios_reviewed: int = 0
    """How many of the run's scenarios a person reviewed (``scenario_review["reviewed"]``)."""
    awaiting_review: int = 0
    """How many of the run's scenarios were made by ``callbench generate`` and still await review
    (provenance ``made: generated``, ``review.status: unreviewed``); a run with any is not
    official."""
    executors: list[str] = Field(default_factory=list)
    """Every executor (``local`` asyncio, ``ray``) an invocation of this run used, in order."""
    measured_at: list[MeasuredAt] = Field(default_factory=list)
    """Every invocation's machine, concurrency and note, in order: latency depends on them."""
    latency_budget_s: float | None = None
    """The budget of a turn's time to first word the run was made with (``--latency-budget``;
    None: runs made before it, reported with the default)."""


def traces_dir(run_dir: Path) -> Path:
    return run_dir / TRACES


def grades_dir(run_dir: Path, grade_set_id: str) -> Path:
    return run_dir / GRADES / grade_set_id


def run_owned_path(run_dirs: list[Path], path: Path) -> Path | None:
    """The run folder whose saved data ``path`` would overwrite (its manifest, its index database
    and journal files, or anything under ``traces/``, ``faults/`` or ``grades/``), else None. Report outputs
    must never land there."""
    target = Path(path).resolve()
    for run_dir in run_dirs:
        root = Path(run_dir).resolve()
        if target.parent == root and (target.name == MANIFEST or target.name.startswith("index.sqlite")):
            return Path(run_dir)
        if any(target.is_relative_to(root / sub) for sub in (TRACES, GRADES, FAULTS)):
            return Path(run_dir)
    return None
