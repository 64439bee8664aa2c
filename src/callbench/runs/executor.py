"""The run executor: plan, run episodes concurrently (asyncio), save traces, grade as they finish.

Resumable: a run folder that already holds a manifest is resumed when the roles, seed, bundle hash
and loop settings agree (finished episodes are skipped; new scenarios or repeats extend the plan);
otherwise the run is refused with the differences listed. Concurrency is bounded globally
(``concurrency`` episodes at once) and per provider (``provider_limits``, e.g. ``local: 1`` since one
CPU model serves every role).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from callbench.bundle.loader import load_bundle
from callbench.bundle.models import Bundle
from callbench.bundle.provenance import review_counts
from callbench.models.base import ModelClient, ModelSettings
from callbench.models.faults import collect_faults
from callbench.runs.guard import DEFAULT_MAX_CONSECUTIVE, RunStopped, health_of
from callbench.runs.guard import limit_providers as guard_limit
from callbench.runs.manifest import EpisodeKey, RunManifest
from callbench.runs.plan import ScenarioFilters, candidate_slug, plan_episodes
from callbench.runs.provenance import code_version, git_state
from callbench.runs.store import RunStore
from callbench.sim.episode import LoopLimits, run_episode
from callbench.trace import EndReason, RoleInfo, Trace


class RoleSpec(BaseModel):
    """A model spec string plus its settings, for one role."""

    spec: str
    settings: ModelSettings = Field(default_factory=ModelSettings)


class RunConfig(BaseModel):
    """Everything that defines a run (CLI ``callbench run`` maps onto this)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    bundle_path: Path
    out: Path
    candidates: list[RoleSpec]
    caller: RoleSpec
    task_judge: RoleSpec
    conversation_judge: RoleSpec
    repeats: int = 1
    seed: int = 0
    concurrency: int = 4
    provider_limits: dict[str, int] = Field(default_factory=lambda: {"local": 1})
    filters: ScenarioFilters = Field(default_factory=ScenarioFilters)
    limits: LoopLimits = Field(default_factory=LoopLimits)
    grade: bool = True
    cutoff: float = 70.0
    preflight: bool = True
    max_consecutive_fatal: int = Field(default=DEFAULT_MAX_CONSECUTIVE, ge=1)
    """A role failing this many requests in a row with HTTP 401/403/404 stops the run."""
    scenario_major: bool = False
    """Start episodes scenario by scenario (every candidate's episode of a scenario, then the next
    scenario) instead of the plan's candidate-major order. Ids, plan and results do not change;
    with one episode at a time, a local model's caller and judges then read the scenario's shared
    prompt prefix (brief; goal and criteria) once for all candidates."""


class RunConflict(ValueError):
    """The run folder holds a different run (other roles, seed, bundle or loop settings)."""


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def limit_providers(clients: dict[str, ModelClient], config: RunConfig) -> dict[str, ModelClient]:
    """``clients`` limited per provider and sharing one run health (:func:`guard.limit_providers`)."""
    return guard_limit(clients, config.provider_limits, config.concurrency, config.max_consecutive_fatal)


ProgressHook = Callable[[Trace, dict[str, Any]], None]
GradeHook = Callable[[Trace], Awaitable[None]]


def role_info(client: Any, role: RoleSpec) -> RoleInfo:
    return RoleInfo(
        spec=role.spec,
        settings=role.settings,
        embedded_smoke_test_model=bool(getattr(client, "embedded_smoke_test_model", False)),
    )


def saved_form(role: RoleInfo) -> tuple[str, dict[str, Any]]:
    """A role's spec and settings as saved (header values are never saved, so they never count)."""
    return role.spec, role.settings.model_dump(mode="json")


def _compare(old: RunManifest, new: RunManifest) -> list[str]:
    diffs = []
    if old.bundle_hash != new.bundle_hash:
        diffs.append(f"bundle hash {old.bundle_hash[:12]} vs {new.bundle_hash[:12]}")
    if old.seed != new.seed:
        diffs.append(f"seed {old.seed} vs {new.seed}")
    for name in ("caller", "task_judge", "conversation_judge"):
        a, b = getattr(old, name), getattr(new, name)
        if saved_form(a) != saved_form(b):
            diffs.append(f"{name} {a.spec} vs {b.spec} (or its settings)")
    if [saved_form(c) for c in old.candidates] != [saved_form(c) for c in new.candidates]:
        diffs.append("candidates differ")
    if old.loop_settings != new.loop_settings:
        diffs.append(f"loop settings {old.loop_settings} vs {new.loop_settings}")
    return diffs


def rerun_ids(store: RunStore) -> set[str]:
    """Saved episodes that a resume runs again: those skipped for an infrastructure fault (the
    provider may be back; the fault was never the candidate's)."""
    return {eid for eid, end, reason in store.episode_rows()
            if end == EndReason.SKIPPED.value and (reason or "").startswith("infrastructure")}


def refresh_counts(manifest: RunManifest, store: RunStore) -> None:
    """Recompute completed/skipped counts and skip reasons from the index."""
    planned = {k.episode_id for k in manifest.planned}
    rows = [r for r in store.episode_rows() if r[0] in planned]
    skipped = [r for r in rows if r[1] == EndReason.SKIPPED.value]
    manifest.completed = len(rows) - len(skipped)
    manifest.skipped = len(skipped)
    manifest.skips_by_reason = dict(Counter((r[2] or "unknown").split(":")[0] for r in skipped))


async def execute_run(
    config: RunConfig,
    clients: dict[str, ModelClient],
    *,
    bundle: Bundle | None = None,
    on_episode: ProgressHook | None = None,
    grade_hook: GradeHook | None = None,
    on_plan: Callable[[list[EpisodeKey], set[str]], None] | None = None,
) -> RunManifest:
    """Run (or resume) every planned episode and return the final manifest.

    ``clients`` maps ``candidate:<slug>``, ``caller`` to ModelClients (created by the caller of this
    function so tests can inject scripted ones). ``grade_hook`` grades each trace as it is saved.
    Raises :class:`RunConflict` when ``config.out`` holds a different run, ``BundleError`` for a bad
    bundle, ``ValueError`` for bad filters. Infrastructure failures never raise: the episode is saved
    as skipped with its reason.
    """
    bundle = bundle or load_bundle(config.bundle_path)
    store = RunStore(config.out)
    cand_pairs = [(c.spec, c.settings) for c in config.candidates]
    planned = plan_episodes(bundle, cand_pairs, config.repeats, config.filters)
    commit, dirty = git_state()
    slug_to_role = {candidate_slug(c.spec, c.settings): c for c in config.candidates}
    manifest = RunManifest(
        run_id=config.out.resolve().name,
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        bundle_path=str(Path(bundle.root)),
        callbench_version=code_version(),
        git_commit=commit,
        git_dirty=dirty,
        candidates=[role_info(clients[f"candidate:{s}"], r) for s, r in slug_to_role.items()],
        caller=role_info(clients["caller"], config.caller),
        task_judge=role_info(clients.get("task_judge"), config.task_judge),
        conversation_judge=role_info(clients.get("conversation_judge"), config.conversation_judge),
        seed=config.seed,
        repeats=config.repeats,
        filters=config.filters.model_dump(),
        loop_settings=config.limits.model_dump(),
        planned=planned,
        started=now(),
    )
    manifest.scenario_review = review_counts(Path(bundle.root), [k.scenario_id for k in manifest.planned])
    manifest.scenarios_reviewed = manifest.scenario_review.get("reviewed", 0)
    old = store.load_manifest()
    if old is not None:
        diffs = _compare(old, manifest)
        if diffs:
            raise RunConflict(
                f"{config.out} holds a different run: " + "; ".join(diffs) + ". Use another --out folder."
            )
        known = {k.episode_id for k in old.planned}
        manifest.planned = old.planned + [k for k in planned if k.episode_id not in known]
        manifest.started, manifest.grade_sets = old.started, old.grade_sets
        manifest.code_versions = list(old.code_versions or [old.callbench_version])
        manifest.git_dirty = None if old.git_dirty is None or dirty is None else old.git_dirty or dirty
        manifest.repeats = max(old.repeats, config.repeats)
        manifest.scenario_review = review_counts(Path(bundle.root), [k.scenario_id for k in manifest.planned])
        manifest.scenarios_reviewed = manifest.scenario_review.get("reviewed", 0)
    if manifest.callbench_version not in manifest.code_versions:
        manifest.code_versions.append(manifest.callbench_version)
    store.rebuild_index()
    done = store.finished_ids() - rerun_ids(store)
    todo = [k for k in manifest.planned if k.episode_id not in done]
    if config.scenario_major:
        first = {sid: i for i, sid in reversed(list(enumerate(k.scenario_id for k in manifest.planned)))}
        todo.sort(key=lambda k: (first[k.scenario_id], k.repeat))  # stable: candidates keep plan order
    manifest.ended = None
    refresh_counts(manifest, store)
    store.save_manifest(manifest)
    if on_plan:
        on_plan(manifest.planned, done)

    wrapped = limit_providers(clients, config)
    health = health_of(wrapped)
    gate = asyncio.Semaphore(max(1, config.concurrency))
    lock = asyncio.Lock()
    version = code_version()
    totals: dict[str, Any] = {"tokens": 0, "cost": 0.0}

    async def one(key: EpisodeKey) -> None:
        async with gate:
            if health.stopped:
                return
            agent = bundle.agents[key.agent_id]
            scenario = next(s for s in agent.scenarios if s.id == key.scenario_id)
            with collect_faults() as ledger:
                trace = await run_episode(
                agent,
                scenario,
                candidate=wrapped[f"candidate:{key.candidate}"],
                caller=wrapped["caller"],
                bundle_name=bundle.meta.name,
                bundle_version=bundle.meta.version,
                bundle_hash=bundle.content_hash,
                episode_id=key.episode_id,
                run_seed=config.seed,
                repeat=key.repeat,
                limits=config.limits,
                code_version=version,
                )
            if health.stopped and trace.skipped:
                return  # not saved: run again when the run is resumed
            async with lock:
                store.save_faults(trace.episode_id, ledger)
                store.save_trace(trace)
                refresh_counts(manifest, store)
                for u in trace.usage.values():
                    totals["tokens"] += u.input_tokens + u.output_tokens
                    totals["cost"] = (
                        None if totals["cost"] is None or u.cost_usd is None else totals["cost"] + u.cost_usd
                    )
                store.save_manifest(manifest)
            if grade_hook is not None:
                await grade_hook(trace)
            if on_episode:
                on_episode(trace, totals)

    await asyncio.gather(*(one(k) for k in todo))
    refresh_counts(manifest, store)
    if health.message is not None:
        store.save_manifest(manifest)
        raise RunStopped(f"{health.message}; fix it and run the same command to resume "
                         f"({manifest.completed} episode(s) finished are kept)")
    manifest.ended = now()
    manifest.official = (
        manifest.completed == len(manifest.planned)
        and manifest.skipped == 0
        and manifest.git_dirty is False
        and len(manifest.code_versions) == 1
    )
    manifest.cost_usd = store.total_cost({k.episode_id for k in manifest.planned})
    store.save_manifest(manifest)
    return manifest
