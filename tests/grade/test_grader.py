"""Grading run folders: new grade sets, regrades, provenance, refusals, and the CLI command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.grade.grader import (
    GradeError,
    create_grade_set,
    finalize_grade_set,
    grade_into_set,
    grade_run,
    grade_set_id_for,
    load_episode_grades,
    load_grade_set,
    run_cutoff,
)
from callbench.grade.models import Label
from callbench.grade.rubric import DEFAULT_RUBRIC, load_rubric
from callbench.models.base import ModelSettings
from callbench.models.scripted.judge import create_scripted_judge
from callbench.runfolder.manifest import RunManifest
from callbench.trace import RoleInfo, save_trace


def make_run(root: Path, bundle, traces, judge: str = "scripted:met") -> Path:
    run = root / "run"
    (run / "traces").mkdir(parents=True)
    for t in traces:
        save_trace(t, run / "traces" / f"{t.episode_id}.json")
    m = RunManifest(
        run_id="run",
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        bundle_path=bundle.root,
        callbench_version="0.1.0",
        candidates=[RoleInfo(spec="scripted:reference")],
        caller=RoleInfo(spec="scripted:plan"),
        task_judge=RoleInfo(spec=judge),
        conversation_judge=RoleInfo(spec=judge),
        seed=1,
        repeats=1,
        started="2026-01-01T00:00:00+00:00",
    )
    (run / "manifest.json").write_text(m.model_dump_json(indent=1))
    return run


@pytest.fixture
def run_dir(tmp_path, make_trace, bundle):
    return make_run(
        tmp_path,
        bundle,
        [make_trace("good", "ep-good"), make_trace("hangup", "ep-hangup"), make_trace("skipped", "ep-skip")],
    )


def _manifest(run: Path) -> RunManifest:
    return RunManifest.model_validate_json((run / "manifest.json").read_text())


async def test_grade_run_writes_a_grade_set(run_dir, bundle):
    seen = []
    gid = await grade_run(run_dir, on_episode=seen.append)  # judges recorded in the manifest: scripted:met
    assert gid.startswith("gs001-")
    assert _manifest(run_dir).grade_sets == [gid]
    gs = load_grade_set(run_dir, gid)
    assert (gs.episodes, gs.skipped, gs.judge_errors) == (3, 1, 0)
    assert gs.task_judge.spec == "scripted:met" and gs.conversation_judge.spec == "scripted:met"
    assert gs.bundle_hash == bundle.content_hash and gs.run_id == "run" and gs.finished
    assert gs.rubric["ratings"][0]["anchors"]["1"].startswith("Asks again")
    grades = {g.episode_id: g for g in load_episode_grades(run_dir, gid)}
    assert sorted(grades) == sorted(g.episode_id for g in seen) == ["ep-good", "ep-hangup", "ep-skip"]
    assert grades["ep-skip"].skipped and grades["ep-skip"].overall is None
    assert grades["ep-good"].task_score == 100.0 and grades["ep-good"].overall == 100.0
    # hangup: see test_scoring.test_hangup_with_met_judge for the arithmetic
    assert grades["ep-hangup"].task_score == pytest.approx(800 / 12)
    assert all(g.grade_set_id == gid for g in grades.values())


async def test_regrade_keeps_earlier_sets_and_scores_are_identical(run_dir):
    first = await grade_run(run_dir)
    second = await grade_run(run_dir)
    other = await grade_run(run_dir, task_judge="scripted:not_met", conversation_judge="scripted:partial")
    assert first != second and first.split("-")[1] == second.split("-")[1]  # same judges: same hash part
    assert first.startswith("gs001-") and second.startswith("gs002-") and other.startswith("gs003-")
    assert other.split("-")[1] != first.split("-")[1]
    assert _manifest(run_dir).grade_sets == [first, second, other]
    assert all((run_dir / "grades" / g / "grade_set.json").is_file() for g in (first, second, other))

    def scores(gid):
        return {
            g.episode_id: (
                g.task_score,
                g.conversation_score,
                g.overall,
                g.passed,
                [(i.id, i.label, i.rating, i.r, i.cited_messages, i.cited_events) for i in g.items],
            )
            for g in load_episode_grades(run_dir, gid)
        }

    assert scores(first) == scores(second)
    assert scores(first) != scores(other)
    assert load_grade_set(run_dir, other).task_judge.spec == "scripted:not_met"
    good = next(g for g in load_episode_grades(run_dir, other) if g.episode_id == "ep-good")
    # task: checks 6 of 6 points + criteria not met (0 of 6) = 6/12 = 50
    assert good.task_score == pytest.approx(50.0)


async def test_every_cited_index_exists_in_its_trace(run_dir):
    from callbench.trace import load_trace

    for spec in ("scripted:met", "scripted:partial"):
        gid = await grade_run(run_dir, task_judge=spec, conversation_judge=spec)
        for g in load_episode_grades(run_dir, gid):
            trace = load_trace(run_dir / "traces" / f"{g.episode_id}.json")
            assert g.trace_sha256 == trace.sha256()
            msgs = {m.index for m in trace.messages}
            events = {e.index for e in trace.tool_events}
            for item in g.items:
                assert set(item.cited_messages) <= msgs, (g.episode_id, item.id)
                assert set(item.cited_events) <= events, (g.episode_id, item.id)
                for e in item.cited_events:
                    assert trace.tool_events[e].message_index in item.cited_messages


async def test_bundle_hash_mismatch_is_refused(tmp_path, make_trace, bundle, run_dir):
    t = make_trace("good", "ep-other")
    t.bundle_hash = "f" * 64
    save_trace(t, run_dir / "traces" / "ep-other.json")
    with pytest.raises(GradeError, match=r"ep-other.*bundle hash ffffffffffff"):
        await grade_run(run_dir)
    assert not (run_dir / "grades").exists()  # refused before any grade set was created
    (run_dir / "traces" / "ep-other.json").unlink()
    changed = Path(bundle.root) / "agents" / "dairy" / "prompt.md"
    changed.write_text(changed.read_text() + "\nOne more rule.\n")
    with pytest.raises(GradeError, match="grade it with the bundle it was run on"):
        await grade_run(run_dir)


async def test_not_a_run_folder(tmp_path):
    with pytest.raises(GradeError, match=r"no manifest\.json"):
        await grade_run(tmp_path)


async def test_injected_clients_are_recorded(run_dir, recording):
    gid = await grade_run(
        run_dir,
        task_judge=create_scripted_judge("scripted:met", ModelSettings(temperature=0.0)),
        conversation_judge=create_scripted_judge("scripted:garbage"),
    )
    gs = load_grade_set(run_dir, gid)
    assert gs.task_judge.settings.temperature == 0.0
    assert gs.conversation_judge.spec == "scripted:garbage"
    # good: polite + 5 ratings; hangup: polite + 4 ratings (memory not applicable)
    assert gs.judge_errors == 6 + 5
    hang = next(g for g in load_episode_grades(run_dir, gid) if g.episode_id == "ep-hangup")
    assert {i.label for i in hang.items if i.pillar == "conversation"} == {
        Label.JUDGE_ERROR,
        Label.NOT_APPLICABLE,
    }


async def test_grade_into_set_for_the_runner(run_dir, make_trace, bundle):
    judge = create_scripted_judge("scripted:met")
    role = RoleInfo(spec="scripted:met")
    gs = create_grade_set(run_dir, role, role, cutoff=90.0, register=False)
    assert _manifest(run_dir).grade_sets == []  # the runner adds the id to its own manifest
    g = await grade_into_set(
        run_dir, gs.grade_set_id, make_trace("hangup", "ep-hangup"), bundle, judge, judge
    )
    assert g.cutoff == 90.0 and g.passed is False  # overall 83.3 < 90
    on_disk = load_episode_grades(run_dir, gs.grade_set_id)
    assert [x.episode_id for x in on_disk] == ["ep-hangup"] and on_disk[0] == g


def test_grade_set_id_is_deterministic():
    a, b = (
        RoleInfo(spec="scripted:met"),
        RoleInfo(spec="openai:gpt-4o", settings=ModelSettings(temperature=0)),
    )
    assert grade_set_id_for(a, b, 70, DEFAULT_RUBRIC, 1) == grade_set_id_for(a, b, 70, DEFAULT_RUBRIC, 1)
    assert grade_set_id_for(a, b, 70, DEFAULT_RUBRIC, 1) != grade_set_id_for(a, b, 75, DEFAULT_RUBRIC, 1)
    assert grade_set_id_for(a, b, 70, DEFAULT_RUBRIC, 1) != grade_set_id_for(b, a, 70, DEFAULT_RUBRIC, 1)
    assert grade_set_id_for(a, b, 70, DEFAULT_RUBRIC, 7).startswith("gs007-")


def test_cli_grade(run_dir, tmp_path):
    rubric = DEFAULT_RUBRIC.model_dump(mode="json", by_alias=True)
    for r in rubric["ratings"]:
        r["weight"] = 3 if r["id"] == "closing" else 1
    rfile = tmp_path / "rubric.json"
    rfile.write_text(json.dumps(rubric))
    assert load_rubric(rfile).ratings[-1].weight == 3
    res = CliRunner().invoke(
        app,
        [
            "grade",
            str(run_dir),
            "--task-judge",
            "scripted:met",
            "--conversation-judge",
            "scripted:not_met",
            "--cutoff",
            "60",
            "--rubric",
            str(rfile),
        ],
    )
    assert res.exit_code == 0, res.output
    gid = _manifest(run_dir).grade_sets[-1]
    assert f"grade set {gid}: 3 episode(s), 1 skipped, 0 not graded, 0 judge error(s)" in res.output
    good = next(g for g in load_episode_grades(run_dir, gid) if g.episode_id == "ep-good")
    # conversation all r = 0 -> 0; task all met -> 100; overall 50 < 60
    assert (good.task_score, good.conversation_score, good.overall, good.passed) == (100.0, 0.0, 50.0, False)
    assert next(i for i in good.items if i.id == "closing").weight == 3
    assert (run_dir / "index.sqlite").is_file()


def test_cli_grade_errors(tmp_path, run_dir):
    res = CliRunner().invoke(app, ["grade", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "no manifest.json" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: x\nratings: [{id: memory, weight: 9}]\n")
    res = CliRunner().invoke(app, ["grade", str(run_dir), "--rubric", str(bad)])
    assert res.exit_code == 2 and "invalid rubric" in res.output and "ratings.0.weight" in res.output


async def test_finalize_reregisters_a_set_a_runner_overwrote(run_dir, make_trace, bundle):
    role = RoleInfo(spec="scripted:met")
    gs = create_grade_set(run_dir, role, role)  # registered on disk...
    stale = _manifest(run_dir)
    stale.grade_sets = []  # ...then a runner saves its in-memory manifest without the id
    (run_dir / "manifest.json").write_text(stale.model_dump_json(indent=1))
    judge = create_scripted_judge("scripted:met")
    await grade_into_set(run_dir, gs.grade_set_id, make_trace("good", "ep-good"), bundle, judge, judge)
    done = finalize_grade_set(run_dir, gs.grade_set_id)
    assert _manifest(run_dir).grade_sets == [gs.grade_set_id]
    assert (done.episodes, done.skipped, done.judge_errors) == (1, 0, 0) and done.finished


def test_regrade_keeps_the_runs_cutoff_unless_given(run_dir):
    """A run made with --cutoff 95 is regraded at 95, not reset to 70."""
    first = CliRunner().invoke(app, ["grade", str(run_dir), "--cutoff", "95"])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(
        app, ["grade", str(run_dir), "--task-judge", "scripted:not_met", "--new-set"]
    )
    assert again.exit_code == 0, again.output
    sets = _manifest(run_dir).grade_sets
    assert len(sets) == 2
    assert [load_grade_set(run_dir, g).cutoff for g in sets] == [95.0, 95.0]
    assert "cutoff 95" in again.output
    given = CliRunner().invoke(app, ["grade", str(run_dir), "--cutoff", "50", "--new-set"])
    assert given.exit_code == 0, given.output
    assert load_grade_set(run_dir, _manifest(run_dir).grade_sets[-1]).cutoff == 50.0
    # with no grade set at all the default pass mark applies
    assert run_cutoff(run_dir, []) == 70.0


@pytest.mark.parametrize(("recorded", "expected"), [(0.0, 0.0), (1.25, 1.25), (None, 0.8)])
async def test_the_grade_set_takes_the_runs_recorded_budget_zero_included(
    run_dir: Path, recorded: float | None, expected: float
) -> None:
    # a run made with --latency-budget 0ms has a budget of 0 s (no turn is within it), as the report
    # reads it; only a run that recorded none gets the default
    m = _manifest(run_dir)
    m.latency_budget_s = recorded
    (run_dir / "manifest.json").write_text(m.model_dump_json(indent=1))
    gid = await grade_run(run_dir, pass_rule="outcome_overall_latency")
    assert load_grade_set(run_dir, gid).latency_budget_s == expected
