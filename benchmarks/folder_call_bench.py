"""Per-call CPU of the folder HTML report (at most about 1 ms per call, so that
terminal + JSON + HTML folder at 10,000 episodes fit in 30 s).

For each call of a run, read as the report reads it (one at a time; reading the trace and grade
files is not counted), the CPU time (``time.process_time``) of

- ``call_file``: everything the folder does for a call but writing it (view, data, script text,
  table row, search text; :func:`callbench.report.html.folder.call_file`);
- writing: ``call_file`` plus writing ``calls/e<n>.js`` into a temporary folder;
- for comparison, what the folder did before (its first version): the view with
  indented JSON, the Jinja markup (:func:`callbench.report.html.page.render_episode`) and its text
  content by regular expression.

Each is the best of ``--rounds`` passes over all calls (the least disturbed by other processes);
``os.getloadavg()`` is printed beside them. Run: ``nice -n 19 python benchmarks/folder_call_bench.py
[--run /work/synth1k] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import html as htmllib
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from callbench.report.html.call_file import call_file
from callbench.report.html.page import render_episode
from callbench.report.html.viewer import CallData, SharedTexts, call_data, episode_view
from callbench.report.model.load import RunData, load_runs

TARGET_MS = 1.0
Work = Callable[[CallData, int, SharedTexts, SharedTexts], object]
_TAG = re.compile(r"<[^>]*>")


def best_ms(runs: list[RunData], rounds: int, work: Work) -> float:
    """CPU ms per call of ``work``, best of ``rounds`` passes; the calls are read as the report
    reads them (one at a time, :func:`call_data`) and only ``work`` is timed."""
    best = float("inf")
    for _ in range(rounds):
        instructions, briefs = SharedTexts("instr"), SharedTexts("brief")
        spent, count = 0.0, 0
        for n, call in enumerate(call_data(runs)):
            t = time.process_time()
            work(call, n, instructions, briefs)
            spent += time.process_time() - t
            count += 1
        best = min(best, spent / count * 1e3)
    return best


def jinja_path(call: CallData, n: int, instructions: SharedTexts, briefs: SharedTexts) -> str:
    markup = str(render_episode(episode_view(call, n, instructions, briefs)))
    return " ".join(htmllib.unescape(_TAG.sub("", markup)).split())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=Path("/work/synth1k"), help="a run folder (read only)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    runs = load_runs([a.run])
    count = sum(1 for _ in call_data(runs))
    print(f"{count:,} calls of {a.run}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    pure = best_ms(runs, a.rounds, call_file)
    with tempfile.TemporaryDirectory(prefix="folder-call-bench-") as tmp:

        def write(call: CallData, n: int, instructions: SharedTexts, briefs: SharedTexts) -> None:
            done = call_file(call, n, instructions, briefs)
            (Path(tmp) / f"{done.anchor}.js").write_text(done.script, "utf-8")

        written = best_ms(runs, a.rounds, write)
        size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / count / 1e3
    before = best_ms(runs, a.rounds, jinja_path)
    ok = "OK" if written <= TARGET_MS else "MISSED"
    print(f"call_file: {pure:.3f} ms CPU per call; with writing its file: {written:.3f} ms (target <= "
          f"{TARGET_MS:.0f} ms) {ok}; call file {size:.1f} KB")
    print(f"before (Jinja markup + text by regex, not written): {before:.3f} ms CPU per call "
          f"({before / written:.1f}x); load average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
