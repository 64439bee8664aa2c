from __future__ import annotations

import pytest

from callbench.bundle.models import Diagnostic
from callbench.grade.models import EpisodeGrade, PointTotals
from callbench.models.base import Usage
from callbench.stats.summary import EpisodeRecord, summarize_candidate, summarize_usage


def grade(
    eid: str,
    task: float | None,
    conv: float | None,
    *,
    judge_errors: int = 0,
    diags: dict[Diagnostic, PointTotals] | None = None,
) -> EpisodeGrade:
    defined = [x for x in (task, conv) if x is not None]
    overall = sum(defined) / len(defined) if defined else None
    return EpisodeGrade(
        episode_id=eid,
        grade_set_id="g",
        trace_sha256="x",
        agent_id="a",
        scenario_id="s",
        language="en",
        difficulty="easy",
        repeat=0,
        candidate="C",
        end_reason="caller_done",
        task_score=task,
        conversation_score=conv,
        overall=overall,
        passed=None,
        judge_errors=judge_errors,
        diagnostics=diags or {},
    )


def rec(
    eid: str,
    agent: str,
    scen: str,
    lang: str,
    diff: str,
    status: str = "scored",
    g: EpisodeGrade | None = None,
    reason: str | None = None,
    usage: dict[str, Usage] | None = None,
) -> EpisodeRecord:
    return EpisodeRecord(
        run_id="r",
        episode_id=eid,
        candidate="C",
        agent_id=agent,
        scenario_id=scen,
        language=lang,
        difficulty=diff,
        status=status,
        grade=g,
        skip_reason=reason,
        usage=usage or {},
    )


def test_summary_counts_scores_splits_and_diagnostics() -> None:
    d1 = {Diagnostic.GROUNDING: PointTotals(points=1.0, weight=1.0, items=1)}  # episode score 100
    d2 = {Diagnostic.GROUNDING: PointTotals(points=0.0, weight=3.0, items=1)}  # episode score 0
    records = [
        rec("e1", "a1", "s1", "en", "medium", g=grade("e1", 80.0, 100.0, diags=d1)),  # overall 90, pass
        rec("e2", "a1", "s2", "hi", "hard", g=grade("e2", 40.0, 60.0, judge_errors=2, diags=d2)),  # 50
        rec("e3", "a2", "s1", "hi", "medium", g=grade("e3", None, 70.0)),  # task undefined, overall 70 pass
        rec("e4", "a2", "s2", "en", "hard", status="skipped", reason="caller failed"),
        rec("e5", "a2", "s3", "en", "hard", status="skipped", reason="caller failed"),
        rec("e6", "a3", "s1", "en", "hard", status="ungraded"),
        rec("e7", "a3", "s2", "", "", status="not_run"),
    ]
    s = summarize_candidate("C", records, seed=3, n_samples=200)
    assert (s.n_planned, s.n_traces, s.n_scored, s.n_skipped, s.n_ungraded, s.n_not_run) == (7, 6, 3, 2, 1, 1)
    assert s.skip_reasons == {"caller failed": 2}
    assert s.judge_errors == 2 and s.episodes_with_judge_errors == 1
    assert s.overall.estimate == pytest.approx((90 + 50 + 70) / 3)
    assert s.overall.n_episodes == 3 and s.overall.n_excluded == 0
    assert s.task.estimate == pytest.approx(60.0) and s.task.n_excluded == 1
    assert s.conversation.estimate == pytest.approx(230 / 3)
    assert s.pass_rate.estimate == pytest.approx(200 / 3)
    assert s.by_language["en"].estimate == 90.0 and s.by_language["hi"].estimate == 60.0
    assert s.by_difficulty["hard"].estimate == 50.0 and s.by_difficulty["medium"].estimate == 80.0
    assert s.by_language_difficulty["hi"]["medium"].estimate == 70.0
    assert "hard" not in s.by_language_difficulty["en"]  # the only en/hard episodes were not scored
    g = s.diagnostics[Diagnostic.GROUNDING]
    assert (g.points, g.weight, g.items) == (1.0, 4.0, 2)
    assert g.score == 25.0  # summed points: 100 * 1 / 4
    assert g.mean_episode_score == 50.0  # mean of 100 and 0
    assert s.diagnostics[Diagnostic.MEMORY].score is None


def test_pass_rate_uses_the_grade_cutoff() -> None:
    g1 = grade("e1", 65.0, 65.0)
    g1.cutoff = 60.0
    s = summarize_candidate("C", [rec("e1", "a", "s", "en", "x", g=g1)], seed=0, n_samples=50)
    assert s.pass_rate.estimate == 100.0
    assert s.cutoffs == [60.0]


def test_wrong_candidate_is_rejected() -> None:
    r = rec("e1", "a", "s", "en", "x", g=grade("e1", 1.0, 1.0))
    with pytest.raises(ValueError, match="belongs to"):
        summarize_candidate("D", [r], seed=0)


def test_usage_sums_by_role_and_unknown_cost_propagates() -> None:
    u1 = {"candidate": Usage(input_tokens=10, output_tokens=5, calls=1, cost_usd=0.5)}
    u2 = {
        "candidate": Usage(input_tokens=1, output_tokens=2, calls=1, cost_usd=0.25),
        "caller": Usage(input_tokens=3, output_tokens=4, calls=2, cost_usd=0.0),
    }
    by_role, cost, tokens = summarize_usage(
        [rec("e1", "a", "s", "en", "x", usage=u1), rec("e2", "a", "s", "en", "x", status="skipped", usage=u2)]
    )
    assert by_role["candidate"].input_tokens == 11 and by_role["candidate"].calls == 2
    assert cost == pytest.approx(0.75)
    assert tokens == 10 + 5 + 1 + 2 + 3 + 4
    u3 = {"caller": Usage(input_tokens=1, cost_usd=None)}
    _, cost, _ = summarize_usage(
        [rec("e1", "a", "s", "en", "x", usage=u1), rec("e3", "a", "s", "en", "x", usage=u3)]
    )
    assert cost is None
