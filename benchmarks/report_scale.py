"""Reports and grading at scale, and run folder size.

Prints each figure beside its target and the machine load (``os.getloadavg``, 1-minute) when it
was measured:

- ``report``: ``callbench report RUN --json --html`` (terminal + JSON + HTML) on a synthetic run of
  ``--episodes`` episodes (``benchmarks/synthetic_runs.py``, 3 candidates); wall time (target
  < 30 s at 10,000) and peak memory (``ru_maxrss`` of the child process; target < 1 GiB);
- ``grade``: ``callbench grade RUN --new-set`` with the run's scripted judges on the same run;
  peak memory (target < 500 MiB), wall time printed too;
- ``folder``: bytes per episode of a scripted run of the starter bundle (100 scenarios,
  ``scripted:reference``, graded with ``scripted:met``): the whole run folder divided by the
  episodes (target <= 25 KB), with the share of traces and grades.

Each command runs in its own process (``nice -n 19`` from the caller is inherited); peak memory is
that child's ``ru_maxrss`` (``resource.getrusage(RUSAGE_CHILDREN)`` after one child only).
Run: ``python benchmarks/report_scale.py [--only report,grade,folder] [--episodes 10000]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path

HERE = Path(__file__).resolve().parent
STARTER = Path(str(files("callbench") / "examples" / "starter"))
SCRIPTED = ["--candidate", "scripted:reference", "--caller", "scripted:plan", "--task-judge", "scripted:met",
            "--conversation-judge", "scripted:met"]


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def child(args: list[str]) -> tuple[float, float, float]:
    """Run ``python -m callbench ARGS`` as a child; returns (wall seconds, CPU seconds, peak RSS in
    MiB). The child's figures are read in a fresh helper process so that earlier children do not
    count. CPU time (user + system) is the figure to compare on a loaded machine."""
    code = (
        "import resource, subprocess, sys, time\n"
        "t0 = time.perf_counter()\n"
        "p = subprocess.run([sys.executable, '-m', 'callbench', *sys.argv[1:]], stdout=subprocess.DEVNULL)\n"
        "wall = time.perf_counter() - t0\n"
        "if p.returncode: sys.exit(p.returncode)\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"callbench {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    wall, cpu, rss = out.stdout.split()
    return float(wall), float(cpu), float(rss)


def synthetic(run: Path, episodes: int) -> None:
    spec = importlib.util.spec_from_file_location("synthetic_runs", HERE / "synthetic_runs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["synthetic_runs"] = mod
    spec.loader.exec_module(mod)
    t0 = time.perf_counter()
    mod.make_synthetic_run(run, episodes)
    size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    print(f"synthetic run: {episodes} episodes in {time.perf_counter() - t0:.1f} s, "
          f"{size / episodes / 1000:.1f} KB per episode ({load()})")


def bench_report(run: Path, episodes: int, out: Path) -> None:
    for what, args in (("terminal + JSON", ["--no-html"]),
                       ("terminal + JSON + HTML", ["--html", str(out / "report.html")])):
        load_before = load()
        wall, cpu, rss = child(["report", str(run), "--json", str(out / "report.json"), *args])
        # one file up to the single-file limit, else a folder named without ".html" (docs/report.md)
        html = next((h for h in (out / "report.html", out / "report") if h.exists()), out / "report.html")
        size = html.stat().st_size / 1e6 if html.is_file() else 0.0
        if html.is_dir():
            size = sum(p.stat().st_size for p in html.rglob("*") if p.is_file()) / 1e6
        ok_t = "OK" if episodes < 10_000 or wall < 30 else "MISSED (wall)" if cpu < 30 else "MISSED"
        ok_m = "OK" if episodes < 10_000 or rss < 1024 else "MISSED"
        print(f"report ({what}, {episodes} episodes): {wall:.1f} s wall, {cpu:.1f} s CPU (target < 30 s "
              f"at 10,000) {ok_t}; "
              f"peak {rss:.0f} MiB (target < 1024) {ok_m}" + (f"; HTML {size:.1f} MB" if size else "")
              + f" ({load_before} before, {load()} after)")


def bench_grade(run: Path, episodes: int) -> None:
    load_before = load()
    wall, cpu, rss = child(["grade", str(run), "--new-set"])
    ok_m = "OK" if episodes < 10_000 or rss < 500 else "MISSED"
    print(f"grade (scripted judges, {episodes} episodes): peak {rss:.0f} MiB (target < 500) {ok_m}; "
          f"{wall:.1f} s wall, {cpu:.1f} s CPU ({load_before} before, {load()} after)")


def bench_folder(tmp: Path) -> None:
    run = tmp / "starter"
    subprocess.run([sys.executable, "-m", "callbench", "run", str(STARTER), *SCRIPTED, "--out", str(run)],
                   check=True, stdout=subprocess.DEVNULL)
    sizes: dict[str, int] = {}
    for p in run.rglob("*"):
        if p.is_file():
            top = p.relative_to(run).parts[0]
            sizes[top] = sizes.get(top, 0) + p.stat().st_size
    n = len(list((run / "traces").iterdir()))
    total = sum(sizes.values()) / n / 1000
    parts = ", ".join(f"{k} {v / n / 1000:.1f}" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1]))
    print(f"run folder, scripted starter ({n} episodes): {total:.1f} KB per episode (target <= 25) "
          f"{'OK' if total <= 25 else 'MISSED'}; by part (KB per episode): {parts} ({load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="report,grade,folder")
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="keep the synthetic run here (reused when it exists)")
    a = ap.parse_args()
    only = set(a.only.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="callbench-report-scale-"))
    try:
        print(f"{os.cpu_count()} CPUs; {load()}")
        if only & {"report", "grade"}:
            run = a.keep or tmp / "synthetic"
            if not (run / "manifest.json").is_file():
                synthetic(run, a.episodes)
            if "report" in only:
                bench_report(run, a.episodes, tmp)
            if "grade" in only:
                bench_grade(run, a.episodes)
        if "folder" in only:
            bench_folder(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
