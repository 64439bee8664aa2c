"""Time ``callbench demo`` end to end and show where the time goes (under 10 minutes on a
2-core machine once installed).

Runs the demo in a subprocess (a fresh temporary run folder, so nothing is resumed) with
``CALLBENCH_LOG_LEVEL=DEBUG``, reads the local provider's per-call log lines
(``callbench.models.local.client``: prompt tokens, tokens read, seconds reading, tokens generated,
seconds generating) and prints the wall time, the time outside model calls, and per role: calls,
prompt tokens read and generated, and seconds. Exit status 1 when the wall time is over the budget.

Run: ``python benchmarks/demo_bench.py [--budget 600] [--keep DIR] [-- extra demo arguments]``.
Needs the ``[local]`` extra. Run it on an otherwise idle machine: the demo uses every core.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

LINE = re.compile(
    r"DEBUG (?P<role>\w+) \S+ turn \d+ attempt \d+: prompt (?P<prompt>\d+) tokens \((?P<read>\d+) read, "
    r"(?P<read_s>[\d.]+) s\), (?P<gen>\d+) generated \((?P<gen_s>[\d.]+) s\), (?P<all_s>[\d.]+) s in all"
)


def summarize(log: str) -> dict[str, dict[str, float]]:
    """Per role: ``calls``, ``read`` / ``read_s`` (prompt tokens evaluated, seconds), ``generated`` /
    ``gen_s`` and ``all_s`` (seconds of the whole call), summed over the log's call lines."""
    roles: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for m in LINE.finditer(log):
        r = roles[m["role"]]
        r["calls"] += 1
        r["read"] += int(m["read"])
        r["read_s"] += float(m["read_s"])
        r["generated"] += int(m["gen"])
        r["gen_s"] += float(m["gen_s"])
        r["all_s"] += float(m["all_s"])
    return {k: dict(v) for k, v in roles.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=600.0, help="seconds allowed (default 600)")
    parser.add_argument("--keep", type=Path, help="run folder to keep (default: a temporary one)")
    parser.add_argument("demo_args", nargs="*", help="extra arguments for callbench demo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "demo"
        env = {**os.environ, "CALLBENCH_LOG_LEVEL": "DEBUG"}
        entry = "from callbench.cli import app; app()"
        cmd = [sys.executable, "-c", entry, "demo", "--out", str(out), *args.demo_args]
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
        print(f"callbench demo failed with exit status {proc.returncode}", file=sys.stderr)
        return 2
    roles = summarize(proc.stderr)
    in_calls = sum(r["all_s"] for r in roles.values())
    print(f"callbench demo: {wall:.0f} s wall ({wall / 60:.1f} min), budget {args.budget:.0f} s")
    print(f"  in local model calls: {in_calls:.0f} s; outside them (load, simulate, grade, report): "
          f"{wall - in_calls:.0f} s")
    print(f"  {'role':<20}{'calls':>6}{'read':>8}{'read s':>8}{'generated':>11}{'gen s':>7}{'all s':>7}")
    for name, r in sorted(roles.items()):
        print(
            f"  {name:<20}{r['calls']:>6.0f}{r['read']:>8.0f}{r['read_s']:>8.0f}"
            f"{r['generated']:>11.0f}{r['gen_s']:>7.0f}{r['all_s']:>7.0f}"
        )
    return 0 if wall <= args.budget else 1


if __name__ == "__main__":
    raise SystemExit(main())
