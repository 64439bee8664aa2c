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
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from callbench.bundle.models import Bundle
from callbench.bundle.personas import PersonaLibrary
from callbench.bundle.provenance import review_counts, unreviewed_generated
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.models import PassRule
from callbench.grade.scoring import DEFAULT_PASS_RULE
from callbench.models.base import ModelClient, ModelSettings
from callbench.models.deployed.base import as_deployed
from callbench.models.faults import FaultLedger, collect_faults
from callbench.runfolder.manifest import EpisodeKey, MeasuredAt, RunManifest
from callbench.runfolder.provenance import code_version, git_state
from callbench.runfolder.store import RunStore
from callbench.runs.budget import Budget, BudgetReached
from callbench.runs.event_loop import describe as describe_loop
from callbench.runs.guard import DEFAULT_MAX_CONSECUTIVE, RunStopped, health_of
from callbench.runs.guard import limit_providers as guard_limit
from callbench.runs.plan import ScenarioFilters, candidate_slug, plan_episodes, sweep_personas
from callbench.runs.saving import (  # noqa: F401  (re-exported: the executor's public names)
    CHECKPOINT_SECONDS,
    GradeHook,
    ProgressHook,
    RunCounts,
    Saver,
    refresh_counts,
    run_all,
)
from callbench.runs.voice import prepare_voice, voice_differences, voice_for
from callbench.sim.episode import LoopLimits, run_episode
from callbench.sim.voice.setup import ChannelMode, VoiceSettings
from callbench.stats.latency import DEFAULT_LATENCY_BUDGET_S
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
    pass_rule: PassRule = DEFAULT_PASS_RULE
    """How a pass is decided (:func:`callbench.grade.scoring.verdict`): the outcome and the cutoff by
    default; ``overall`` is the paper's rule (the cutoff alone)."""
    preflight: bool = True
    max_consecutive_fatal: int = Field(default=DEFAULT_MAX_CONSECUTIVE, ge=1)
    """A role failing this many requests in a row with HTTP 401/403/404 stops the run."""
    scenario_major: bool = False
    """Start episodes scenario by scenario (every candidate's episode of a scenario, then the next
    scenario) instead of the plan's candidate-major order. Ids, plan and results do not change;
    with one episode at a time, a local model's caller and judges then read the scenario's shared
    prompt prefix (brief; goal and criteria) once for all candidates."""
    executor: Literal["local", "ray"] = "local"
    """Where episodes run: ``local`` (asyncio, this process) or ``ray`` (:mod:`runs.ray_executor`).
    Not part of the run's identity: a run started on one may be resumed on the other."""
    ray_address: str | None = None
    """The Ray cluster for ``executor="ray"`` (``auto``, ``ray://host:10001``; None: start one)."""
    channel: ChannelMode = None
    """``audio``: every scenario through the voice channel; ``text``: none; None: the scenarios
    whose ``channel.audio`` is enabled (:mod:`callbench.sim.voice.setup`)."""
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    agent_speech: Literal["off", "tts", "line"] = "off"
    """How the candidate's side is spoken on the voice channel (``run --agent-speech``): ``off``;
    ``tts``, synthesised so that its measured duration is the turn's spoken time; ``line``, also
    carried over the line and recognised for the caller simulator (:mod:`callbench.sim.voice.agent`).
    Recorded in the manifest's ``voice`` record, so a resume with another setting is refused."""
    latency_budget_s: float = Field(default=DEFAULT_LATENCY_BUDGET_S, ge=0)
    """Budget of a turn's time to first word (recorded in the manifest; the report's default and
    the ``outcome_overall_latency`` pass rule's budget)."""
    latency_note: str | None = None
    """Free text recorded with the run's measurements: region, network (``--latency-note``)."""
    personas: PersonaLibrary | None = None
    """A persona sweep (``run --personas FILE``): every persona x scenario x repeat is one episode
    with its own seeds (:mod:`callbench.bundle.personas`); None: each scenario's own manner."""
    personas_file: str = ""
    """Where the library was read from (for messages and the manifest)."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """Stop starting episodes before the run's spend would pass this many USD
    (:mod:`callbench.runs.budget`). Not part of the run's identity: resume with a higher one."""


class RunConflict(ValueError):
    """The run folder holds a different run (other roles, seed, bundle or loop settings)."""


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def measured_at(started: str, concurrency: int, executor: str, note: str | None) -> MeasuredAt:
    """This machine and invocation, as the manifest records where latency was measured (the
    event loop is the running one: call it from the run's loop)."""
    return MeasuredAt(started=started, platform=platform.platform(), cpu_count=os.cpu_count(),
                      concurrency=concurrency, executor=executor, event_loop=describe_loop(), note=note)


def limit_providers(clients: dict[str, ModelClient], config: RunConfig) -> dict[str, ModelClient]:
    """``clients`` limited per provider and sharing one run health (:func:`guard.limit_providers`)."""
    return guard_limit(clients, config.provider_limits, config.concurrency, config.max_consecutive_fatal)


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
    if old.deployed_configs != new.deployed_configs:
        diffs.append("the deployed configuration changed (deployed_configs): "
                     "a new deployment is a new candidate")
    if (voice := voice_differences(old.voice, new.voice)) is not None:
        diffs.append(voice)
    if old.loop_settings != new.loop_settings:
        diffs.append(f"loop settings {old.loop_settings} vs {new.loop_settings}")
    old_p, new_p = (m.personas and m.personas.get("sha256") for m in (old, new))
    if old_p != new_p:
        diffs.append(f"persona library {(old_p or 'none')[:12]} vs {(new_p or 'none')[:12]}")
    return diffs


def rerun_ids(store: RunStore) -> set[str]:
    """Saved episodes that a resume runs again: those skipped for an infrastructure fault (the
    provider may be back; the fault was never the candidate's)."""
    return {eid for eid, end, reason in store.episode_rows()
            if end == EndReason.SKIPPED.value and (reason or "").startswith("infrastructure")}


IN_FLIGHT_PER_SLOT = 2
"""Episodes in flight per concurrency slot: at most ``IN_FLIGHT_PER_SLOT * concurrency`` episodes
are simulating or finished and waiting for their save and grade. Saving and grading run outside
the slot, so the next episodes simulate meanwhile, but never far ahead of grading: a judge that
keeps failing stops the run within about ``concurrency`` episodes of its Nth failure (no budget is
spent on episodes whose grading cannot follow), and a run holds a bounded number of traces."""

def plan_run(config: RunConfig, clients: dict[str, ModelClient], bundle: Bundle, store: RunStore,
             executor: str = "local", preflight: FaultLedger | None = None,
             ) -> tuple[RunManifest, list[EpisodeKey], set[str], RunCounts]:
    """Plan (or resume) the run in ``store``: returns (manifest as saved, episodes to run, ids
    already done, counts). ``preflight``: the ledger of this invocation's preflight, whose
    rate-limit waits the invocation's ``measured_at`` entry records apart. Raises
    :class:`RunConflict` when the folder holds a different run.
    Brings the index up to date with the trace files cheaply (:meth:`RunStore.reconcile_index`)."""
    cand_pairs = [(c.spec, c.settings) for c in config.candidates]
    personas = sweep_personas(bundle, config.filters, config.personas, config.personas_file)
    planned = plan_episodes(bundle, cand_pairs, config.repeats, config.filters, personas)
    commit, dirty = git_state()
    slug_to_role = {candidate_slug(c.spec, c.settings): c for c in config.candidates}
    manifest = RunManifest(
        run_id=config.out.resolve().name,
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        bundle_path=str(Path(bundle.root)),
        deployed_configs={d.spec: d.config_sha256
                          for d in map(as_deployed, clients.values()) if d is not None},
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
        pass_rule=config.pass_rule if config.grade else None,
        voice=prepare_voice(config, bundle),
        personas=None if config.personas is None else {
            "file": config.personas_file, "sha256": config.personas.content_hash(), "ids": personas},
        planned=planned,
        started=now(),
    )
    _note_review(manifest, Path(bundle.root))
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
        _note_review(manifest, Path(bundle.root))
        manifest.executors = list(old.executors)
    if manifest.callbench_version not in manifest.code_versions:
        manifest.code_versions.append(manifest.callbench_version)
    if executor not in manifest.executors:
        manifest.executors.append(executor)
    here = measured_at(manifest.started if old is None else now(), config.concurrency, executor,
                       config.latency_note)
    if preflight is not None:
        here.add_preflight(preflight.roles)
    manifest.measured_at = [*(old.measured_at if old is not None else []), here]
    manifest.latency_budget_s = config.latency_budget_s
    store.reconcile_index()
    rows = store.episode_rows()
    rerun = {eid for eid, end, reason in rows
             if end == EndReason.SKIPPED.value and (reason or "").startswith("infrastructure")}
    done = {eid for eid, _, _ in rows} - rerun
    todo = [k for k in manifest.planned if k.episode_id not in done]
    if config.scenario_major:
        first = {sid: i for i, sid in reversed(list(enumerate(k.scenario_id for k in manifest.planned)))}
        todo.sort(key=lambda k: (first[k.scenario_id], k.repeat))  # stable: candidates keep plan order
    manifest.ended = None
    counts = RunCounts({k.episode_id for k in manifest.planned}, rows)
    counts.apply(manifest)
    store.save_manifest(manifest)
    return manifest, todo, done, counts


async def simulate(key: EpisodeKey, bundle: Bundle, clients: dict[str, ModelClient], config: RunConfig,
                   version: str) -> tuple[Trace, FaultLedger]:
    """Run one planned episode with the given (limited) clients; returns its trace and the fault
    ledger of its requests. Pure function of the key, seed and models: any executor calls this."""
    agent = bundle.agents[key.agent_id]
    scenario = next(s for s in agent.scenarios if s.id == key.scenario_id)
    with collect_faults() as ledger:
        trace = await run_episode(
            agent,
            scenario,
            candidate=clients[f"candidate:{key.candidate}"],
            caller=clients["caller"],
            bundle_name=bundle.meta.name,
            bundle_version=bundle.meta.version,
            bundle_hash=bundle.content_hash,
            episode_id=key.episode_id,
            run_seed=config.seed,
            repeat=key.repeat,
            limits=config.limits,
            code_version=version,
            voice=voice_for(scenario, config, bundle),
            persona=None if key.persona is None or config.personas is None
            else config.personas.get(key.persona),
        )
    return trace, ledger


def _note_review(manifest: RunManifest, root: Path) -> None:
    """Record the review status of the run's scenarios (provenance.yaml) in ``manifest``."""
    ids = [k.scenario_id for k in manifest.planned]
    manifest.scenario_review = review_counts(root, ids)
    manifest.scenarios_reviewed = manifest.scenario_review.get("reviewed", 0)
    manifest.awaiting_review = len(set(unreviewed_generated(root)) & set(ids))


async def finish_run(
    store: RunStore, manifest: RunManifest, saver: Saver, health_message: str | None
) -> RunManifest:
    """Write the final manifest (or raise :class:`RunStopped` after saving it when the run
    stopped for a failing role)."""
    saver.counts.apply(manifest)
    if health_message is not None:
        await store.submit(store.save_manifest, manifest)
        raise RunStopped(f"{health_message}; fix it and run the same command to resume "
                         f"({manifest.completed} episode(s) finished are kept)")
    manifest.ended = now()
    manifest.official = (
        manifest.awaiting_review == 0
        and manifest.completed == len(manifest.planned)
        and manifest.skipped == 0
        and manifest.git_dirty is False
        and len(manifest.code_versions) == 1
    )
    manifest.cost_usd = store.total_cost({k.episode_id for k in manifest.planned})
    await store.submit(store.save_manifest, manifest)
    return manifest


async def execute_run(
    config: RunConfig,
    clients: dict[str, ModelClient],
    *,
    bundle: Bundle | None = None,
    on_episode: ProgressHook | None = None,
    grade_hook: GradeHook | None = None,
    on_plan: Callable[[list[EpisodeKey], set[str]], None] | None = None,
    store: RunStore | None = None,
    budget: Budget | None = None,
    preflight: FaultLedger | None = None,
) -> RunManifest:
    """Run (or resume) every planned episode and return the final manifest.

    ``clients`` maps ``candidate:<slug>``, ``caller`` to ModelClients (created by the caller of this
    function so tests can inject scripted ones). ``grade_hook`` grades each trace as it is saved,
    outside the episode's concurrency slot (at most :data:`IN_FLIGHT_PER_SLOT` episodes in flight
    per slot). The first write that fails stops the run (:func:`run_all`) and is raised.
    ``store`` is the run folder's store when the caller shares it (its writer thread then
    serialises every write); one is opened and closed here otherwise. Raises :class:`RunConflict`
    when ``config.out`` holds a different run, ``BundleError`` for a bad bundle, ``ValueError``
    for bad filters or an unreadable trace file.
    Infrastructure failures never raise: the episode is saved as skipped with its reason.
    ``preflight``: the ledger of the preflight this invocation ran (its rate-limit waits go to the
    manifest's ``measured_at``, apart from the run's).
    With ``budget``, an episode starts only if the budget allows it (:meth:`Budget.reserve`);
    once one is refused, none starts, and :class:`BudgetReached` is raised after the episodes in
    flight are saved and graded and the manifest written.
    """
    bundle = bundle or load_bundle(config.bundle_path)
    own_store = store is None
    store = store or RunStore(config.out)
    try:
        manifest, todo, done, counts = plan_run(config, clients, bundle, store, preflight=preflight)
        if on_plan:
            on_plan(manifest.planned, done)
        wrapped = limit_providers(clients, config)
        health = health_of(wrapped)
        gate = asyncio.Semaphore(max(1, config.concurrency))
        window = asyncio.Semaphore(IN_FLIGHT_PER_SLOT * max(1, config.concurrency))
        version = code_version()
        saver = Saver(store, manifest, counts, grade_hook, on_episode, lambda: health.stopped)

        async def one(key: EpisodeKey) -> None:
            async with window:
                async with gate:
                    if health.stopped:
                        return
                    if budget is not None and not budget.reserve(key):
                        return
                    try:
                        trace, ledger = await simulate(key, bundle, wrapped, config, version)
                    except BaseException:
                        if budget is not None:
                            budget.release(key, finished=False)
                        raise
                if health.stopped and trace.skipped:
                    if budget is not None:
                        budget.release(key, finished=False)
                    return  # not saved: run again when the run is resumed
                if budget is not None:
                    budget.charge(key.episode_id, trace.usage.values())
                await saver.save(trace, ledger)
                if budget is not None:
                    budget.release(key, finished=True)

        await run_all(one(k) for k in todo)
        if budget is not None and budget.stopped and health.message is None:
            saver.counts.apply(manifest)
            await store.submit(store.save_manifest, manifest)
            raise BudgetReached(budget.message(manifest.completed, len(manifest.planned)))
        return await finish_run(store, manifest, saver, health.message)
    finally:
        if own_store:
            store.close()
