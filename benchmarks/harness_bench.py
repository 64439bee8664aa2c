"""Harness speed with scripted models over the whole starter bundle.

Runs every starter scenario once with ``scripted:reference`` as the candidate, ``scripted:plan`` as
the caller and ``scripted:met`` as both judges, through the real executor (traces saved, graded,
indexed), and prints harness time per episode and per candidate turn. Model time is ~zero here, so
this measures callbench's own overhead. Then runs ``bootstrap_bench.py`` for the statistics part.

Run: ``python benchmarks/harness_bench.py [--repeats N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import runpy
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path

from callbench.bundle.validate.audits import load_bundle
from callbench.runfolder.store import RunStore
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.session import build_clients, run_and_grade


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-bootstrap", action="store_true")
    args = ap.parse_args()
    starter = Path(str(files("callbench") / "examples" / "starter"))
    t0 = time.perf_counter()
    bundle = load_bundle(starter)
    t_load = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(
            bundle_path=starter, out=Path(tmp) / "run", candidates=[RoleSpec(spec="scripted:reference")],
            caller=RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
            conversation_judge=RoleSpec(spec="scripted:met"), repeats=args.repeats, concurrency=4,
        )
        clients = build_clients(config, bundle)
        t0 = time.perf_counter()
        manifest, _ = asyncio.run(run_and_grade(config, clients=clients, bundle=bundle))
        elapsed = time.perf_counter() - t0
        store = RunStore(config.out)
        turns = sum(
            len({m.candidate_turn for m in store.load_trace(k.episode_id).messages
                 if m.candidate_turn is not None})
            for k in manifest.planned
        )
    n = len(manifest.planned)
    print(f"bundle load + validation: {t_load * 1000:.0f} ms ({len(bundle.scenarios())} scenarios)")
    print(f"episodes: {n} ({manifest.skipped} skipped), candidate turns: {turns}")
    print(f"harness time (simulate + save + grade + index): {elapsed:.2f} s")
    print(f"  per episode: {elapsed / max(n, 1) * 1000:.1f} ms; "
          f"per candidate turn: {elapsed / max(turns, 1) * 1000:.2f} ms")
    if not args.skip_bootstrap:
        sys.argv = [sys.argv[0]]
        runpy.run_path(str(Path(__file__).with_name("bootstrap_bench.py")), run_name="__main__")


if __name__ == "__main__":
    main()
