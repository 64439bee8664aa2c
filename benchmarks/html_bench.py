"""The HTML report at scale: the folder report at 10,000 calls and the single
file at the size limit, measured in Chromium.

Figures, each printed beside its target:

- folder report of ``--episodes`` calls (default 10,000, synthetic starter-shaped run from
  ``benchmarks/synthetic_runs.py``): size of ``index.html`` (target under 20 MB), its open time in
  Chromium (median of ``--opens`` loads, navigation start to the load event; target under 3 s),
  then in the open page: a filter, the first search (loads the search files) and opening a call
  (loads its file) until its transcript is on screen; folder size, call file sizes, write time;
- single file at ``SINGLE_FILE_MAX_CALLS`` calls and at the sizes of ``--single``: file size and
  open time (the limit is chosen so the largest single file opens within the same 3 s).

Reading the run: until ``report/model/load.py`` streams, this script reads each trace
and grade once for the statistics and again, one at a time, for the HTML writer (the iterator of
``CallData`` the writer takes), so it measures the writer, not the loader. The single files are
written from runs of their own size by the report's loader. Times are wall clock on
this machine under whatever load it has; ``uptime``'s load average is printed beside them.

Run: ``python benchmarks/html_bench.py [--episodes 10000] [--run DIR] [--opens 5] [--single 100,250]``.
Needs playwright (Python) and a chromium binary (Debian's ``chromium``); no network.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from callbench.grade.models import EpisodeGrade, GradeSetManifest
from callbench.report.html.folder import SINGLE_FILE_MAX_CALLS, write_html_folder
from callbench.report.html.page import write_html
from callbench.report.html.viewer import CallData, call_data
from callbench.report.model.build import build_report
from callbench.report.model.episode_read import TraceSummary
from callbench.report.model.load import RunData, _record, load_runs, read_model
from callbench.runfolder.manifest import MANIFEST, RunManifest, grades_dir, traces_dir
from callbench.trace import Trace

HERE = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
FIRST_PAGE_MB, OPEN_S = 20.0, 3.0


def synthetic_run(dest: Path, episodes: int) -> Path:
    spec = importlib.util.spec_from_file_location("synthetic_runs", HERE / "synthetic_runs.py")
    assert spec and spec.loader
    mod = sys.modules.get("synthetic_runs") or importlib.util.module_from_spec(spec)
    if "synthetic_runs" not in sys.modules:
        sys.modules["synthetic_runs"] = mod  # its dataclasses look their module up there
        spec.loader.exec_module(mod)
    return Path(mod.make_synthetic_run(dest, episodes))


def _trace(run_dir: Path, episode_id: str) -> Trace | None:
    path = traces_dir(run_dir) / f"{episode_id}.json"
    return Trace.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None


def _grade(run_dir: Path, gid: str, episode_id: str) -> EpisodeGrade | None:
    path = grades_dir(run_dir, gid) / "episodes" / f"{episode_id}.json"
    return EpisodeGrade.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None


STREAMING = hasattr(RunData, "iter_episodes")
"""True once ``report/model/load.py`` streams; until then the two functions below
stand in for it, reading each trace once for the records and again for the writer."""


def records_only(run_dir: Path, limit: int | None = None) -> RunData:
    """The run's records (traces read one at a time and dropped), as the report's statistics need."""
    manifest = read_model(run_dir / MANIFEST, RunManifest, "run manifest")
    gid = manifest.grade_sets[-1]
    gset = read_model(grades_dir(run_dir, gid) / "grade_set.json", GradeSetManifest, "grade set manifest")
    records = []
    for key in manifest.planned[:limit]:
        trace, grade = _trace(run_dir, key.episode_id), _grade(run_dir, gid, key.episode_id)
        records.append(_record(manifest.run_id, key.episode_id, key, TraceSummary.of(trace), grade))
    return RunData(run_dir, manifest, gset, records, {}, {})


def stream_calls(run: RunData) -> Iterator[CallData]:
    """Each call's record, trace and grade, read from disk one at a time."""
    gid = run.grade_set.grade_set_id
    for rec in run.records:
        trace, grade = _trace(run.run_dir, rec.episode_id), _grade(run.run_dir, gid, rec.episode_id)
        if trace is not None or grade is not None:
            yield CallData(rec, trace, grade)


def load_times(browser: Any, url: str, opens: int) -> list[float]:
    out = []
    for _ in range(opens):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url, wait_until="load", timeout=180_000)
        out.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
        page.close()
    return out


def in_page(browser: Any, url: str) -> dict[str, float]:
    """Seconds for a filter, the first search and opening a call in the folder report."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, wait_until="load", timeout=180_000)
    lang = page.evaluate("document.querySelector('#filter-language').options[2].value")
    t = time.perf_counter()
    page.select_option("#filter-language", lang)
    filtered = time.perf_counter() - t
    t = time.perf_counter()
    page.fill("#episode-search", "r0")
    page.wait_for_function("!document.getElementById('episode-count').textContent.startsWith('loading')",
                           timeout=180_000)
    searched = time.perf_counter() - t
    link = page.locator("#episode-table tbody tr a").first
    target = link.get_attribute("href")[1:]
    t = time.perf_counter()
    link.click()
    page.wait_for_selector(f"#{target}[open] tr.role-user", timeout=60_000)
    opened = time.perf_counter() - t
    assert not errors, errors
    return {"filter": filtered, "first search": searched, "open a call": opened}


def folder_bytes(folder: Path, sub: str) -> list[int]:
    return [p.stat().st_size for p in (folder / sub).iterdir()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--run", type=Path, help="an existing run folder (default: a synthetic one)")
    ap.add_argument("--opens", type=int, default=5)
    ap.add_argument("--single", default="100,250", help="more single-file sizes to measure")
    ap.add_argument("--samples", type=int, default=200, help="bootstrap samples for the statistics")
    a = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="html-bench-"))
    try:
        t = time.perf_counter()
        run_dir = a.run or synthetic_run(tmp / "run", a.episodes)
        print(f"run folder: {run_dir} ({time.perf_counter() - t:.0f} s to make)")
        if STREAMING:  # the report's own loader reads traces one at a time
            runs = load_runs([run_dir])
            report, calls = build_report(runs, n_samples=a.samples), call_data(runs)
        else:
            run = records_only(run_dir)
            report, calls = build_report([run], n_samples=a.samples), stream_calls(run)
        folder = tmp / "report"
        t, c = time.perf_counter(), time.process_time()
        n = write_html_folder(report, calls, folder, reason="benchmark")
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        index_mb = (folder / "index.html").stat().st_size / 1e6
        calls, search = folder_bytes(folder, "calls"), folder_bytes(folder, "search")
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"folder report, {n:,} calls: written in {wall:.1f} s ({cpu:.1f} s CPU), peak RSS of this "
              f"process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        print(f"  first page index.html {index_mb:.2f} MB (target < {FIRST_PAGE_MB:.0f} MB)")
        print(f"  call files: {len(calls):,}, median {statistics.median(calls) / 1e3:.1f} KB, max "
              f"{max(calls) / 1e3:.1f} KB, total {sum(calls) / 1e6:.0f} MB; search files: {len(search)}, "
              f"{sum(search) / 1e6:.1f} MB")
        singles: dict[int, Path] = {}  # written before Playwright's event loop starts
        for size in sorted({SINGLE_FILE_MAX_CALLS, *(int(x) for x in a.single.split(",") if x)}):
            runs = load_runs([synthetic_run(tmp / f"run-{size}", size)])
            singles[size] = tmp / f"single-{size}.html"
            write_html(build_report(runs, n_samples=a.samples), runs, singles[size])
            shutil.rmtree(tmp / f"run-{size}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            url = (folder / "index.html").as_uri()
            times = load_times(browser, url, a.opens)
            print(f"  opens in Chromium in {statistics.median(times):.2f} s (median of {len(times)}: "
                  f"{', '.join(f'{x:.2f}' for x in times)}; target < {OPEN_S:.0f} s)")
            for what, s in in_page(browser, url).items():
                print(f"  {what}: {s:.2f} s")
            for size, path in singles.items():
                times = load_times(browser, path.as_uri(), a.opens)
                limit = " (the limit)" if size == SINGLE_FILE_MAX_CALLS else ""
                size_mb = path.stat().st_size / 1e6
                print(f"single file, {size:,} calls{limit}: {size_mb:.1f} MB, opens in "
                      f"{statistics.median(times):.2f} s (median of {len(times)})")
            browser.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
