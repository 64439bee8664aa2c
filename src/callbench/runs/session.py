"""One run end to end: build every role's client, run the episodes, grade each as it finishes.

This is the library behind ``callbench run`` and ``callbench demo``. Grading goes into one grade
set per run invocation; a resumed run with the same judges continues the run's last grade set and
first grades any trace that a killed run saved but did not grade.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.grader import (
    create_grade_set,
    finalize_grade_set,
    grade_into_set,
    iter_episode_grades,
    load_grade_set,
)
from callbench.grade.models import EpisodeGrade
from callbench.models import activity
from callbench.models.base import ModelClient, Usage
from callbench.models.cache import CacheMode, ResponseCache
from callbench.models.deployed.base import as_deployed
from callbench.models.faults import FaultLedger, collect_faults
from callbench.runfolder.lock import LOCK_FILE, hold_run_folder
from callbench.runfolder.manifest import MANIFEST, EpisodeKey, RunManifest
from callbench.runfolder.store import RunStore
from callbench.runs.clients import build_clients
from callbench.runs.executor import (
    RunConfig,
    execute_run,
    limit_providers,
    role_info,
    saved_form,
)
from callbench.runs.guard import RunHealth
from callbench.runs.plan import select_scenarios
from callbench.runs.preflight import preflight
from callbench.runs.provider_check import check_request_rules
from callbench.trace import Trace


def _reusable_grade_set(run_dir: Path, config: RunConfig, clients: dict[str, ModelClient]) -> str | None:
    store = RunStore(run_dir)
    m = store.load_manifest()
    if m is None or not m.grade_sets:
        return None
    gs = load_grade_set(run_dir, m.grade_sets[-1])
    same = (
        saved_form(gs.task_judge) == saved_form(role_info(clients["task_judge"], config.task_judge))
        and saved_form(gs.conversation_judge)
        == saved_form(role_info(clients["conversation_judge"], config.conversation_judge))
        and gs.cutoff == config.cutoff
        and gs.pass_rule == config.pass_rule
    )
    return gs.grade_set_id if same else None


async def run_and_grade(
    config: RunConfig,
    *,
    clients: dict[str, ModelClient] | None = None,
    bundle: Bundle | None = None,
    cache: ResponseCache | None = None,
    on_episode: Callable[[Trace, dict[str, Any]], None] | None = None,
    on_plan: Callable[[list[EpisodeKey], set[str]], None] | None = None,
    on_graded: Callable[[EpisodeGrade], None] | None = None,
) -> tuple[RunManifest, str | None]:
    """Run (or resume) ``config`` and grade every trace. Returns (manifest, grade set id or None
    when ``config.grade`` is false). Closes the clients it created. Unless ``config.preflight`` is
    false or the cache is ``replay_only``, every network role model is checked first
    (:mod:`callbench.runs.preflight`; raises :class:`PreflightError` before any episode). A run
    refused before it saved anything (``ValueError`` for filters that match nothing,
    :class:`RunConflict`) leaves no new folder behind. With ``config.max_cost_usd`` the run stops
    starting episodes at that budget (:mod:`callbench.runs.budget`; raises
    :class:`~callbench.runs.budget.BudgetReached` after saving and grading those in flight;
    ``ValueError`` up front when a role's price is unknown)."""
    bundle = bundle or load_bundle(config.bundle_path)
    budget = None
    if config.max_cost_usd is not None:
        if config.executor == "ray":
            raise ValueError("--max-cost is not supported with --executor ray yet; run without it")
        from callbench.runs.budget import Budget
        from callbench.runs.costplan import plan_for_run

        plan = plan_for_run(config, bundle)
        budget = Budget(config.max_cost_usd, plan.spent_usd, plan.per_episode_usd)
    own = clients is None
    cluster = None
    if config.executor == "ray":
        if cache is not None:
            raise ValueError("--cache cannot be used with --executor ray (a cache file belongs to one "
                             "machine); run without --cache")
        from callbench.runs.ray_executor import connect

        cluster = connect(config, address=config.ray_address)
    base = clients or build_clients(config, bundle, cache)
    clients = (cluster.limit(base, RunHealth(config.max_consecutive_fatal)) if cluster is not None
               else limit_providers(base, config))
    grade_set: str | None = None
    out_existed = Path(config.out).exists()
    store = RunStore(Path(config.out))
    folder_lock = contextlib.ExitStack()
    try:
        # one writer per run folder; the Ray driver holds it too
        folder_lock.enter_context(hold_run_folder(Path(config.out), f"callbench run {config.executor}"))
        hook = None
        if config.grade:
            out = Path(config.out)
            out.mkdir(parents=True, exist_ok=True)
            grade_set = _reusable_grade_set(out, config, clients) if RunStore(out).load_manifest() else None
            pending_register = grade_set is None
            creating = asyncio.Lock()

            async def hook(trace: Trace) -> None:
                nonlocal grade_set, pending_register
                async with creating:
                    if grade_set is None:
                        # on the writer thread: registering in the manifest never races a checkpoint
                        grade_set = (await store.submit(partial(
                            create_grade_set,
                            out,
                            role_info(clients["task_judge"], config.task_judge),
                            role_info(clients["conversation_judge"], config.conversation_judge),
                            cutoff=config.cutoff,
                            pass_rule=config.pass_rule,
                            latency_budget_s=config.latency_budget_s,
                            run_id=out.resolve().name,
                            bundle_hash=bundle.content_hash,
                            register=True,
                        ))).grade_set_id
                        pending_register = False
                g = await grade_into_set(
                    out, grade_set, trace, bundle, clients["task_judge"], clients["conversation_judge"]
                )
                await store.submit(
                    store.index_grade,
                    grade_set,
                    trace.episode_id,
                    g.task_score,
                    g.conversation_score,
                    g.overall,
                    g.passed,
                    g.judge_errors,
                )
                if budget is not None:
                    budget.charge(trace.episode_id, g.usage.values())
                if on_graded:
                    on_graded(g)

        if any(as_deployed(c) is not None for c in clients.values()):
            from callbench.runs.deployment import check_deployments

            agents = {a.config.id: a for a, _ in select_scenarios(bundle, config.filters)}
            await check_deployments(clients, list(agents.values()))  # hashes kept on the candidates
        pre_ledger: FaultLedger | None = None
        if config.preflight and (cache is None or cache.mode is not CacheMode.REPLAY_ONLY):
            check_request_rules(clients, select_scenarios(bundle, config.filters))
            # the preflight's requests, retries and faults go into the run's fault ledger
            # (a refused new run keeps no folder, so its ledger is only in the error line)
            activity.report("preflight: one minimal request to each network role model")
            with collect_faults() as pre_ledger:
                passed = False
                try:
                    await preflight(clients)
                    passed = True
                finally:
                    activity.clear()
                    if pre_ledger.snapshot() and (passed or (Path(config.out) / MANIFEST).exists()):
                        store.save_preflight_faults(pre_ledger)
        if cluster is not None:
            from callbench.runs.ray_executor import execute_run_ray

            manifest = await execute_run_ray(
                config, clients, bundle=bundle, on_episode=on_episode, grade_hook=hook, on_plan=on_plan,
                store=store, cluster=cluster, preflight=pre_ledger,
            )
        else:
            manifest = await execute_run(
                config, clients, bundle=bundle, on_episode=on_episode, grade_hook=hook, on_plan=on_plan,
                store=store, budget=budget, preflight=pre_ledger,
            )
        if hook is not None:
            # Grade traces a killed run saved but never graded, traces of earlier invocations when
            # this invocation started a new grade set, and episodes left not graded (a judge outage).
            graded = (
                {g.episode_id for g in iter_episode_grades(Path(config.out), grade_set) if not g.not_graded}
                if grade_set
                else set()
            )
            planned = {k.episode_id for k in manifest.planned}
            left = sorted(store.finished_ids() & planned - graded)
            with collect_faults() as judged:
                for i, eid in enumerate(left):
                    activity.report(f"grading saved episodes not graded yet ({i + 1} of {len(left)})")
                    await hook(store.load_trace(eid))
            if left:
                activity.clear()
                record_waits(store, judged)
            if grade_set is not None:
                finalize_grade_set(Path(config.out), grade_set)
                manifest = store.load_manifest() or manifest
        return manifest, grade_set
    except BaseException:
        # a run refused before anything was saved (filters matching nothing, a conflict) leaves
        # no empty folder behind
        out_dir = Path(config.out)
        store.close()
        folder_lock.close()  # removes a folder it made that holds nothing but the lock
        if not out_existed and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    finally:
        store.close()
        folder_lock.close()
        if cluster is not None:
            cluster.close()
        if own:
            for c in clients.values():
                await c.aclose()


def record_waits(store: RunStore, judged: FaultLedger) -> None:
    """Add the rate-limit waits of grading done after the executor ended (``judged``) to the
    saved manifest's entry for this invocation (``MeasuredAt.add_waits``)."""
    manifest = store.load_manifest()
    if manifest is None or not manifest.measured_at or not judged.roles:
        return
    manifest.measured_at[-1].add_waits(judged.roles)
    store.save_manifest(manifest)


def open_cache(path: Path | None, mode: str) -> ResponseCache | None:
    """The response cache for a run (``off``, or no path with ``read_write`` -> None).

    Raises ``ValueError`` for an unknown mode, for ``replay_only`` without a path (it promises no
    model calls, which only a cache can keep), and for a path that is a folder or not a SQLite
    cache file."""
    try:
        m = CacheMode(mode)
    except ValueError:
        raise ValueError(f"--cache-mode {mode!r}: expected one of off, read_write, replay_only") from None
    if m == CacheMode.REPLAY_ONLY and path is None:
        raise ValueError("--cache-mode replay_only needs --cache FILE (the responses to replay)")
    if m == CacheMode.OFF or path is None:
        return None
    if path.is_dir():
        raise ValueError(f"--cache {path}: is a folder; give a cache file path")
    try:
        return ResponseCache(path, m)
    except (sqlite3.OperationalError, OSError) as e:  # cannot create or open: not about contents
        raise ValueError(
            f"--cache {path}: cannot be opened for writing ({e}); check that its folder exists and is "
            "writable, or give another --cache path"
        ) from None
    except sqlite3.DatabaseError as e:
        raise ValueError(f"--cache {path}: not a response cache ({e})") from None


def check_run_folder(out: Path) -> None:
    """Refuse an output folder that would mix a run into unrelated files.

    Accepted: a path that does not exist yet, an empty folder (its lock file aside), or a folder
    holding a callbench run (its ``manifest.json``; the run is resumed or refused later if it is a
    different run). Raises ``ValueError`` with a one-line reason for a file, or for a non-empty
    folder without a manifest.
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"--out {out}: is a file; give a run folder")
    if (out / MANIFEST).exists():
        return
    try:
        entries = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE)
    except OSError as e:
        reason = getattr(e, "strerror", None) or e
        raise ValueError(f"--out {out}: cannot read the folder: {reason}") from None
    if entries:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise ValueError(
            f"--out {out}: not empty and not a callbench run (no {MANIFEST}; holds {shown}); "
            "give a new or empty folder, or a run folder to resume"
        )


@dataclass
class RunTotals:
    """Running totals for a progress display: ``tokens`` = input + output tokens of every role,
    judges included (the same sum as the report's cost table); ``cost`` in USD, None once any
    call's price is unknown; ``skipped`` episodes."""

    tokens: int = 0
    cost: float | None = 0.0
    skipped: int = 0

    def add_usage(self, usages: Iterable[Usage]) -> None:
        """Add usage records (a trace's or a grade's by role)."""
        for u in usages:
            self.tokens += u.input_tokens + u.output_tokens
            self.cost = None if self.cost is None or u.cost_usd is None else self.cost + u.cost_usd

    def add_trace(self, trace: Trace) -> None:
        """Add a finished episode: its simulation usage (candidate and caller) and skip status."""
        self.skipped += int(trace.skipped)
        self.add_usage(trace.usage.values())

    def cost_text(self) -> str:
        """``$1.23`` or ``unknown``."""
        return "unknown" if self.cost is None else f"${self.cost:.2f}"
