"""``callbench gate``: thresholds judged on intervals, regression against a baseline judged on the
paired comparison, refusal of runs that are not comparable, and outputs a JUnit library reads.

Runs are synthetic (tests/fakes/synthetic.py): the same starter scenarios, three candidates per
run whose grades are lowered by a known share (none for the first, most for the third), each run
drawn with its own seed. So the first candidate of one run against the first of another differs by
nothing, the third against the first is worse by about 17 points, and the third against the third
differs by noise."""

from __future__ import annotations

import json
from pathlib import Path

import junitparser
import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runs.gate import Threshold, judge_threshold, parse_threshold
from fakes.synthetic import synthetic_runs

BEST, WORST = "scripted_reference-8ce276aa", "scripted_reference-f6640a4e"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("gate")
    mod = synthetic_runs()
    base = mod.make_synthetic_run(root / "base", 60, seed=0, candidates=3)
    run = mod.make_synthetic_run(root / "run", 60, seed=1, candidates=3)
    return Path(run), Path(base)


def _gate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["gate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_a_regression_beyond_the_allowed_drop_fails(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run, base = runs
    code, out = _gate(str(run), "--baseline", str(base), "--pair", f"{WORST}={BEST}", "--samples", "500",
                      "--json", str(tmp_path / "g.json"))
    assert code == 1, out
    gate = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))["gate"]
    [comp] = gate["comparisons"]
    assert comp["n_scenarios"] == 20 and comp["high"] < -5.0 and comp["mean_difference"] < -10.0
    [decision] = gate["decisions"]
    assert decision["status"] == "failed" and "entirely below -5" in decision["detail"]


def test_a_difference_within_noise_passes(runs: tuple[Path, Path]) -> None:
    run, base = runs
    code, out = _gate(str(run), "--baseline", str(base), "--samples", "500")
    assert code == 0, out
    # the worst candidate against itself in another draw: its point estimate moves, its interval
    # reaches far above -5
    line = next(ln for ln in out.splitlines() if "no regression" in ln and WORST in ln)
    assert "✅" in line and "not entirely below -5" in line
    # a drop allowed of 25 points passes even the worst against the best
    code, out = _gate(str(run), "--baseline", str(base), "--pair", f"{WORST}={BEST}", "--max-drop", "25",
                      "--samples", "500")
    assert code == 0, out


def test_thresholds_are_judged_on_the_interval() -> None:
    entry = {"overall": {"estimate": 72.0, "low": 66.0, "high": 78.0}, "pass_hat_k": {"2": 0.4},
             "diagnostics": {"grounding": {"score": 55.0}}}
    t = parse_threshold("overall=75", "min")
    assert judge_threshold("c", entry, t, strict=False).status == "passed"  # upper bound 78 >= 75
    assert judge_threshold("c", entry, t, strict=True).status == "failed"  # lower bound 66 < 75
    assert judge_threshold("c", entry, parse_threshold("overall=80", "min"), False).status == "failed"
    assert judge_threshold("c", entry, parse_threshold("pass_hat_k.2=0.5", "min"), False).status == "failed"
    grounding = parse_threshold("diagnostics.grounding=50", "min")
    assert judge_threshold("c", entry, grounding, False).status == "passed"
    latency = {"latency": {"ttfw_p90_ms": {"estimate": 900.0, "low": 700.0, "high": 1300.0}}}
    cap = Threshold(path="latency.ttfw_p90_ms", kind="max", value=1000.0)
    assert judge_threshold("c", latency, cap, strict=False).status == "passed"  # lower bound 700
    assert judge_threshold("c", latency, cap, strict=True).status == "failed"  # upper bound 1300
    missing = judge_threshold("c", entry, parse_threshold("outcome_success=50", "min"), False)
    assert missing.status == "skipped" and "no such figure" in missing.detail
    with pytest.raises(ValueError, match="expected FIELD=NUMBER"):
        parse_threshold("overall>70", "min")


def test_junit_is_read_by_a_junit_library(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run, _ = runs
    xml, md = tmp_path / "out" / "gate.xml", tmp_path / "out" / "gate.md"
    code, out = _gate(str(run), "--min", "overall=90", "--min", "outcome_success=50", "--min",
                      "not_in_this_report=1", "--samples", "300",
                      "--junit", str(xml), "--markdown", str(md))
    assert code == 1, out  # the worst candidate's whole interval is under 90
    doc = junitparser.JUnitXml.fromfile(str(xml))
    suites = {s.name: s for s in doc}
    scen, gate = suites["callbench scenarios"], suites["callbench gate"]
    cases = list(scen)
    assert len(cases) == 60 and scen.tests == 60  # 20 scenarios x 3 candidates
    failed = [c for c in cases if c.result and isinstance(c.result[0], junitparser.Failure)]
    assert failed and all(c.classname != BEST for c in failed)  # the unlowered candidate passes all
    text = failed[0].result[0].text
    assert "repeat" in text and "overall" in text and ("[not_met" in text or "[partial" in text)
    gate_cases = {(c.classname, c.name): c for c in gate}
    worst = gate_cases[(f"gate.{WORST}", "overall >= 90")]
    assert isinstance(worst.result[0], junitparser.Failure) and "upper bound" in worst.result[0].message
    assert gate_cases[(f"gate.{BEST}", "overall >= 90")].is_passed
    # the report has outcome success (judged on its interval); a field it lacks is skipped
    assert not any(isinstance(r, junitparser.Skipped)
                   for r in gate_cases[(f"gate.{BEST}", "outcome_success >= 50")].result)
    assert isinstance(gate_cases[(f"gate.{BEST}", "not_in_this_report >= 1")].result[0], junitparser.Skipped)
    summary = md.read_text(encoding="utf-8")
    assert summary.startswith("## callbench gate: FAILED") and "| ❌ | overall >= 90 |" in summary


def test_runs_that_differ_are_refused_unless_allowed(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run, base = runs
    manifest = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
    other = tmp_path / "other"
    import shutil

    shutil.copytree(base, other)
    manifest["repeats"] = 2
    manifest["bundle_hash"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, out = _gate(str(run), "--baseline", str(other), "--samples", "300")
    assert code == 3, out
    assert "bundle hash:" in out and "repeats: 1 in the run, 2 in the baseline" in out
    assert "--allow-different" in out
    code, out = _gate(str(run), "--baseline", str(other), "--allow-different", "--samples", "300")
    assert code == 0 and "Differences from the baseline:" in out


def test_bad_input_exits_2(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    code, out = _gate(str(tmp_path / "nothing"))
    assert code == 2 and "error:" in out
    code, out = _gate(str(runs[0]), "--min", "overall")
    assert code == 2 and "expected FIELD=NUMBER" in out
    code, out = _gate(str(runs[0]), "--baseline", str(runs[1]), "--pair", "nobody=else")
    assert code == 2 and "--pair nobody=else" in out
