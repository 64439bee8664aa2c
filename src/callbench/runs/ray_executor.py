"""Ray as the executor for clusters (``callbench run ... --executor ray [--ray-address ADDR]``).

The driver (the process running ``callbench run``) plans the run, sends each episode to one of a
pool of Ray worker actors, and saves every trace itself when it comes back, through the same
:class:`~callbench.runs.executor.Saver` as the local executor: traces, fault ledgers, the index and
the manifest are written only by the driver, once per episode, whatever Ray retries. Grading runs
on the driver as traces arrive. Resume rules are the local executor's (same plan, same index).

- **Workers**: ``num_workers`` actors (default: the cluster's CPU count), each holding the bundle
  (sent once through the object store, so nodes need no shared folder) and its own role clients
  built from the run's specs (API keys come from each node's environment; nothing secret is sent).
  An episode is ``simulate(key)``: the same function as the local executor's, so the same seed
  gives the same trace.
- **Provider limits across the cluster**: one :class:`ProviderLimiter` actor per provider holds
  the provider's limit (``provider_limits``, ``concurrency`` when not listed); every model call on
  every worker, and the driver's judge calls, hold one of its permits.
- **A killed worker** (a crash, ``kill -9``, the out-of-memory killer): actors restart
  (``max_restarts``) and their unfinished calls are retried (``max_task_retries``), so that episode
  runs again from its start; a restarted worker first returns the permits its previous life held.
  The episode is saved once, when a result arrives. A restart re-runs the actor's constructor with
  the same arguments, so the driver holds the bundle's object reference for the whole run: Ray
  frees an object once no reference is held, and a restart then fails
  (``ReferenceCountingAssertionError``, ray-project/ray#53727).
- **A cluster that cannot recover** (a worker dead past its restarts, its node gone): the episodes
  in flight are not saved, the manifest is written with what finished, and :class:`ClusterLost`
  is raised: ``callbench run`` prints one line and exits with :data:`EXIT_CLUSTER_LOST`; the same
  command resumes the run.
- **Concurrency**: at most ``concurrency`` episodes are in flight over the whole cluster.

Ray is an optional dependency (extra ``[distributed]``): importing this module does not need it;
:func:`connect` raises ``ValueError`` with the install command when it is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import uuid
from collections.abc import Callable
from typing import Any

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelClient
from callbench.models.faults import FaultLedger
from callbench.runfolder.manifest import EpisodeKey
from callbench.runfolder.provenance import code_version
from callbench.runfolder.store import RunStore
from callbench.runs.clients import build_clients
from callbench.runs.executor import (
    IN_FLIGHT_PER_SLOT,
    GradeHook,
    ProgressHook,
    RunConfig,
    Saver,
    finish_run,
    plan_run,
    run_all,
    simulate,
)
from callbench.runs.guard import Limited, RunHealth, health_of
from callbench.trace import Trace

ClientFactory = Callable[[RunConfig, Bundle], dict[str, ModelClient]]
IN_PROCESS_PROVIDERS = frozenset({"scripted"})
"""Providers whose calls run inside the worker (no network, no shared quota): no cluster permit
unless ``provider_limits`` names them."""
WORKER_RESTARTS = 4
"""How many times a worker actor is restarted (and its unfinished episodes retried) after dying."""
EXIT_CLUSTER_LOST = 6
"""``callbench run``'s exit status when the Ray cluster lost a worker for good (:class:`ClusterLost`)."""


class ClusterLost(Exception):
    """The Ray cluster could not run an episode any more (a worker dead past its restarts, its node
    gone). The message is one line: what Ray reported, what was kept, how to resume."""


def _one_line(error: BaseException) -> str:
    """Ray's error as one line: its class name and the first line of its message, without the
    terminal colour codes Ray puts in it."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (``ray._private.ray_constants.ENABLE_RAY_CLUSTER``): when ``0``, Ray takes
127.0.0.1 as this node's address instead of the address of the interface that routes outwards."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'callbench[distributed]'") from None
    return ray


def _is_loopback(address: str | None) -> bool:
    """Whether ``address`` (``HOST:PORT``, ``ray://HOST:PORT``, ``auto`` or None) names this
    machine's loopback interface; None (a new local instance) counts as loopback."""
    if address is None:
        return True
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _keep_on_loopback(address: str | None) -> None:
    """A local Ray instance, or a cluster reached on loopback, stays on loopback.

    Ray rewrites ``127.0.0.1`` to the address of the interface that routes outwards
    (``ray._private.services.resolve_ip_for_localhost``) and a new local instance listens there,
    reachable from the network. Setting Ray's ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` before Ray is
    imported (and its constant when it already is) makes Ray use 127.0.0.1, as it does on macOS
    (ray-project/ray#18730). A value already in the environment is kept."""
    if not _is_loopback(address) or os.environ.get(LOOPBACK_ENV):
        return
    os.environ[LOOPBACK_ENV] = "0"
    constants: Any = sys.modules.get("ray._private.ray_constants")
    if constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER"):
        constants.ENABLE_RAY_CLUSTER = False


def default_clients(config: RunConfig, bundle: Bundle) -> dict[str, ModelClient]:
    """The candidate and caller clients a worker builds from the run's specs (no response cache:
    a cache file is local to one machine)."""
    clients = build_clients(config.model_copy(update={"grade": False}), bundle)
    return {k: c for k, c in clients.items() if k.startswith("candidate:") or k == "caller"}


class _Permit:
    """An async context manager holding one permit of a :class:`ProviderLimiter` actor."""

    def __init__(self, limiter: Any, holder: str) -> None:
        self.limiter, self.holder = limiter, holder

    async def __aenter__(self) -> None:
        await self.limiter.acquire.remote(self.holder)

    async def __aexit__(self, *exc: object) -> None:
        await self.limiter.release.remote(self.holder)


class _LimiterImpl:
    """The body of :class:`ProviderLimiter`: ``limit`` permits, counted by holder so that a
    restarted worker can return the permits its previous life held."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.sem = asyncio.Semaphore(self.limit)
        self.held: dict[str, int] = {}
        self.peak = 0

    async def acquire(self, holder: str) -> None:
        await self.sem.acquire()
        self.held[holder] = self.held.get(holder, 0) + 1
        self.peak = max(self.peak, sum(self.held.values()))

    def release(self, holder: str) -> None:
        if self.held.get(holder, 0) > 0:
            self.held[holder] -= 1
            self.sem.release()

    def release_holder(self, holder: str) -> int:
        """Return every permit ``holder`` holds; returns how many."""
        n = self.held.pop(holder, 0)
        for _ in range(n):
            self.sem.release()
        return n

    def stats(self) -> dict[str, int]:
        """``limit``, permits ``in_use`` now and the ``peak`` ever held at once."""
        return {"limit": self.limit, "in_use": sum(self.held.values()), "peak": self.peak}


class _WorkerImpl:
    """The body of an episode worker actor (see the module docstring)."""

    def __init__(self, name: str, config_json: str, bundle: Bundle, limiters: dict[str, Any],
                 factory: ClientFactory, version: str) -> None:
        self.name, self.version = name, version
        self.config = RunConfig.model_validate_json(config_json)
        self.bundle = bundle
        # a restart: return the permits the previous life held. Not awaited: Ray runs one caller's
        # calls to an actor in order, so this worker's later acquires come after the release.
        for lim in limiters.values():
            if lim is not None:
                lim.release_holder.remote(name)
        self.health = RunHealth(self.config.max_consecutive_fatal)
        self.clients: dict[str, ModelClient] = {}
        for role, client in factory(self.config, bundle).items():
            provider = client.spec.split(":", 1)[0]
            lim = limiters.get(provider, limiters["*"])
            permit = _Permit(lim, name) if lim is not None else contextlib.nullcontext()
            self.clients[role] = Limited(client, permit, role, self.health)

    async def run(self, key: EpisodeKey) -> tuple[Trace, FaultLedger, str | None]:
        """Simulate one episode: (trace, fault ledger, the worker's stop message or None)."""
        trace, ledger = await simulate(key, self.bundle, self.clients, self.config, self.version)
        return trace, ledger, self.health.message

    def pid(self) -> int:
        import os

        return os.getpid()

    async def event_loop(self) -> str:
        """The event loop this worker's episodes run on (Ray's for async actors), as
        :func:`callbench.runs.event_loop.describe` names it."""
        from callbench.runs.event_loop import describe

        return describe()


class RayCluster:
    """A connection to Ray for one run: the provider limiter actors and the worker pool.

    :func:`connect` makes one; :meth:`close` ends the actors (and Ray, when this connection
    started it)."""

    def __init__(self, config: RunConfig, *, address: str | None, num_cpus: int | None) -> None:
        _keep_on_loopback(address)
        ray = _ray()
        self.ray = ray
        self.started = not ray.is_initialized()
        if self.started:
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False,
                                      "log_to_driver": True, "ignore_reinit_error": True}
            if address is None and num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)
        self.run_tag = uuid.uuid4().hex[:8]
        limiter_cls = ray.remote(num_cpus=0, max_concurrency=100_000)(_LimiterImpl)
        providers = {r.spec.split(":", 1)[0] for r in
                     [*config.candidates, config.caller, config.task_judge, config.conversation_judge]}
        # in-process providers (scripted) get a cluster-wide limiter only when a limit is set for
        # them: their calls are bounded by the episodes in flight, and each permit costs two actor
        # calls per request (most of Ray's overhead per scripted episode, docs/scale.md)
        self.limiters: dict[str, Any] = {
            p: (limiter_cls.remote(config.provider_limits.get(p, config.concurrency))
                if p not in IN_PROCESS_PROVIDERS or p in config.provider_limits else None)
            for p in sorted(providers)
        }
        self.limiters["*"] = limiter_cls.remote(config.concurrency)
        self.workers: list[Any] = []
        # the workers' constructor argument in the object store, held while the workers live: a
        # restarted worker is constructed again from it (see the module docstring)
        self.bundle_ref: Any = None

    def limit(self, clients: dict[str, ModelClient], health: RunHealth) -> dict[str, ModelClient]:
        """The driver's clients (judges) holding the cluster's permits for every call."""
        out: dict[str, ModelClient] = {}
        for role, c in clients.items():
            if isinstance(c, Limited):
                c = c.inner
            lim = self.limiters.get(c.spec.split(":", 1)[0], self.limiters["*"])
            permit = _Permit(lim, f"driver-{self.run_tag}") if lim is not None else contextlib.nullcontext()
            out[role] = Limited(c, permit, role, health)
        return out

    def start_workers(self, config: RunConfig, bundle: Bundle, factory: ClientFactory,
                      num_workers: int | None) -> list[Any]:
        """Start the worker pool (``num_workers``, default the cluster's CPUs, at least 1)."""
        ray = self.ray
        n = num_workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        per_worker = max(1, -(-config.concurrency // n))
        worker_cls = ray.remote(num_cpus=1, max_restarts=WORKER_RESTARTS, max_task_retries=WORKER_RESTARTS,
                                max_concurrency=per_worker)(_WorkerImpl)
        self.bundle_ref = ray.put(bundle)
        config_json = config.model_dump_json()
        version = code_version()
        self.workers = [
            worker_cls.remote(f"worker-{self.run_tag}-{i}", config_json, self.bundle_ref, self.limiters,
                              factory, version)
            for i in range(n)
        ]
        return self.workers

    def limiter_stats(self) -> dict[str, dict[str, int]]:
        """Each provider limiter's :meth:`_LimiterImpl.stats` (tests and diagnostics)."""
        return {p: self.ray.get(lim.stats.remote()) for p, lim in self.limiters.items() if lim is not None}

    def close(self) -> None:
        """Kill the workers and limiters; shut Ray down when this connection started it."""
        for actor in [*self.workers, *(lim for lim in self.limiters.values() if lim is not None)]:
            self.ray.kill(actor, no_restart=True)
        self.workers = []
        self.bundle_ref = None
        if self.started:
            self.ray.shutdown()


def connect(config: RunConfig, *, address: str | None = None, num_cpus: int | None = None) -> RayCluster:
    """Connect to the Ray cluster at ``address`` (``auto``: the one this node belongs to; None: a
    cluster already initialised in this process, else a new local one with ``num_cpus``).
    Raises ``ValueError`` when Ray is not installed."""
    return RayCluster(config, address=address, num_cpus=num_cpus)


async def execute_run_ray(
    config: RunConfig,
    clients: dict[str, ModelClient],
    *,
    bundle: Bundle | None = None,
    on_episode: ProgressHook | None = None,
    grade_hook: GradeHook | None = None,
    on_plan: Callable[[list[EpisodeKey], set[str]], None] | None = None,
    store: RunStore | None = None,
    cluster: RayCluster | None = None,
    client_factory: ClientFactory = default_clients,
    num_workers: int | None = None,
    num_cpus: int | None = None,
    preflight: FaultLedger | None = None,
) -> Any:
    """Run (or resume) the run on Ray and return the final manifest (``executors`` records
    ``ray``). Arguments and errors as :func:`callbench.runs.executor.execute_run`; ``clients`` are
    the driver's (for the manifest's role records); workers build theirs with ``client_factory``.
    ``cluster`` is an open :class:`RayCluster` (one is connected, to ``config.ray_address``, and
    closed here otherwise). Raises :class:`~callbench.runs.guard.RunStopped` as the local
    executor does when a role keeps failing with HTTP 401/403/404 on a worker, and
    :class:`ClusterLost` (after saving the manifest) when the cluster cannot run an episode any
    more."""
    bundle = bundle or load_bundle(config.bundle_path)
    own_store, own_cluster = store is None, cluster is None
    store = store or RunStore(config.out)
    try:
        manifest, todo, done, counts = plan_run(config, clients, bundle, store, executor="ray",
                                                preflight=preflight)
        if on_plan:
            on_plan(manifest.planned, done)
        stop: list[str] = []
        lost: list[str] = []  # what Ray reported when the cluster could not run an episode
        driver = health_of(clients)  # the driver's roles: the judges grading as episodes finish

        def stopping() -> bool:
            if driver.message is not None and not stop:
                stop.append(driver.message)
            return bool(stop or lost)

        saver = Saver(store, manifest, counts, grade_hook, on_episode, stopping)
        if todo:
            cluster = cluster or connect(config, address=config.ray_address, num_cpus=num_cpus)
            workers = cluster.start_workers(config, bundle, client_factory, num_workers)
            try:  # the episodes run on the workers' loops, not on this driver's
                loop = await workers[0].event_loop.remote()
                manifest.measured_at[-1].event_loop = f"{loop} (Ray workers)"
            except cluster.ray.exceptions.RayError:
                pass  # a worker that cannot answer is met again by the first episode, and reported
            gate = asyncio.Semaphore(max(1, config.concurrency))
            window = asyncio.Semaphore(IN_FLIGHT_PER_SLOT * max(1, config.concurrency))
            load = [0] * len(workers)
            cluster_errors, task_error = cluster.ray.exceptions.RayError, cluster.ray.exceptions.RayTaskError

            async def one(key: EpisodeKey) -> None:
                async with window:
                    async with gate:
                        if stopping():
                            return
                        i = min(range(len(workers)), key=load.__getitem__)
                        load[i] += 1
                        try:
                            trace, ledger, message = await workers[i].run.remote(key)
                        except cluster_errors as e:
                            # an error of the episode's own code (RayTaskError) is a bug and is
                            # raised; anything else is the cluster failing to run it
                            if isinstance(e, task_error):
                                raise
                            if not lost:
                                lost.append(_one_line(e))
                            return  # not saved: run again when the run is resumed
                        finally:
                            load[i] -= 1
                    if message and not stop:
                        stop.append(message)
                    if stopping() and trace.skipped:
                        return  # not saved: run again when the run is resumed
                    if trace.episode_id not in saver.saved:
                        await saver.save(trace, ledger)

            await run_all(one(k) for k in todo)
        if lost:
            saver.counts.apply(manifest)
            await store.submit(store.save_manifest, manifest)
            raise ClusterLost(
                f"the Ray cluster could not run an episode any more ({lost[0]}); "
                f"{manifest.completed} episode(s) finished are kept: run the same command to resume"
            )
        stopping()
        return await finish_run(store, manifest, saver, stop[0] if stop else None)
    finally:
        if own_cluster and cluster is not None:
            cluster.close()
        if own_store:
            store.close()
