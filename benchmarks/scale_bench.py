"""Runs at scale: save cost, resume start-up, request CPU, concurrency, Ray.

Prints, against the issue's targets (2 cores):

- ``save``: the writer's cost per saved episode (trace + fault ledger + index row, plus manifest
  checkpoints spread over the episodes) in scripted ``--no-grade`` runs of 100, 1,000 and 10,000
  episodes (one starter scenario repeated); target: at 10,000 within 1.3x of at 100;
- ``resume``: time from ``execute_run`` to the plan being ready (the first new episode can start)
  on the 10,000-episode run with 10 traces deleted; target: at most 2 s;
- ``scripted``: process CPU per candidate turn of the scripted run (harness only; the event loop's
  and the writer threads' shares printed too); target 1 ms;
- ``sdk``: process CPU per candidate request through the openai SDK against a loopback fake
  (``tests/fakes/fault_server.py`` in a subprocess, so its CPU is not counted; caller scripted);
  target: at most 3 ms; also printed: the event loop's and the writer threads'
  shares, and the CPU of one bare POST of the same size through the same transport (aiohttp
  under the SDK's ``httpx2`` interface, or ``httpx2``'s own with ``CALLBENCH_HTTP_TRANSPORT=httpx2``:
  ``models/remote/transport.py``), the transport's floor on this machine;
- ``concurrency``: wall time vs the latency-bound ideal with 200 ms per request (candidate and
  caller both through the openai SDK to the fake) at concurrency 1, 8 and 32; ideal =
  ceil(episodes / concurrency) * requests per episode * latency; target at 32: within 1.2x;
- ``validate``: CPU and wall time of ``callbench validate`` of the starter as a user runs it (a new,
  supervised process); target: under 1 s (wall, idle; CPU time is what is compared on a shared
  machine);
- ``ray``: wall per episode of the scripted run through ``--executor ray`` (local Ray, 2 CPUs),
  the slope between runs of 100 and 300 episodes (so the fixed cost of a run, workers starting and
  the bundle sent once, is printed apart)
  against the local executor (needs the ``[distributed]`` extra; skipped without it);
- ``report``, ``grade``, ``folder``: ``benchmarks/report_scale.py`` (report and grade
  of a ``--big``-episode synthetic run: wall time and peak memory; run folder bytes per episode);
- ``html``: ``benchmarks/html_bench.py`` (the folder report of ``--big`` calls:
  first page size and open time in Chromium, filter, search, opening a call).

Every figure is printed beside its target and the 1-minute load average; the concurrency figures
also give the CPU per request of callbench and of the fake server, which share the 2 cores.

The machine these run on is usually shared: figures are noisy, run it twice before reading much
into one number. Run: ``python benchmarks/scale_bench.py [--only save,resume,...] [--big 10000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelSettings
from callbench.models.remote.transport import transport_choice
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore
from callbench.runs import saving as saving_module
from callbench.runs.executor import RoleSpec, RunConfig, execute_run
from callbench.runs.plan import ScenarioFilters
from callbench.runs.session import build_clients

STARTER = Path(str(files("callbench") / "examples" / "starter"))
TESTS = Path(__file__).resolve().parents[1] / "tests"
SERVER = """
import sys, time
sys.path.insert(0, {tests!r})
from http.server import ThreadingHTTPServer
from fakes.fault_server import FaultServer

ThreadingHTTPServer.request_queue_size = 256  # 32+ connections at once: no dropped SYNs

class Slow(FaultServer):
    def _handle(self, h):
        time.sleep({latency!r})
        super()._handle(h)

s = Slow(max_requests=10**7, lifetime_s=3600)
s.__enter__()
print(s.url, flush=True)
sys.stdin.read()
"""


def first_scenario(bundle: Bundle) -> str:
    agent = next(iter(bundle.agents.values()))
    return agent.scenarios[0].id


def config_for(out: Path, bundle: Bundle, repeats: int, *, candidate: RoleSpec | None = None,
               caller: RoleSpec | None = None, concurrency: int = 8) -> RunConfig:
    return RunConfig(
        bundle_path=STARTER, out=out, candidates=[candidate or RoleSpec(spec="scripted:reference")],
        caller=caller or RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"), repeats=repeats, grade=False,
        concurrency=concurrency, filters=ScenarioFilters(scenarios=[first_scenario(bundle)]),
        provider_limits={"local": 1, "openai": 64},
    )


class Timed:
    """Wraps RunStore's writer-thread methods to sum their wall time (episode saves overlap on
    several threads, so the sum is the writers' time, not wall time)."""

    def __init__(self) -> None:
        self.saves = 0
        self.save_s = 0.0
        self.manifest_s = 0.0
        self._orig: dict[str, Any] = {}

    def __enter__(self) -> Timed:
        for name, attr in (("save_episode", "save_s"), ("save_manifest", "manifest_s")):
            real = getattr(RunStore, name)
            self._orig[name] = real

            def timed(store: RunStore, *args: Any, _real: Any = real, _attr: str = attr,
                      _name: str = name) -> Any:
                t0 = time.perf_counter()
                try:
                    return _real(store, *args)
                finally:
                    setattr(self, _attr, getattr(self, _attr) + time.perf_counter() - t0)
                    if _name == "save_episode":
                        self.saves += 1

            setattr(RunStore, name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, real in self._orig.items():
            setattr(RunStore, name, real)


def run(config: RunConfig, bundle: Bundle, clients: Any = None, **kw: Any) -> Any:
    """One run in its own event loop; the clients are closed in that loop (an aiohttp session
    belongs to the loop that opened it)."""
    clients = clients or build_clients(config, bundle)

    async def go() -> Any:
        try:
            return await execute_run(config, clients, bundle=bundle, **kw)
        finally:
            for c in clients.values():
                await c.aclose()

    return asyncio.run(go())


def bench_save(tmp: Path, bundle: Bundle, big: int) -> dict[int, Path]:
    print("save cost per episode (scripted, --no-grade; writer thread: trace + ledger + index row,"
          " manifest checkpoints amortised)")
    saving_module.CHECKPOINT_SECONDS = 5.0  # checkpoints do happen in the bigger runs
    runs: dict[int, Path] = {}
    per: dict[int, float] = {}
    for n in (100, 1000, big):
        out = tmp / f"save{n}"
        config = config_for(out, bundle, n)
        cpu0, t0 = time.process_time(), time.perf_counter()
        with Timed() as t:
            manifest = run(config, bundle)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        per[n] = (t.save_s + t.manifest_s) / max(t.saves, 1)
        save_ms = t.save_s / max(t.saves, 1) * 1000
        print(f"  {n:>6} episodes: {per[n] * 1000:6.2f} ms/episode (save {save_ms:.2f},"
              f" manifest {t.manifest_s / max(t.saves, 1) * 1000:.2f}); run wall {wall / n * 1000:.1f} ms,"
              f" CPU {cpu / n * 1000:.1f} ms per episode; completed {manifest.completed}")
        runs[n] = out
    ratio = per[big] / per[100]
    print(f"  ratio {big} / 100: {ratio:.2f} (target <= 1.3) {'OK' if ratio <= 1.3 else 'MISSED'}")
    return runs


def bench_resume(out: Path, bundle: Bundle, n: int) -> None:
    traces = [p for _, p in sorted(episode_files.paths(out / "traces").items())]  # .json.gz or .json
    for p in traces[:10]:
        p.unlink()
    config = config_for(out, bundle, n)
    ready: list[float] = []
    t0 = time.perf_counter()
    run(config, bundle, on_plan=lambda planned, done: ready.append(time.perf_counter() - t0))
    print(f"resume start-up, {n} episodes (10 to run again): {ready[0]:.2f} s to the first new episode"
          f" (target <= 2 s) {'OK' if ready[0] <= 2 else 'MISSED'}")


def bench_scripted_turn(tmp: Path, bundle: Bundle) -> None:
    out = tmp / "turns"
    config = config_for(out, bundle, 200, concurrency=4)
    cpu0, main0 = time.process_time(), time.thread_time()
    manifest = run(config, bundle)
    cpu, main = time.process_time() - cpu0, time.thread_time() - main0
    store = RunStore(out)
    turns = sum(len({m.candidate_turn for m in store.load_trace(k.episode_id).messages
                     if m.candidate_turn is not None}) for k in manifest.planned)
    per = cpu / max(turns, 1) * 1000
    print(f"scripted harness CPU per candidate turn: {per:.2f} ms ({turns} turns, saves included)"
          f" {mark(per, 1)} [{load()}]")
    print(f"  of which the event loop's thread {main / max(turns, 1) * 1000:.2f} ms, the writer threads"
          f" {(cpu - main) / max(turns, 1) * 1000:.2f} ms")


def load() -> str:
    """The 1-minute load average, printed beside every figure: the machine is shared (load 3-8
    is usual) and wall times and even CPU times grow with it."""
    return f"load {os.getloadavg()[0]:.1f}"


def mark(value: float, target: float) -> str:
    return f"(target <= {target:g}) {'OK' if value <= target else 'MISSED'}"


class FakeServer:
    """The loopback fake in a subprocess (its CPU is not this process's)."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER.format(tests=str(TESTS), latency=latency)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def cpu_s(self) -> float:
        """The server process's CPU seconds so far (user + system, from ``/proc``; 0.0 where
        there is no ``/proc``)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _requests(out: Path, role: str) -> int:
    store = RunStore(out)
    ids = store.finished_ids()
    return sum(led.role(role).requests for e in ids if (led := store.load_faults(e)) is not None)


def bench_sdk(tmp: Path, bundle: Bundle) -> None:
    server = FakeServer(0.0)
    try:
        settings = ModelSettings(base_url=server.url, max_attempts=1)
        out = tmp / "sdk"
        config = config_for(out, bundle, 40, candidate=RoleSpec(spec="openai:fake-agent", settings=settings),
                            concurrency=4)
        clients = build_clients(config, bundle)  # SDK imports and client set-up not counted
        cpu0, main0 = time.process_time(), time.thread_time()
        run(config, bundle, clients)
        cpu, main = time.process_time() - cpu0, time.thread_time() - main0
        n = _requests(out, "candidate")
        floor = bare_post_cpu(server.url, out)
    finally:
        server.close()
    per = cpu / max(n, 1) * 1000
    print(f"CPU per candidate request through the openai SDK: {per:.2f} ms ({n} requests; whole process,"
          f" harness and saves included; transport {transport_choice()}) {mark(per, 3)} [{load()}]")
    print(f"  of which the event loop's thread {main / max(n, 1) * 1000:.2f} ms, the writer threads"
          f" {(cpu - main) / max(n, 1) * 1000:.2f} ms; for scale, one bare POST of an episode's"
          f" last candidate body to the same fake through the same transport: {floor:.2f} ms")


def bare_post_cpu(url: str, out: Path, n: int = 200) -> float:
    """CPU (ms) per plain ``post`` (keep-alive) of the ``httpx2.AsyncClient`` the SDK clients use
    (``models/remote/transport.py``: aiohttp unless ``CALLBENCH_HTTP_TRANSPORT=httpx2``) to the
    fake of a candidate body as large as an episode's last request (one finished trace's whole
    conversation and tools): the transport's own cost, a floor under the SDK figure on this machine."""
    import httpx2

    from callbench.models.base import ChatMessage, ModelRequest, RequestContext
    from callbench.models.remote.openai_client import openai_request_body

    trace = RunStore(out).load_trace(next(iter(sorted(RunStore(out).finished_ids()))))
    messages = [ChatMessage(role=m.role, content=m.content, tool_calls=list(m.tool_calls),
                            tool_call_id=m.tool_call_id) for m in trace.messages if m.error is None]
    request = ModelRequest(messages=messages, tools=trace.candidate_view.tools,
                           context=RequestContext(role="candidate", episode_id=trace.episode_id))
    body = json.dumps(openai_request_body(request, "fake-agent", ModelSettings(), official_endpoint=False),
                      ensure_ascii=False, separators=(",", ":")).encode()

    async def posts() -> float:
        import openai

        from callbench.models.remote.transport import sdk_http_client

        async with sdk_http_client(openai, url, 60.0) or httpx2.AsyncClient() as client:
            for _ in range(20):
                await client.post(f"{url}/chat/completions", content=body)
            cpu0 = time.process_time()
            for _ in range(n):
                await client.post(f"{url}/chat/completions", content=body)
            return (time.process_time() - cpu0) / n * 1000

    return asyncio.run(posts())


def bench_concurrency(tmp: Path, bundle: Bundle, latency: float = 0.2) -> None:
    server = FakeServer(latency)
    try:
        settings = ModelSettings(base_url=server.url, max_attempts=1)
        for conc, episodes in ((1, 3), (8, 32), (32, 64)):
            out = tmp / f"conc{conc}"
            config = config_for(out, bundle, episodes, concurrency=conc,
                                candidate=RoleSpec(spec="openai:fake-agent", settings=settings),
                                caller=RoleSpec(spec="openai:fake-caller", settings=settings))
            clients = build_clients(config, bundle)
            t0, cpu0, server0 = time.perf_counter(), time.process_time(), server.cpu_s()
            run(config, bundle, clients)
            wall = time.perf_counter() - t0
            cpu, server_cpu = time.process_time() - cpu0, server.cpu_s() - server0
            requests = _requests(out, "candidate") + _requests(out, "caller")
            per_episode = requests / episodes
            skipped = sum(1 for _, end, _r in RunStore(out).episode_rows() if end == "skipped")
            ideal = math.ceil(episodes / conc) * per_episode * latency
            ratio = wall / ideal
            target = "" if conc != 32 else f" {mark(ratio, 1.2)}"
            print(f"concurrency {conc:>2}: {episodes} episodes, {per_episode:.1f} requests each at"
                  f" {latency * 1000:.0f} ms ({skipped} skipped): wall {wall:.2f} s vs ideal {ideal:.2f} s ="
                  f" {ratio:.2f}x{target} [{load()}]")
            print(f"  CPU per request: callbench {cpu / max(requests, 1) * 1000:.2f} ms, the fake server"
                  f" {server_cpu / max(requests, 1) * 1000:.2f} ms (same 2 cores)")
    finally:
        server.close()


def bench_validate(repeats: int = 3) -> None:
    """``callbench validate`` of the starter as a user runs it (a new process, supervised), the
    median of ``repeats``: CPU seconds of the processes (the stable measure on a shared machine;
    on an idle one the wall time is about the same, the work being sequential) and wall time.
    Twice: with the result cache off (``CALLBENCH_VALIDATE_CACHE=0``: the first validate after any
    change, every audit run) and with a warm cache in a temporary folder (nothing changed since
    the last validate: ``bundle/validate/cache.py``). With ``PYTHONDONTWRITEBYTECODE`` set and no
    ``.pyc`` files yet, every module is compiled at each start (about 0.06 s more here)."""
    import resource

    def measure(env: dict[str, str]) -> tuple[float, float] | None:
        cpus, walls = [], []
        for _ in range(repeats):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "callbench", "validate", str(STARTER)],
                                  capture_output=True, text=True, env=env)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if done.returncode != 0:
                print(f"validate failed ({done.returncode}): {done.stdout[-300:]}{done.stderr[-300:]}")
                return None
        return sorted(cpus)[len(cpus) // 2], sorted(walls)[len(walls) // 2]

    with tempfile.TemporaryDirectory() as cache:
        for what, extra in (("cache off (any change)", {"CALLBENCH_VALIDATE_CACHE": "0"}),
                            ("warm cache (no change)", {"CALLBENCH_VALIDATE_CACHE": "1",
                                                        "CALLBENCH_CACHE_DIR": cache})):
            env = {**os.environ, **extra}
            if "CALLBENCH_CACHE_DIR" in extra:  # fill it
                subprocess.run([sys.executable, "-m", "callbench", "validate", str(STARTER)],
                               capture_output=True, env=env)
            got = measure(env)
            if got is None:
                return
            cpu, wall = got
            print(f"callbench validate of the starter, {what}: CPU {cpu:.2f} s {mark(cpu, 1)}, wall"
                  f" {wall:.2f} s [{load()}] (median of {repeats}; the target is wall"
                  " time on an idle machine)")


def bench_ray(tmp: Path, bundle: Bundle) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        print("ray: not installed (pip install 'callbench[distributed]'); skipped")
        return
    from callbench.runs.ray_executor import execute_run_ray

    sizes = (100, 300)
    walls: dict[tuple[str, int], float] = {}
    init = 0.0
    for n in sizes:
        for name in ("local", "ray"):
            out = tmp / f"ray_{name}_{n}"
            config = config_for(out, bundle, n, concurrency=8)
            clients = build_clients(config, bundle)
            if name == "local":
                t0 = time.perf_counter()
                asyncio.run(execute_run(config, clients, bundle=bundle))
            else:
                from callbench.runs.ray_executor import connect

                t_init = time.perf_counter()
                cluster = connect(config, num_cpus=2)
                init = max(init, time.perf_counter() - t_init)
                t0 = time.perf_counter()
                try:
                    asyncio.run(execute_run_ray(config, clients, bundle=bundle, cluster=cluster))
                finally:
                    cluster.close()
            walls[(name, n)] = time.perf_counter() - t0
    small, big = sizes
    # per episode: the slope between the two sizes; fixed cost (workers starting, the bundle sent
    # once): what is left at the small size
    slope = {name: (walls[(name, big)] - walls[(name, small)]) / (big - small) for name in ("local", "ray")}
    overhead = (slope["ray"] - slope["local"]) * 1000
    fixed = ((walls[("ray", small)] - slope["ray"] * small)
             - (walls[("local", small)] - slope["local"] * small))
    print(f"ray executor (local Ray, 2 CPUs, scripted, {small} and {big} episodes):"
          f" {slope['ray'] * 1000:.1f} ms per episode vs local {slope['local'] * 1000:.1f} ms;"
          f" overhead {overhead:.1f} ms per episode"
          f" (target < 10) {'OK' if overhead < 10 else 'MISSED'}; fixed cost per run {fixed:.1f} s (workers"
          f" start, bundle sent once), ray.init {init:.1f} s [{load()}]")
    print("  walls: " + ", ".join(f"{name} {n}: {w:.2f} s" for (name, n), w in sorted(walls.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only",
                    default="save,resume,scripted,sdk,concurrency,validate,ray,report,grade,folder,html")
    ap.add_argument("--big", type=int, default=10000)
    args = ap.parse_args()
    only = set(args.only.split(","))
    bundle = load_bundle(STARTER)
    print(f"{os.cpu_count()} CPUs; shared machine: figures are noisy")
    tmp = Path(tempfile.mkdtemp(prefix="callbench-scale-"))
    try:
        if only & {"save", "resume"}:
            runs = bench_save(tmp, bundle, args.big)
            if "resume" in only:
                bench_resume(runs[args.big], bundle, args.big)
        if "scripted" in only:
            bench_scripted_turn(tmp, bundle)
        if "sdk" in only:
            bench_sdk(tmp, bundle)
        if "concurrency" in only:
            bench_concurrency(tmp, bundle)
        if "validate" in only:
            bench_validate()
        if "ray" in only:
            bench_ray(tmp, bundle)
        if only & {"report", "grade", "folder"}:  # benchmarks/report_scale.py
            subprocess.run([sys.executable, str(Path(__file__).with_name("report_scale.py")), "--only",
                            ",".join(sorted(only & {"report", "grade", "folder"})), "--episodes",
                            str(args.big)], check=True)
        if "html" in only:  # the folder report's first page in Chromium
            subprocess.run([sys.executable, str(Path(__file__).with_name("html_bench.py")), "--episodes",
                            str(args.big), "--single", ""], check=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
