"""Reliability over repeats, the simulator and channel ledger, and slice warnings in the report
(terminal, HTML, JSON), on synthetic run folders with hand-computed expected values."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.models import Diagnostic, Pillar
from callbench.cli import app
from callbench.grade.models import EpisodeGrade, GradedItem, Label
from callbench.report.html.page import render_html
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.trace import ChannelEvent, EndReason, atomic_write_text, load_trace, save_trace

MakeRun = Callable[..., Path]

# cand-a's overall score per (agent, scenario): repeat 0, repeat 1 (cutoff 70)
A_SCORES = {
    (0, 0): (80.0, 60.0),  # pass, fail: flips
    (0, 1): (90.0, 90.0),  # pass, pass
    (1, 0): (50.0, 40.0),  # fail, fail
    (1, 1): (75.0, 65.0),  # pass, fail: flips
    (2, 0): (70.0, 100.0),  # pass, pass
    (2, 1): (10.0, 20.0),  # fail, fail
}


def score(cand: str, a: int, s: int, r: int) -> float:
    return A_SCORES[(a, s)][r] if cand == "cand-a" else 50.0


def _tamper(run_dir: Path) -> None:
    """Give one cand-a episode caller rejections, a rerun and an unreached channel event, and one
    cand-a grade a judge error (grade hashes kept in step with the edited trace)."""
    eid = "cand-a__ag0__sc0__r0"
    tpath = run_dir / "traces" / f"{eid}.json"
    t = load_trace(tpath)
    t.caller_turns[0].rejections = [
        "invalid_json: the reply is empty | reply: ",
        "leak: said brief | reply: x",
    ]
    t.caller_turns[0].attempts = 3
    t.reruns = 1
    t.unreached_channel_events = [
        ChannelEvent(kind="drop", source="authored", turn=4, span="x", applied=False, detail="never came")
    ]
    save_trace(t, tpath)
    gpath = run_dir / "grades" / "gs1" / "episodes" / f"{eid}.json"
    g = EpisodeGrade.model_validate_json(gpath.read_text())
    g.trace_sha256 = t.sha256()
    atomic_write_text(gpath, g.model_dump_json())
    eid2 = "cand-a__ag1__sc0__r1"
    gpath2 = run_dir / "grades" / "gs1" / "episodes" / f"{eid2}.json"
    g2 = EpisodeGrade.model_validate_json(gpath2.read_text())
    g2.items.append(
        GradedItem(
            id="crit_x",
            source="task_criterion",
            pillar=Pillar.TASK,
            diagnostic=Diagnostic.GROUNDING,
            weight=2,
            label=Label.JUDGE_ERROR,
            reason="unparseable",
        )
    )
    g2.judge_errors = 1
    atomic_write_text(gpath2, g2.model_dump_json())


@pytest.fixture
def two_repeat_run(make_run: MakeRun) -> Path:
    rd = make_run(score=score, skip=lambda c, a, s, r: (c, a, s, r) == ("cand-b", 0, 0, 1))
    _tamper(rd)
    return rd


def test_two_repeat_report_json(two_repeat_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    res = CliRunner().invoke(
        app, ["report", str(two_repeat_run), "--json", str(out), "--no-html", "--samples", "50"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    cands = {c["candidate"]: c for c in data["candidates"]}
    a, b = cands["cand-a"], cands["cand-b"]
    # verdicts (P,F) (P,P) (F,F) (P,F) (P,P) (F,F)
    assert a["pass_hat_k"] == {"1": pytest.approx(3 / 6), "2": pytest.approx(2 / 6)}
    assert a["verdict_flip_rate"] == pytest.approx(2 / 6)
    sd = sum(abs(x - y) for x, y in A_SCORES.values()) / math.sqrt(2) / 6
    assert a["within_scenario_sd"] == pytest.approx(sd)
    assert a["repeats"]["n_flipped"] == 2 and a["repeats"]["pass_hat_k_scenarios"] == {"1": 6, "2": 6}
    # cand-b: always 50 (fail); one repeat skipped, so that scenario only enters pass^1
    assert b["pass_hat_k"] == {"1": 0.0, "2": 0.0}
    assert b["repeats"]["pass_hat_k_scenarios"] == {"1": 6, "2": 5}
    assert b["verdict_flip_rate"] == 0.0 and b["within_scenario_sd"] == 0.0

    sim = data["runs"][0]["simulator"]
    assert sim["episodes"] == 24 and sim["caller_turns"] == 23
    assert sim["caller_rejections"] == {"invalid_json": 1, "leak": 1}
    assert sim["caller_turns_with_rejections"] == 1
    assert sim["conversation_reruns"] == 1 and sim["episodes_rerun"] == 1
    assert sim["skipped"] == {"caller validation failed 3 times": 1}
    assert sim["channel"] == {
        "applied": 23,
        "not_applied": 0,
        "authored_applied": 23,
        "authored_not_applied": 0,
        "never_reached": 1,
        "seeded_applied": 0,
        "seeded_not_applied": 0,
    }
    assert sim["judge_errors"] == 1 and sim["judge_errors_by_source"] == {"task_criterion": 1}
    assert sim["candidates_differ"] is True
    ba, bb = sim["by_candidate"]["cand-a"], sim["by_candidate"]["cand-b"]
    assert ba["caller_rejections"] == {"invalid_json": 1, "leak": 1} and bb["caller_rejections"] == {}
    assert ba["skipped"] == {} and bb["skipped"] == {"caller validation failed 3 times": 1}
    assert ba["channel"]["authored_applied"] == 12 and bb["channel"]["authored_applied"] == 11

    # slices: one agent per language (LANGS by agent), three scenarios per difficulty
    assert "1 agent" in a["by_language"]["en"]["warning"]
    assert "3 scenarios" in a["by_difficulty"]["medium"]["warning"]
    assert a["by_difficulty"]["medium"]["warning"].startswith("only 3 scenarios (")  # three agents there
    assert a["overall"]["warning"] is None  # not a slice


def test_two_repeat_report_terminal_and_html(two_repeat_run: Path) -> None:
    res = CliRunner().invoke(
        app, ["report", str(two_repeat_run), "--no-html", "--samples", "50"], env={"COLUMNS": "250"}
    )
    assert res.exit_code == 0, res.output
    out = res.output
    assert "Reliability over repeats" in out
    assert "0.500 (n=6)" in out and "0.333 (n=6)" in out  # cand-a pass^1, pass^2
    assert "33.3% (2/6)" in out  # cand-a verdict flips
    assert "0.000 (n=5)" in out  # cand-b pass^2 over five scenarios
    assert "Simulator and channel ledger" in out
    assert "invalid_json 1, leak 1" in out
    assert "23 / 0 / 1" in out and "12 / 0 / 1" in out and "11 / 0 / 0" in out
    assert "! en: only 1 agent" in out

    runs = load_runs([two_repeat_run])
    html = render_html(build_report(runs, n_samples=50), runs)
    assert 'id="repeats"' in html and "pass^2" in html
    assert "33.3%" in html and "2 of 6" in html
    assert 'id="simulator-ledger"' in html and "invalid_json 1, leak 1" in html
    assert html.count("slice-warning") >= 3


def test_single_repeat_shows_no_repeat_figures(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run(repeats=1)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["report", str(rd), "--json", str(out), "--no-html", "--samples", "20"])
    assert res.exit_code == 0, res.output
    assert "Reliability over repeats" not in res.output and "pass^" not in res.output
    for c in json.loads(out.read_text())["candidates"]:
        assert c["pass_hat_k"] is None and c["verdict_flip_rate"] is None and c["within_scenario_sd"] is None
    runs = load_runs([rd])
    assert 'id="repeats"' not in render_html(build_report(runs, n_samples=20), runs, include_traces=False)


def test_ledger_rows_collapse_when_candidates_agree(make_run: MakeRun) -> None:
    runs = load_runs([make_run(repeats=1)])
    sim = build_report(runs, n_samples=20).runs[0].simulator
    assert sim is not None and sim.candidates_differ is False
    assert sim.by_candidate["cand-a"] == sim.by_candidate["cand-b"]
    assert sim.episodes == 12 and sim.n_rejections == 0 and sim.judge_errors == 0


def test_slice_with_enough_agents_and_scenarios_has_no_warning(make_run: MakeRun) -> None:
    # agents 0 and 3 are both "en"; ten scenarios each
    runs = load_runs([make_run(candidates=("cand-a",), agents=4, scenarios=10, repeats=1)])
    c = build_report(runs, n_samples=20).candidates[0]
    assert c.by_language["en"].n_agents == 2 and c.by_language["en"].n_scenarios == 20
    assert c.by_language["en"].warning is None
    assert c.by_language["hi"].warning is not None and "1 agent" in c.by_language["hi"].warning
    assert c.by_language["hi"].warning.startswith("only 1 agent (")  # ten scenarios is enough


def test_caller_ended_early_is_counted_per_candidate(make_run: MakeRun) -> None:
    rd = make_run(repeats=1)
    ended = ["cand-a__ag0__sc0__r0", "cand-a__ag1__sc1__r0"]
    for eid in ended:
        tpath = rd / "traces" / f"{eid}.json"
        t = load_trace(tpath)
        t.end_reason = EndReason.CALLER_DONE_EARLY
        save_trace(t, tpath)
    runs = load_runs([rd])
    report = build_report(runs, n_samples=20)
    sim = report.runs[0].simulator
    assert sim is not None and sim.caller_done_early == 2 and sim.candidates_differ is True
    assert sim.by_candidate["cand-a"].caller_done_early == 2
    assert sim.by_candidate["cand-b"].caller_done_early == 0
    # still scored as the candidate's calls: same number of scored episodes as before
    assert [c.n_scored for c in report.candidates] == [6, 6]
    html = render_html(report, runs, include_traces=False)
    assert "caller ended early" in html
