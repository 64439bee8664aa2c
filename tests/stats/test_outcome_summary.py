"""Outcome success, pass under the default rule, and pass^k on the outcome, recomputed by hand."""

from __future__ import annotations

import pytest

from callbench.grade.models import EpisodeGrade
from callbench.stats.summary import EpisodeRecord, summarize_candidate


def rec(eid: str, scen: str, repeat: int, overall: float, met: bool | None, *, cut: bool = False,
        rule: str = "outcome_and_overall") -> EpisodeRecord:
    g = EpisodeGrade(
        episode_id=eid, grade_set_id="g", trace_sha256="x", agent_id="a", scenario_id=scen,
        language="en", difficulty="medium", repeat=repeat, candidate="C", end_reason="caller_done",
        task_score=overall, conversation_score=overall, overall=overall, outcome_met=met, cut=cut,
        pass_rule=rule,  # type: ignore[arg-type]
    )
    return EpisodeRecord(run_id="r", episode_id=eid, candidate="C", agent_id="a", scenario_id=scen,
                         repeat=repeat, status="scored", grade=g)


def test_outcome_success_pass_and_pass_hat_k() -> None:
    records = [
        # s1: outcome met twice, both above the cutoff
        rec("1", "s1", 0, 90, True), rec("2", "s1", 1, 80, True),
        # s2: one wrong outcome with good marks (no pass), one met
        rec("3", "s2", 0, 85, False), rec("4", "s2", 1, 75, True),
        # s3: no outcome defined (passes on overall alone) and a call cut by the cap
        rec("5", "s3", 0, 72, None), rec("6", "s3", 1, 10, None, cut=True),
    ]
    s = summarize_candidate("C", records, seed=1, n_samples=200)
    # outcome: 3 of the 4 episodes with an outcome (the cut call and s3's undefined one left out)
    assert s.outcome_success.n_episodes == 4
    # the point estimate is the mean over episodes (stats/bootstrap.py): 3 of 4
    assert s.outcome_success.estimate == pytest.approx(75.0)
    assert (s.n_cut, s.n_no_outcome, s.pass_rules) == (1, 1, ["outcome_and_overall"])
    # pass: s1 2/2, s2 1/2, s3 1/1 (the cut call has no verdict): 4 of 5
    assert s.pass_rate.n_episodes == 5 and s.pass_rate.estimate == pytest.approx(80.0)
    # pass^2 on the outcome: s1 C(2,2)/C(2,2) = 1, s2 C(1,2)/C(2,2) = 0 -> 0.5 over 2 scenarios
    assert s.outcome_pass_hat_k == {"1": pytest.approx(0.75), "2": pytest.approx(0.5)}
    assert s.outcome_pass_hat_k_scenarios == {"1": 2, "2": 2}
    # pass^2 on the verdict: s1 1, s2 0; s3 has one verdict only -> pass^1 (1 + 0.5 + 1) / 3
    assert s.pass_hat_k == {"1": pytest.approx(2.5 / 3), "2": pytest.approx(0.5)}


def test_paper_rule_grades_pass_on_overall_alone() -> None:
    records = [rec("1", "s1", 0, 85, False, rule="overall"), rec("2", "s2", 0, 60, True, rule="overall")]
    s = summarize_candidate("C", records, seed=1, n_samples=50)
    assert s.pass_rate.estimate == pytest.approx(50.0) and s.pass_rules == ["overall"]
