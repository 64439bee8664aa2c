from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.report.model.load import ReportInputError, load_run, load_runs

MakeRun = Callable[..., Path]


def test_load_builds_records_with_statuses(make_run: MakeRun) -> None:
    rd = make_run(
        skip=lambda c, a, s, r: (c, a, s, r) == ("cand-a", 0, 0, 0),
        not_run=lambda c, a, s, r: (c, a, s, r) == ("cand-b", 2, 1, 1),
    )
    run = load_run(rd)
    assert run.grade_set.grade_set_id == "gs1"
    by_status: dict[str, int] = {}
    for r in run.records:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    assert by_status == {"scored": 22, "skipped": 1, "not_run": 1}
    skipped = next(r for r in run.records if r.status == "skipped")
    assert skipped.skip_reason == "caller validation failed 3 times"
    assert skipped.grade is None and skipped.usage["candidate"].input_tokens == 100
    scored = next(r for r in run.records if r.episode_id == "cand-a__ag1__sc0__r1")
    assert (scored.language, scored.difficulty, scored.repeat) == ("hi", "medium", 1)
    assert scored.grade is not None and scored.grade.overall == pytest.approx(71.0)
    assert run.warnings == []


def test_ungraded_trace_and_stale_grade(make_run: MakeRun) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=2, candidates=("c",))
    (rd / "grades" / "gs1" / "episodes" / "c__ag0__sc0__r1.json").unlink()
    gpath = rd / "grades" / "gs1" / "episodes" / "c__ag0__sc0__r0.json"
    data = json.loads(gpath.read_text())
    data["trace_sha256"] = "0" * 64
    gpath.write_text(json.dumps(data))
    run = load_run(rd)
    assert [r.status for r in run.records] == ["scored", "ungraded"]
    assert len(run.warnings) == 1 and "trace_sha256 mismatch" in run.warnings[0]


def test_non_canonical_trace_file_with_matching_grade_is_not_stale(make_run: MakeRun) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1, candidates=("c",))
    path = rd / "traces" / "c__ag0__sc0__r0.json"
    path.write_text(json.dumps(json.loads(path.read_text())))  # same trace, compact JSON
    run = load_run(rd)
    assert run.warnings == [] and run.records[0].status == "scored"


def test_temp_files_of_interrupted_writes_are_ignored(make_run: MakeRun) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1, candidates=("c",))
    (rd / "traces" / ".c__ag0__sc0__r0.json.abc.tmp").write_text("{half")
    (rd / "traces" / ".hidden.json").write_text("{half")
    assert len(load_run(rd).records) == 1


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda rd: (rd / "manifest.json").unlink(), r"manifest\.json: missing \(run manifest\)"),
        (lambda rd: (rd / "manifest.json").write_text("{nope"), r"manifest\.json: not valid JSON"),
        (
            lambda rd: (rd / "traces" / "c__ag0__sc0__r0.json").write_text('{"episode_id": 3}'),
            r"c__ag0__sc0__r0\.json: not a valid trace: ",
        ),
        (
            lambda rd: (rd / "grades" / "gs1" / "episodes" / "c__ag0__sc0__r0.json").write_text("[]"),
            r"c__ag0__sc0__r0\.json: not a valid episode grade",
        ),
        (lambda rd: (rd / "grades" / "gs1" / "grade_set.json").unlink(), r"grade_set\.json: missing"),
    ],
)
def test_damaged_inputs_name_the_file(
    make_run: MakeRun, damage: Callable[[Path], object], expected: str
) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1, candidates=("c",))
    damage(rd)
    with pytest.raises(ReportInputError, match=expected):
        load_run(rd)
    result = CliRunner().invoke(app, ["report", str(rd), "--no-html"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "error:" in result.output


def test_grade_set_choice_and_missing_grade_sets(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run(agents=1, scenarios=1, repeats=1, candidates=("c",))
    with pytest.raises(ReportInputError, match="no grade set 'nope'"):
        load_run(rd, "nope")
    assert load_run(rd, "gs1").grade_set.grade_set_id == "gs1"
    m = json.loads((rd / "manifest.json").read_text())
    m["grade_sets"] = []
    (rd / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ReportInputError, match="no grade set yet"):
        load_run(rd)
    with pytest.raises(ReportInputError, match="not a run folder"):
        load_run(tmp_path / "missing")


def test_same_candidate_in_two_runs_is_kept_apart(make_run: MakeRun) -> None:
    r1 = make_run("r1", candidates=("c", "d"), agents=1, scenarios=1, repeats=1)
    r2 = make_run("r2", candidates=("c",), agents=1, scenarios=1, repeats=1)
    runs = load_runs([r1, r2])
    labels = sorted({r.candidate for run in runs for r in run.records})
    assert labels == ["c [r1]", "c [r2]", "d"]
    with pytest.raises(ReportInputError, match="also given"):
        load_runs([r1, r1])
