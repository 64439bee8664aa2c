"""callbench's own CPU per request, from a real (scripted) run to every report: recorded for every
request the loop drove, consistent with the requests' wall-clock spans and each turn's sum, and
the report's figures equal to a recomputation from the saved trace files read as plain JSON.
Nothing here is timed against the wall clock: the figures are checked for structure and
consistency, the amounts for a busy machine are the benchmark's (``benchmarks/latency_bench.py``).
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
from pathlib import Path
from typing import Any

import markupsafe
import numpy as np
import pytest
from rich.console import Console

from callbench.bundle.validate.audits import load_bundle
from callbench.report.model.build import build_report
from callbench.report.model.latency import harness_cpu_share
from callbench.report.model.latency_text import harness_cpu_line
from callbench.report.model.load import load_runs
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters
from callbench.runs.session import run_and_grade
from callbench.stats.latency import CallTimings
from callbench.trace import EpisodeLatency

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
CANDIDATE = "scripted:reference"


def inverted_cdf(values: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(values), q, method="inverted_cdf"))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harness_cpu") / "run"
    config = RunConfig(bundle_path=STARTER, out=out, candidates=[RoleSpec(spec=CANDIDATE)],
                       caller=RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
                       conversation_judge=RoleSpec(spec="scripted:met"), concurrency=3, seed=11,
                       filters=ScenarioFilters(limit=6))
    asyncio.run(run_and_grade(config, bundle=load_bundle(STARTER)))
    return out


def traces(run: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((run / "traces").iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            out.append(json.load(f))
    return out


def test_every_request_has_harness_cpu_within_its_wall_span(run: Path) -> None:
    saved = traces(run)
    assert len(saved) == 6
    for t in saved:
        requests = t["latency"]["requests"]
        assert {r["role"] for r in requests} == {"candidate", "caller"}
        cpu = [r["harness_cpu_s"] for r in requests]
        assert all(c is not None and c >= 0.0 for c in cpu), cpu
        assert sum(cpu) > 0.0
        # a request's segment runs from building it to building the next: it lies between the
        # previous request's send and the next one's, and one thread's CPU never outruns the clock
        starts = [0.0] + [r["start_s"] for r in requests]
        for i, c in enumerate(cpu[:-1]):
            assert c <= starts[i + 2] - starts[i] + 1e-3, (i, c, starts[i], starts[i + 2])
        for turn in t["latency"]["turns"]:
            mine = [r["harness_cpu_s"] for r in requests
                    if r["role"] == "candidate" and r["turn"] == turn["turn"]]
            assert turn["harness_cpu_s"] == pytest.approx(sum(mine), abs=1e-12)


def test_report_figures_equal_a_recomputation_from_the_trace_files(run: Path) -> None:
    saved = traces(run)
    cpu = [r["harness_cpu_s"] for t in saved for r in t["latency"]["requests"] if r["role"] == "candidate"]
    words = [u["time_to_first_word_s"] for t in saved for u in t["latency"]["turns"]
             if u["time_to_first_word_s"] is not None]
    report = build_report(load_runs([run]), n_samples=50)
    (name, lat), = report.latency.items()
    assert lat.harness_cpu_requests == len(cpu)
    assert lat.harness_cpu["p50"].estimate == inverted_cdf(cpu, 0.5)
    assert lat.harness_cpu["p90"].estimate == inverted_cdf(cpu, 0.9)
    assert lat.first_word["p50"].estimate == inverted_cdf(words, 0.5)
    # a scripted candidate answers in microseconds, timed by the harness: no share is given
    assert lat.harness_timed_calls == 6 and lat.harness_cpu_share is None
    assert harness_cpu_share(inverted_cdf(cpu, 0.5), inverted_cdf(words, 0.5), 0) == (
        pytest.approx(100 * inverted_cdf(cpu, 0.5) / inverted_cdf(words, 0.5)))
    line = harness_cpu_line(name, lat)
    assert line is not None and f"p50 {1000 * inverted_cdf(cpu, 0.5):.1f} [" in line
    assert line.endswith("no share of the time to first word: 6 call(s) timed by the harness, not the model")

    from callbench.report.export.json_csv import read_json, write_json
    from callbench.report.html.page import render_html
    from callbench.report.terminal.tables import render_terminal

    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=400, emoji=False))
    assert line in buf.getvalue()
    page = render_html(report, load_runs([run]), include_traces=True)
    assert str(markupsafe.escape(line)) in page
    path = run.parent / "report.json"
    write_json(report, path)
    data = json.loads(path.read_text())
    assert data["latency"][name]["harness_cpu"]["p90"]["estimate"] == inverted_cdf(cpu, 0.9)
    assert read_json(path).latency[name].harness_cpu_share == lat.harness_cpu_share


def test_the_share_is_given_only_for_a_model_timed_candidate(run: Path) -> None:
    assert harness_cpu_share(0.009, 0.56, 0) == pytest.approx(1.607142857)
    assert harness_cpu_share(0.009, 0.56, 1) is None
    assert harness_cpu_share(None, 0.56, 0) is None
    assert harness_cpu_share(0.009, 0.0, 0) is None
    # a measured candidate beside a scripted caller: the call's timing sources are mixed, the
    # candidate's are not (the embedded model in the demo is such a candidate)
    latency = traces(run)[0]["latency"]
    for item in latency["requests"]:
        if item["role"] == "candidate":
            item["source"] = "measured"
    mixed = EpisodeLatency.model_validate({**latency, "source": "mixed"})
    assert CallTimings.of(mixed).harness_timed is False
    assert CallTimings.of(EpisodeLatency.model_validate(traces(run)[0]["latency"])).harness_timed is True


def test_traces_without_the_field_read_and_report_nothing_for_it(run: Path) -> None:
    latency = traces(run)[0]["latency"]
    for item in latency["requests"] + latency["turns"]:
        del item["harness_cpu_s"]  # as traces written before it was recorded
    old = EpisodeLatency.model_validate(latency)
    assert all(r.harness_cpu_s is None for r in old.requests)
    assert CallTimings.of(old).harness_cpu_s == []
    assert CallTimings.of(old).first_word_s == [u["time_to_first_word_s"] for u in latency["turns"]]


def test_judge_request_latency_is_shown_as_the_judges_not_the_candidates(
        make_run: Any, tmp_path: Path) -> None:
    from callbench.grade.models import JudgeRequestTiming
    from callbench.report.html.page import render_html
    from callbench.report.model.judge_latency import judge_latency_line

    run = make_run(agents=1, scenarios=2, repeats=1)
    rng = np.random.default_rng(5)
    task: list[float] = []
    for path in sorted((run / "grades").glob("*/episodes/*.json")):
        grade = json.loads(path.read_text())
        timings = {role: [JudgeRequestTiming(ask=a, waited_s=w, first_token_s=w / 2, replayed=w > 1.0)
                          for a, w in enumerate(np.round(rng.uniform(0.1, 1.5, 2), 3).tolist())]
                   for role in ("task_judge", "conversation_judge")}
        task += [t.waited_s for t in timings["task_judge"]]
        grade["judge_timings"] = {k: [t.model_dump() for t in v] for k, v in timings.items()}
        path.write_text(json.dumps(grade))
    runs = load_runs([run])
    report = build_report(runs, n_samples=50)
    judged = report.runs[0].judge_latency
    assert set(judged) == {"task_judge", "conversation_judge"}
    assert judged["task_judge"].requests == len(task) == 8  # two candidates, two calls, two requests
    assert judged["task_judge"].median_waited_s == inverted_cdf(task, 0.5)
    assert judged["task_judge"].p90_waited_s == inverted_cdf(task, 0.9)
    assert judged["task_judge"].replayed == sum(w > 1.0 for w in task)
    line = judge_latency_line(report.runs[0].run_id, judged)
    assert line is not None and "the judges', not the candidate's" in line
    assert f"task_judge median {1000 * inverted_cdf(task, 0.5):.0f} ms" in line
    assert str(markupsafe.escape(line)) in render_html(report, runs, include_traces=False)
    data = json.loads(report.model_dump_json())
    assert data["runs"][0]["judge_latency"]["task_judge"]["median_waited_s"] == inverted_cdf(task, 0.5)
    assert judge_latency_line("r", {}) is None
