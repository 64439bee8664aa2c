"""callbench's own CPU per request against a provider with realistic latency.

Runs starter scenarios with the candidate on the OpenAI adapter (``--dialect anthropic``: the
Anthropic one), streamed, against the
conformance fake (``tests/fakes/conformance_server.py``) serving seeded delays
(``tests/fakes/streaming_wire.py`` :class:`LatencyProfile`: time to first token log-normal,
median ``--ttft`` s, shape ``--sigma``; ``--token`` s between streamed deltas; ``--tool`` s more
before each tool call). The fake runs in a subprocess, so its CPU is not this process's. The
caller and judges are scripted (``scripted:plan``, ``scripted:met``): the figures are the
harness's around the candidate's requests.

Prints, from the saved trace files (read as JSON here, not through callbench's report):

- the harness CPU per candidate request (``latency.requests[].harness_cpu_s``, the conversation's
  own thread CPU: ``sim/harness_cpu.py``): median and p90 in ms, and the median as a share of the
  median time to first word (the target: under 2%);
- the same for caller requests (scripted here: the caller's harness CPU includes checking its turn
  and the channel);
- the socket reads per candidate request (aiohttp's protocol callbacks, counted: each is one wake
  of the loop's thread; the count adds one Python call to each) and the machine's floor for them:
  a bare protocol's CPU per read over loopback TCP with reads ``--token`` s apart, measured after
  the run on the same loop (``wakeup_floor.py``), times the mean reads per request, as a share of
  the median time to first word: the part of the figure any client woken per delta pays here;
- CPU left out of the per-request figure, measured here for scale: saving the trace (on the
  store's writer thread, thread CPU of ``RunStore.save_episode``) per episode and per candidate
  request, and the whole process's CPU (``time.process_time``: every thread, the grading, the
  event loop's own I/O callbacks, the imports not included) per candidate request, an upper
  bound of the harness's CPU per request.

The run goes on the event loop callbench's commands use (``runs/event_loop.py``: uvloop where
installed; ``CALLBENCH_EVENT_LOOP=asyncio`` for the standard library's), named in the output.

Run: ``python benchmarks/latency_bench.py [--scenarios N] [--concurrency C]``. Name the
machine's load (``uptime``) beside the figures: a loaded machine inflates CPU time a little
(caches, frequency) and wall time a lot.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

import httpx2  # noqa: E402
from wakeup_floor import protocol_floor  # noqa: E402

from callbench.bundle.validate.audits import load_bundle  # noqa: E402
from callbench.models.base import ModelSettings  # noqa: E402
from callbench.models.remote.anthropic_client import AnthropicClient  # noqa: E402
from callbench.models.remote.openai_client import OpenAIClient  # noqa: E402
from callbench.runfolder.store import RunStore  # noqa: E402
from callbench.runs import event_loop  # noqa: E402
from callbench.runs.executor import RoleSpec, RunConfig  # noqa: E402
from callbench.runs.plan import ScenarioFilters, candidate_slug  # noqa: E402
from callbench.runs.session import build_clients, run_and_grade  # noqa: E402
from fakes.conformance_server import HintedClient, HintTransport  # noqa: E402

STARTER = Path(str(files("callbench") / "examples" / "starter"))
SERVER = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from http.server import ThreadingHTTPServer
from callbench.bundle.validate.audits import load_bundle
from fakes.conformance_server import ConformanceServer
from fakes.streaming_wire import LatencyProfile

ThreadingHTTPServer.request_queue_size = 256
profile = LatencyProfile(ttft_s={ttft!r}, sigma={sigma!r}, token_s={token!r}, tool_s={tool!r}, seed={seed!r})
s = ConformanceServer(load_bundle(Path({starter!r})), latency=profile, lifetime_s=3600)
s.__enter__()
print(s.url, s.root, flush=True)
sys.stdin.read()
"""


def http_client(transport: str, dialect: str) -> httpx2.AsyncClient:
    """The candidate's HTTP client over ``transport`` (``aiohttp``, callbench's default, or
    ``httpx2``) for the SDK of ``dialect`` (openai or anthropic), with the fake's hints."""
    if transport == "httpx2":
        return httpx2.AsyncClient(transport=HintTransport())
    sdk = importlib.import_module(dialect)
    client = sdk.DefaultAioHttpClient(timeout=60.0)
    client._transport = HintTransport(client._transport)
    return client


def quantile(values: list[float], q: float) -> float:
    """Inverted-CDF quantile (the smallest value whose cumulative share reaches q)."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered) - 1e-9) - 1))
    return ordered[k]


def read_traces(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((run_dir / "traces").iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            out.append(json.load(f))
    return out


READS = [0]
"""Socket reads by aiohttp's client protocol during the run (:func:`count_reads`)."""


def count_reads() -> None:
    """Count every call of aiohttp's ``ResponseHandler.data_received`` in :data:`READS`."""
    from aiohttp import client_proto

    real = client_proto.ResponseHandler.data_received

    def data_received(self: Any, data: bytes) -> None:
        READS[0] += 1
        real(self, data)

    client_proto.ResponseHandler.data_received = data_received  # type: ignore[method-assign]


async def run(args: argparse.Namespace, url: str, out: Path) -> tuple[float, float, float, int]:
    """Run and grade, then measure the machine's floor per read (``args.floor``); returns (wall s,
    process CPU s, save CPU s, saves)."""
    args.loop = event_loop.describe()
    bundle = load_bundle(STARTER)
    agents = list(bundle.agents)
    spec = f"{args.dialect}:conformance-agent"
    settings = ModelSettings(base_url=url, timeout_s=60.0, max_attempts=1)
    config = RunConfig(
        bundle_path=STARTER, out=out, candidates=[RoleSpec(spec=spec, settings=settings)],
        caller=RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"), concurrency=args.concurrency, seed=args.seed,
        filters=ScenarioFilters(agents=agents[: args.agents], limit=args.scenarios))
    http = http_client(args.transport, args.dialect)
    built = build_clients(config, bundle)
    key = f"candidate:{candidate_slug(spec, settings)}"
    await built.pop(key).aclose()  # replaced by one whose transport sets the fake's hints
    clients: dict[str, Any] = {k: HintedClient(v) for k, v in built.items()}
    adapter = AnthropicClient if args.dialect == "anthropic" else OpenAIClient
    clients[key] = HintedClient(adapter(spec, settings, http_client=http))
    save_cpu = [0.0, 0.0]
    real_save = RunStore.save_episode

    def timed_save(store: RunStore, *a: Any, **k: Any) -> Any:
        t0 = time.thread_time()
        try:
            return real_save(store, *a, **k)
        finally:
            save_cpu[0] += time.thread_time() - t0
            save_cpu[1] += 1

    RunStore.save_episode = timed_save  # type: ignore[method-assign,assignment]
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        await run_and_grade(config, clients=clients, bundle=bundle)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    finally:
        RunStore.save_episode = real_save  # type: ignore[method-assign]
        for c in clients.values():
            await c.aclose()
        await http.aclose()
    args.floor = await protocol_floor(args.token)
    return wall, cpu, save_cpu[0], int(save_cpu[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=40, help="scenarios to run (default 40)")
    ap.add_argument("--agents", type=int, default=10, help="of the first N agents (default 10)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--ttft", type=float, default=0.55, help="median time to first token, s")
    ap.add_argument("--sigma", type=float, default=0.15, help="log-normal shape of the time to first token")
    ap.add_argument("--token", type=float, default=0.03, help="seconds between streamed deltas")
    ap.add_argument("--tool", type=float, default=0.05, help="seconds more before each tool call")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dialect", choices=("openai", "anthropic"), default="openai",
                    help="the candidate's adapter and wire format (default openai)")
    ap.add_argument("--transport", choices=("aiohttp", "httpx2"), default="aiohttp",
                    help="the candidate's HTTP transport (CALLBENCH_HTTP_TRANSPORT; default aiohttp)")
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-latency-bench")
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-latency-bench")
    count_reads()
    code = SERVER.format(tests=str(TESTS), ttft=args.ttft, sigma=args.sigma, token=args.token,
                         tool=args.tool, seed=args.seed, starter=str(STARTER))
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)  # its connection resets at the end
    try:
        assert server.stdout is not None
        url, root = server.stdout.readline().split()
        url = root if args.dialect == "anthropic" else url
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            wall, cpu, save_cpu, saves = event_loop.run(run(args, url, out))
            traces = read_traces(out)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    lat = [t.get("latency") or {} for t in traces]
    cand = [r for x in lat for r in x.get("requests", []) if r["role"] == "candidate"]
    caller = [r for x in lat for r in x.get("requests", []) if r["role"] == "caller"]
    words = [u["time_to_first_word_s"] for x in lat for u in x.get("turns", [])
             if u.get("time_to_first_word_s") is not None]
    cpu_c = [r["harness_cpu_s"] for r in cand if r.get("harness_cpu_s") is not None]
    cpu_u = [r["harness_cpu_s"] for r in caller if r.get("harness_cpu_s") is not None]
    streamed = sum(r["streamed"] for r in cand)
    word = quantile(words, 0.5)

    def ms(x: float) -> str:
        return f"{1000 * x:.2f} ms"

    print(f"profile: ttft median {ms(args.ttft)} (lognormal sigma {args.sigma}), {ms(args.token)} per delta, "
          f"+{ms(args.tool)} per tool call; concurrency {args.concurrency}; {args.dialect} adapter, "
          f"transport {args.transport}; "
          f"event loop {args.loop}")
    print(f"calls: {len(traces)}, candidate requests: {len(cand)} ({streamed} streamed), turns that spoke: "
          f"{len(words)}, caller requests: {len(caller)}; wall {wall:.1f} s; load: {os.getloadavg()[0]:.1f}")
    print(f"time to first word: p50 {ms(word)}, p90 {ms(quantile(words, 0.9))}")
    print(f"harness CPU per candidate request ({len(cpu_c)} recorded): p50 {ms(quantile(cpu_c, 0.5))}, "
          f"p90 {ms(quantile(cpu_c, 0.9))}, mean {ms(statistics.fmean(cpu_c))}; "
          f"p50 = {100 * quantile(cpu_c, 0.5) / word:.2f}% of the median time to first word (target < 2%)")
    if cpu_u:
        print(f"harness CPU per caller request (scripted caller, {len(cpu_u)}): "
              f"p50 {ms(quantile(cpu_u, 0.5))}, p90 {ms(quantile(cpu_u, 0.9))}")
    per = max(len(cand), 1)
    recorded = sum(cpu_c) + sum(cpu_u)
    print(f"recorded in all: {ms(recorded)} over the run, {ms(recorded / per)} per candidate request")
    reads = READS[0] / per
    print(f"socket reads per candidate request: {reads:.1f} (mean); the machine's floor: a bare protocol "
          f"{1e6 * args.floor:.0f} us per read ({ms(args.token)} apart, loopback TCP), so "
          f"{ms(reads * args.floor)} a request = {100 * reads * args.floor / word:.2f}% of the median "
          "time to first word")
    print(f"not in the per-request figure: saving a trace {ms(save_cpu / max(saves, 1))} CPU per episode "
          f"({ms(save_cpu / per)} per candidate request); whole process CPU (every thread: grading, "
          f"saving, start-up after the imports) {ms(cpu / per)} per candidate request = "
          f"{100 * cpu / per / word:.2f}% of the median time to first word")

if __name__ == "__main__":
    main()
