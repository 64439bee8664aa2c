"""Judge validation in the report: a grade set whose judges have no passing
validation is not official and says so beside every judged figure (terminal, HTML, JSON); the
floor agents' scores with the run's judges; where each candidate's overall score comes from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.audit.store import (
    ClassSplit,
    FloorScore,
    Gate,
    JudgeAccuracy,
    JudgeAudit,
    Rate,
    save_judge_audit,
)
from callbench.bundle.models import Diagnostic, Pillar
from callbench.cli import app
from callbench.grade.models import EpisodeGrade, GradedItem, Label
from callbench.trace import RoleInfo

MakeRun = Callable[..., Path]
JUDGED_TITLES = ("Leaderboard", "Pillars", "Diagnostics", "Paired comparisons", "Overall by language")


def _audit(ba: float, passed: bool, *, null_met: float = 0.0, scenarios: int = 4) -> JudgeAudit:
    """A saved validation of the synthetic runs' judges (scripted:judge, bundle hash b*64, no
    prompt version), both judges with balanced accuracy ``ba``."""
    reasons = [] if passed else [f"balanced accuracy {ba:.2f} < 0.80"]
    acc = {
        role: JudgeAccuracy(
            role=role,
            judge=RoleInfo(spec="scripted:judge"),
            balanced_accuracy=ba,
            classes=ClassSplit(balanced_accuracy=ba),
            null_met=Rate(k=0, n=10, value=null_met),
            gate=Gate(passed=passed, reasons=reasons),
        )
        for role in ("task_judge", "conversation_judge")
    }
    return JudgeAudit(
        bundle_name="synthetic",
        bundle_version="1",
        bundle_hash="b" * 64,
        created="2026-12-03T10:00:00+00:00",
        episodes=24,
        scenario_ids=[f"sc{i}" for i in range(scenarios)],
        scenarios_in_bundle=4,
        judges=acc,  # type: ignore[arg-type]
        floor_scores={"scripted:hangup": FloorScore(episodes=4, overall=12.5, task=25.0, conversation=0.0)},
    )


def _report(run_dir: Path, tmp_path: Path) -> tuple[str, dict, str]:  # type: ignore[type-arg]
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    res = CliRunner().invoke(
        app,
        ["report", str(run_dir), "--json", str(out), "--html", str(html), "--samples", "50"],
        env={"COLUMNS": "250"},
    )
    assert res.exit_code == 0, res.output
    return res.stdout, json.loads(out.read_text()), html.read_text(encoding="utf-8")


def _title(out: str, title: str) -> str:
    """A terminal table's title, unwrapped: from its first word to the table's top border."""
    start = next(i for i, line in enumerate(out.splitlines()) if line.startswith(title))
    lines = []
    for line in out.splitlines()[start:]:
        if line.lstrip().startswith(("┏", "┌")) or (lines and line.startswith(("  a ", "  b "))):
            break
        lines.append(line)
    return " ".join(" ".join(lines).split())


def _section(html: str, anchor: str) -> str:
    return html.split(f'id="{anchor}"', 1)[1].split("<h2", 1)[0]


def test_unvalidated_judges_are_named_beside_every_judged_figure(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run()
    out, data, html = _report(rd, tmp_path)
    gs = data["grade_sets"][0]
    assert gs["grade_set_id"] == "gs1" and gs["cutoff"] == 70.0 and gs["official"] is False
    assert gs["judge_validation"]["status"] == "not_validated"
    assert gs["judge_validation"]["text"] == "judges not validated"
    assert data["judged_status"] == "judges not validated"
    # terminal: every judged table's title carries it
    for title in JUDGED_TITLES:
        assert "judges not validated" in _title(out, title), title
    assert "grade set gs1 (cutoff 70; judges not validated; grade set not official)" in out
    # HTML: beside the leaderboard and the other judged sections
    for anchor in ("leaderboard", "paired", "language-difficulty", "diagnostics"):
        assert "judges not validated" in _section(html, anchor), anchor
    assert "not official" in _section(html, "runs")


def test_failed_validation_states_the_balanced_accuracy(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run()
    save_judge_audit(_audit(0.31, False), rd / "judge_audits" / "v.json")
    out, data, html = _report(rd, tmp_path)
    v = data["grade_sets"][0]["judge_validation"]
    assert v["status"] == "failed"
    assert v["text"] == "judges failed validation: balanced accuracy 0.31"
    assert v["judges"]["task_judge"]["balanced_accuracy"] == 0.31
    assert data["grade_sets"][0]["official"] is False
    for title in JUDGED_TITLES:
        assert "judges failed validation: balanced accuracy 0.31" in _title(out, title), title
    assert "judges failed validation: balanced accuracy 0.31" in _section(html, "leaderboard")
    # the floor agents' score with these same judges comes with the matching validation
    assert v["floor_scores"]["scripted:hangup"]["overall"] == 12.5
    assert "scripted:hangup 12.5 (4 calls)" in out


def test_a_validation_of_other_judges_or_prompts_does_not_count(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run()
    other = _audit(0.95, True)
    other.prompt_version = "another-prompt-version"
    save_judge_audit(other, rd / "judge_audits" / "v.json")
    _, data, _ = _report(rd, tmp_path)
    assert data["grade_sets"][0]["judge_validation"]["status"] == "not_validated"


def test_passing_validation_makes_an_official_run_official(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run()
    manifest = json.loads((rd / "manifest.json").read_text())
    manifest["official"] = True
    (rd / "manifest.json").write_text(json.dumps(manifest))
    save_judge_audit(_audit(0.92, True, scenarios=4), rd / "judge_audits" / "v.json")
    out, data, html = _report(rd, tmp_path)
    gs = data["grade_sets"][0]
    assert gs["judge_validation"]["status"] == "validated" and gs["official"] is True
    text = "judges validated: balanced accuracy 0.92 (task), 0.92 (conversation)"
    assert gs["judge_validation"]["text"] == text
    assert data["judged_status"] == ""
    assert "judges not validated" not in out and "failed validation" not in out
    assert 'class="judge-status' not in html


def test_score_sources_split_the_overall_score(make_run: MakeRun, tmp_path: Path) -> None:
    rd = make_run(repeats=1)
    out, data, html = _report(rd, tmp_path)
    src = data["candidates"][0]["score_sources"]
    # every synthetic call: task = one action check (w 2, met); conversation = one rating 4 (w 1):
    # each pillar is half the overall score; 100 * 0.5 * 1 = 50 points, 100 * 0.5 * 0.75 = 37.5
    assert src["action_checks"]["weight_share"] == pytest.approx(0.5)
    assert src["action_checks"]["points"] == pytest.approx(50.0)
    assert src["conversation_judge"]["points"] == pytest.approx(37.5)
    assert src["task_judge"]["weight_share"] == 0.0
    assert src["action_checks"]["share_of_points"] == pytest.approx(50 / 87.5)
    assert "50.0% (50.0 pts)" in out and "50.0% (37.5 pts)" in out
    assert "50.0% (50.0 pts)" in _section(html, "judge-validation")


def test_episode_sources_with_all_three_sources() -> None:
    from callbench.stats.sources import episode_sources

    def item(i: str, source: str, pillar: Pillar, w: int, label: Label | None, rating: int | None = None):  # type: ignore[no-untyped-def]
        return GradedItem(id=i, source=source, pillar=pillar, diagnostic=Diagnostic.GROUNDING, weight=w,  # type: ignore[arg-type]
                          label=label, rating=rating)

    items = [
        item("c1", "action_check", Pillar.TASK, 1, Label.MET),
        item("c2", "task_criterion", Pillar.TASK, 3, Label.PARTIAL),
        item("c3", "task_criterion", Pillar.TASK, 2, Label.NOT_APPLICABLE),  # enters neither sum
        item("r1", "rating", Pillar.CONVERSATION, 1, None, rating=5),
        item("r2", "conversation_criterion", Pillar.CONVERSATION, 1, Label.NOT_MET),
    ]
    g = EpisodeGrade(episode_id="e", grade_set_id="g", trace_sha256="x", agent_id="a", scenario_id="s",
                     language="en", difficulty="medium", repeat=0, candidate="c", end_reason="call_ended",
                     items=items, overall=50.0)
    src = episode_sources(g)
    assert src is not None
    # task: W=4 (1 + 3); conversation: W=2; two pillars -> each item's share is w / W / 2
    assert src["action_checks"] == pytest.approx((1 / 4 / 2, 100 * 1 / 4 / 2))
    assert src["task_judge"] == pytest.approx((3 / 4 / 2, 100 * 1.5 / 4 / 2))
    assert src["conversation_judge"] == pytest.approx((2 / 2 / 2, 100 * 1 / 2 / 2))
    assert sum(x[0] for x in src.values()) == pytest.approx(1.0)
