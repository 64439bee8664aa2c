"""Validator speed: ``callbench validate`` on a bundle of N scenarios ("Done when":
"accepts a valid bundle in well under a second for fifty scenarios").

Builds a temporary bundle of ``--scenarios`` scenarios by replicating a source bundle's scenarios
under fresh ids (default source: the starter bundle when it exists, else the minimal test bundle),
checks the copy validates clean, then times, as the median of ``--repeats`` runs in one process:
loading (read + parse + typed models), the audits (``validate_loaded``), and both together
(``validate_path``, what the command does after Python has started). Reports CPU time (stable on a
shared machine) and wall time. Exits 1 when the median CPU time of ``validate_path`` is over
``--budget`` seconds.

Run: ``python benchmarks/validate_bench.py [--scenarios 50] [--source PATH] [--repeats 5] [--budget 1.0]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from callbench.bundle.loader import load_bundle_collect
from callbench.bundle.validate.audits import validate_loaded, validate_path

HERE = Path(__file__).resolve().parent.parent
STARTER = HERE / "src" / "callbench" / "examples" / "starter"
MINIMAL = HERE / "tests" / "bundle" / "data" / "minimal"


def build(source: Path, n: int, dest: Path) -> int:
    """Copy ``source`` to ``dest`` and replicate its scenarios (new ids) until there are ``n``."""
    shutil.copytree(source, dest)
    originals = sorted(dest.glob("agents/*/scenarios/*.yaml"))
    if not originals:
        raise SystemExit(f"{source}: no scenario files")
    for f in originals[n:]:
        f.unlink()
    count, copy = min(n, len(originals)), 0
    while count < n:
        for f in originals:
            if count >= n:
                break
            data = yaml.safe_load(f.read_text(encoding="utf-8"))
            data["id"] = f"{data['id']}_copy{copy}"
            (f.parent / f"{data['id']}.yaml").write_text(
                yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
            count += 1
        copy += 1
    return count


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median (CPU seconds, wall seconds) of ``repeats`` calls. CPU time (``process_time``) is the
    stable measure on a shared machine; on an idle one it equals wall time (single-threaded work)."""
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=50)
    ap.add_argument("--source", type=Path, default=STARTER if (STARTER / "agents").is_dir() else MINIMAL)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=1.0, help="Seconds allowed for validate_path (median).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bundle"
        n = build(args.source, args.scenarios, root)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        bundle, problems = validate_path(root)  # warm-up, and the copy must be clean
        if bundle is None:
            print(f"source bundle does not load: {[str(p) for p in problems[:5]]}")
            return 2
        if problems:
            print(f"note: {len(problems)} problem(s) in the replicated bundle (first: {problems[0]})")
        t_load = timed(lambda: load_bundle_collect(root), args.repeats)
        t_audit = timed(lambda: validate_loaded(bundle), args.repeats)
        t_all = timed(lambda: validate_path(root), args.repeats)
    agents = len(bundle.agents)
    tools = sum(len(a.config.tools) for a in bundle.agents.values())
    print(f"source {args.source}: {n} scenarios, {agents} agents, {tools} tools, {size / 1e6:.2f} MB on disk")
    print("median of", args.repeats, "runs, CPU ms (wall ms):")
    rows = (("load (read, parse, typed models)", t_load), ("audits (validate_loaded)", t_audit),
            ("validate_path (both)", t_all))
    for label, (cpu, wall) in rows:
        print(f"  {label:34s} {cpu * 1000:7.1f} ({wall * 1000:7.1f})  {cpu / n * 1000:5.1f} ms/scenario")
    ok = t_all[0] <= args.budget
    print(f"{'OK' if ok else 'OVER'}: budget {args.budget * 1000:.0f} ms CPU for validate_path")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
