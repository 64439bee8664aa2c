"""The folder report's latency strips mark the report's budget, the same value at the same place
as the single file's, however the folder is written (while the run is read, after reading
several runs, in this process or by worker processes) and wherever the budget comes from
(``--latency-budget``, the run's manifest, the default)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runfolder.manifest import RunManifest
from callbench.trace import EpisodeLatency, atomic_write_text

from .conftest import force_workers, write_run
from .test_html_folder import calls_of
from .test_latency_strip import known_latency

Strip = list[tuple[str | None, str | None]]
"""One call's strip: per turn, the budget line's position (percent) and its label, or (None, None)."""


def _latency(c: str, a: int, s: int, r: int) -> EpisodeLatency:
    """Repeat 0: the three turns of :func:`known_latency` (1.0 s, 2.3 s, 1.7 s on their own
    scales); repeat 1: its last two only, so the two calls' strips differ."""
    latency = known_latency()
    if r == 1:
        latency.turns = latency.turns[1:]
    return latency


def _run(root: Path, run_id: str = "r1", *, budget_s: float | None, candidate: str = "cand-a") -> Path:
    run = write_run(root, run_id, candidates=(candidate,), agents=1, scenarios=1, repeats=2, latency=_latency)
    if budget_s is not None:  # what callbench run records in the manifest
        m = RunManifest.model_validate_json((run / "manifest.json").read_text())
        m.latency_budget_s = budget_s
        atomic_write_text(run / "manifest.json", m.model_dump_json())
    return run


def _single_file_strips(page: str) -> dict[str, Strip]:
    """anchor -> its strip as the single file's markup shows it."""
    out: dict[str, Strip] = {}
    for chunk in page.split('<details class="episode" id="')[1:]:
        anchor = chunk[: chunk.index('"')]
        strip: Strip = []
        for row in re.findall(r'<tr class="lat-row">(.*?)</tr>', chunk, re.S):
            m = re.search(r'<span class="lat-budget" style="left:([\d.]+)%" title="([^"]*)" '
                          r'data-label="\2"></span>', row)
            strip.append((m.group(1), m.group(2)) if m else (None, None))
        out[anchor] = strip
    return out


def _folder_strips(folder: Path) -> dict[str, Strip]:
    """anchor -> its strip as the folder's call file holds it (what ``call_view.js`` draws: a line
    at ``budget`` labelled ``budget_label`` when ``budget`` is not null)."""
    return {anchor: [(t["budget"], t["budget_label"] if t["budget"] is not None else None)
                     for t in call["latency"]["turns"]]
            for anchor, call in calls_of(folder).items()}


def _expected(label: str, *positions: str | None) -> dict[str, Strip]:
    """Both calls' strips for a budget drawn at ``positions`` on turns 0, 1 and 2."""
    strip = [(p, label if p is not None else None) for p in positions]
    return {"e0": strip, "e1": strip[1:]}


def _report(args: list[str]) -> None:
    done = CliRunner().invoke(app, ["report", *args, "--samples", "20"])
    assert done.exit_code == 0, done.output


def _outputs(tmp_path: Path, runs: list[Path], *extra: str) -> tuple[dict[str, Strip], dict[str, Strip], Any]:
    """The single file's strips, the folder's strips and the JSON report's budget for ``runs``."""
    single, folder, js = tmp_path / "one.html", tmp_path / "folder", tmp_path / "r.json"
    _report([*map(str, runs), "--html", str(single), "--json", str(js), *extra])
    _report([*map(str, runs), "--html-folder", str(folder), *extra])
    budget = json.loads(js.read_text())["settings"]["latency_budget_s"]
    return _single_file_strips(single.read_text(encoding="utf-8")), _folder_strips(folder), budget


@pytest.mark.parametrize("parallel", [False, True])
def test_folder_written_while_reading_marks_the_runs_recorded_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    run = _run(tmp_path, budget_s=1.2)
    if parallel:  # the call files written by worker processes (the writer is pickled to them)
        force_workers(monkeypatch, 1)
    from callbench.report.html import calls as html_calls

    second_pass: list[int] = []
    real = html_calls.write_calls
    monkeypatch.setattr(html_calls, "write_calls", lambda jobs: second_pass.append(len(jobs)) or real(jobs))
    single, folder, budget = _outputs(tmp_path, [run])
    assert second_pass == []  # one run: every call file was written while the run was read
    # turn 0 (1.0 s) is over before 1.2 s; turns 1 and 2 on 2.3 s and 1.7 s
    expected = _expected("budget 1200 ms", None, "52.2", "70.6")
    assert folder == expected
    assert single == expected
    assert budget == 1.2


def test_latency_budget_option_is_the_one_the_folder_marks(tmp_path: Path) -> None:
    run = _run(tmp_path, budget_s=1.2)
    single, folder, budget = _outputs(tmp_path, [run], "--latency-budget", "500ms")
    expected = _expected("budget 500 ms", "50.0", "21.7", "29.4")
    assert folder == expected
    assert single == expected
    assert budget == 0.5


def test_a_run_without_a_recorded_budget_gets_the_default_in_the_folder(tmp_path: Path) -> None:
    run = _run(tmp_path, budget_s=None)
    single, folder, budget = _outputs(tmp_path, [run])
    expected = _expected("budget 800 ms", "80.0", "34.8", "47.1")
    assert folder == expected
    assert single == expected
    assert budget == 0.8


def test_several_runs_written_after_reading_mark_the_first_recorded_budget(tmp_path: Path) -> None:
    # several runs: the folder's calls are written once all are read (candidate labels may change)
    first = _run(tmp_path, "r1", budget_s=None, candidate="cand-a")
    second = _run(tmp_path, "r2", budget_s=1.2, candidate="cand-b")
    single, folder, budget = _outputs(tmp_path, [first, second])
    one = _expected("budget 1200 ms", None, "52.2", "70.6")
    expected = {**one, "e2": one["e0"], "e3": one["e1"]}
    assert folder == expected
    assert single == expected
    assert budget == 1.2


def test_the_report_budget_rule(tmp_path: Path) -> None:
    from callbench.cli.common import _report_budget

    none = _run(tmp_path, "none", budget_s=None)
    late = _run(tmp_path, "late", budget_s=1.2)
    zero = _run(tmp_path, "zero", budget_s=0.0)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    assert _report_budget(0.5, [late]) == 0.5  # --latency-budget wins
    assert _report_budget(None, [broken, none, late, zero]) == 1.2  # the first run that records one
    assert _report_budget(None, [zero, late]) == 0.0  # a recorded 0 ms is a budget too
    assert _report_budget(None, [none]) == 0.8  # the documented default
    assert _report_budget(None, [tmp_path / "missing"]) == 0.8  # reading the runs reports it


def test_a_folder_build_refuses_a_report_with_another_budget(tmp_path: Path) -> None:
    from callbench.report.html.folder import start_html_folder
    from callbench.report.model.build import build_report
    from callbench.report.model.load import load_run

    run = _run(tmp_path, budget_s=None)
    out = tmp_path / "folder"
    build = start_html_folder(out, budget_s=1.2)
    runs = [load_run(run, workers=1, calls=lambda n: build.while_reading())]
    assert _folder_strips(build.tmp)["e0"][1] == ("52.2", "budget 1200 ms")
    with pytest.raises(ValueError, match=re.escape("latency budget of 1.2 s but the report's is 0.8 s")):
        build.finish(build_report(runs, n_samples=20), out, reason="test")
    assert not out.exists() and not build.tmp.exists()
