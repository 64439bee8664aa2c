"""Scores against hand-computed episodes (the arithmetic is written out in each test)."""

from __future__ import annotations

import math

import pytest

from callbench.bundle.models import Diagnostic, Pillar
from callbench.grade.grader import grade_trace
from callbench.grade.models import GradedItem, Label
from callbench.grade.scoring import episode_grade, item_value, score_items
from callbench.models.scripted.judge import create_scripted_judge

TASK_REPLY = {
    "criteria": {
        "records_zero": {"reason": "recorded but reason vague", "cited_messages": [5, 6], "label": "partial"},
        "no_pressure": {"reason": "pushed once", "cited_messages": [7], "label": "not_met"},
        "grounded": {"reason": "no claims", "cited_messages": [], "label": "not_applicable"},
    }
}
CONV_REPLY = {
    "criteria": {"polite": {"reason": "kind", "cited_messages": [7], "label": "met"}},
    "ratings": {
        "memory": {"reason": "", "cited_messages": [7], "rating": 4},
        "speech_around_tools": {"reason": "", "cited_messages": [3], "rating": 3},
        "speakability": {"reason": "", "cited_messages": [], "rating": 5},
        "language_and_script": {"reason": "", "cited_messages": [1], "rating": 1},
        "closing": {"reason": "", "cited_messages": [9], "rating": 2},
    },
}


async def test_hand_computed_episode(make_trace, bundle, recording):
    trace = make_trace("good")
    judge = recording({"task_judge": [TASK_REPLY], "conversation_judge": [CONV_REPLY]})
    g = await grade_trace(trace, bundle, judge, judge, cutoff=70)
    # Task pillar: checks lookup_farmer w1 met (1), log_reason w3 met (1), no_pickup w2 met (1);
    # criteria records_zero w3 partial (0.5), no_pressure w2 not met (0), grounded w1 not applicable.
    # points = 1*1 + 3*1 + 2*1 + 3*0.5 + 2*0 = 7.5 ; weight = 1+3+2+3+2 = 11 ; score = 750/11
    assert g.task.points == pytest.approx(7.5)
    assert g.task.weight == 11
    assert g.task.items == 5
    assert g.task_score == pytest.approx(750 / 11)  # 68.18...
    # Conversation: polite w2 met -> 2; memory w2 g4 -> 2*0.75 = 1.5; speech_around_tools w2 g3 -> 1;
    # speakability w2 g5 -> 2; language_and_script w2 g1 -> 0; closing w1 g2 -> 0.25.
    # points = 6.75 ; weight = 2+2+2+2+2+1 = 11 ; score = 675/11
    assert g.conversation.points == pytest.approx(6.75)
    assert g.conversation.weight == 11
    assert g.conversation_score == pytest.approx(675 / 11)  # 61.36...
    # overall = (750/11 + 675/11) / 2 = 1425/22 = 64.77... < 70
    assert g.overall == pytest.approx(1425 / 22)
    assert g.passed is False
    # Diagnostics: policy_compliance = no_pickup (2 of 2) + no_pressure (0 of 2) = 2/4 = 50;
    # channel_and_closing = polite (2 of 2) + closing (0.25 of 1) = 2.25/3 = 75; grounding: only N/A -> None.
    d = g.diagnostics
    assert set(d) == set(Diagnostic)
    assert (d[Diagnostic.POLICY_COMPLIANCE].points, d[Diagnostic.POLICY_COMPLIANCE].weight) == (2.0, 4.0)
    assert d[Diagnostic.POLICY_COMPLIANCE].score == pytest.approx(50.0)
    assert d[Diagnostic.CHANNEL_AND_CLOSING].score == pytest.approx(75.0)
    assert d[Diagnostic.GROUNDING].score is None and d[Diagnostic.GROUNDING].weight == 0
    assert d[Diagnostic.OUTCOME_REACHED].score == pytest.approx(50.0)  # 1.5 of 3
    assert d[Diagnostic.LANGUAGE_AND_SCRIPT].score == 0.0
    assert d[Diagnostic.MEMORY].score == pytest.approx(75.0)
    # every item maps to exactly one diagnostic: diagnostic weights sum to the pillar weights
    assert sum(t.weight for t in d.values()) == g.task.weight + g.conversation.weight
    assert sum(t.points for t in d.values()) == pytest.approx(g.task.points + g.conversation.points)
    by_id = {(i.source, i.id): i for i in g.items}
    assert by_id[("rating", "closing")].r == 0.25
    assert by_id[("task_criterion", "grounded")].r is None
    assert g.judge_errors == 0


async def test_cutoff_is_configurable(make_trace, bundle, recording):
    judge = recording({"task_judge": [TASK_REPLY], "conversation_judge": [CONV_REPLY]})
    g = await grade_trace(make_trace("good"), bundle, judge, judge, cutoff=64.0)
    assert g.overall == pytest.approx(64.7727, abs=1e-3)
    assert g.passed is True and g.cutoff == 64.0


async def test_hangup_with_met_judge(make_trace, bundle):
    judge = create_scripted_judge("scripted:met")
    g = await grade_trace(make_trace("hangup"), bundle, judge, judge)
    # checks: lookup_farmer w1 not met (0), log_reason w3 not met (its 'after' never met), no_pickup w2 met;
    # task criteria all met: 3 + 2 + 1. points = 0 + 0 + 2 + 6 = 8, weight = 1+3+2+3+2+1 = 12 -> 66.67
    assert g.task_score == pytest.approx(800 / 12)
    # conversation: memory not applicable (one caller turn); polite w2, speech w2, speakability w2,
    # language w2, closing w1 all at r = 1 -> 9/9 = 100
    assert g.conversation_score == pytest.approx(100.0)
    assert g.conversation.weight == 9
    mem = next(i for i in g.items if i.id == "memory")
    assert mem.label == Label.NOT_APPLICABLE and mem.r is None
    assert g.overall == pytest.approx((800 / 12 + 100) / 2)


def _item(
    pillar: Pillar,
    w: int,
    label: Label | None = None,
    rating: int | None = None,
    diag: Diagnostic = Diagnostic.TOOL_CHOICE,
    source: str = "task_criterion",
) -> GradedItem:
    return GradedItem(
        id=f"i{w}{label}{rating}",
        source=source,
        pillar=pillar,
        diagnostic=diag,  # type: ignore[arg-type]
        weight=w,
        label=label,
        rating=rating,
    )


@pytest.mark.parametrize(("g", "r"), [(1, 0.0), (2, 0.25), (3, 0.5), (4, 0.75), (5, 1.0)])
def test_rating_maps_to_g_minus_1_over_4(g, r):
    assert item_value(_item(Pillar.CONVERSATION, 2, rating=g, source="rating")) == r


def test_all_not_applicable_pillar_is_none_not_zero(make_trace):
    items = [
        _item(Pillar.TASK, 3, Label.NOT_APPLICABLE),
        _item(Pillar.CONVERSATION, 2, Label.MET, diag=Diagnostic.SPEAKABILITY),
    ]
    g = episode_grade(make_trace("good"), items, grade_set_id="gs")
    assert g.task_score is None and g.task.weight == 0 and g.task.items == 0
    assert g.conversation_score == 100.0
    # overall = mean of the defined pillars only
    assert g.overall == 100.0 and g.passed is True
    # a pillar whose only judged item is a judge error is not graded, not undefined
    errored = episode_grade(make_trace("good"), [*items, _item(Pillar.TASK, 1, Label.JUDGE_ERROR)],
                            grade_set_id="gs")
    assert errored.not_graded and errored.overall is None and errored.judge_errors == 1
    none = episode_grade(make_trace("good"), [_item(Pillar.TASK, 2, Label.NOT_APPLICABLE)], grade_set_id="gs")
    assert none.task_score is None and none.conversation_score is None
    assert none.overall is None and none.passed is None
    for v in (none.task_score, none.conversation_score, none.overall):
        assert v is None or not math.isnan(v)


def test_judge_error_enters_neither_sum(make_trace):
    base = [_item(Pillar.TASK, 2, Label.MET), _item(Pillar.TASK, 1, Label.NOT_MET)]
    with_err = [*base, _item(Pillar.TASK, 3, Label.JUDGE_ERROR)]
    t1, _, _ = score_items(base)
    t2, _, _ = score_items(with_err)
    # 100 * (2*1 + 1*0) / (2+1) = 66.67 with or without the judge error
    assert t1.score == t2.score == pytest.approx(200 / 3)
    assert (t2.points, t2.weight, t2.items) == (2.0, 3.0, 2)


async def test_skipped_trace_has_no_scores(make_trace, bundle, recording):
    judge = recording([{"criteria": {}}])
    g = await grade_trace(make_trace("skipped"), bundle, judge, judge)
    assert g.skipped is True
    assert g.skip_reason == "caller failed validation 3 times"
    assert g.items == [] and g.task_score is None and g.conversation_score is None
    assert g.overall is None and g.passed is None
    assert judge.requests == []  # no judge is asked about a skipped episode


def test_not_graded_when_more_than_half_of_a_pillars_judged_items_errored(make_trace):
    met = [_item(Pillar.CONVERSATION, w, Label.MET, diag=Diagnostic.SPEAKABILITY) for w in (1, 2)]
    err = _item(Pillar.CONVERSATION, 3, Label.JUDGE_ERROR, diag=Diagnostic.SPEAKABILITY)
    err.reason = "judge infrastructure error: openai:j (conversation_judge) failed after 6 attempts"
    checks = [_item(Pillar.TASK, 2, Label.MET, source="action_check")]
    # 1 of 3 judged conversation items errored: graded, the error enters neither sum
    one = episode_grade(make_trace("good"), [*checks, *met, err], grade_set_id="gs")
    assert not one.not_graded and one.conversation_score == 100.0 and one.judge_errors == 1
    # 2 of 3 (more than half): not graded; action checks are not judged items and do not count
    two = episode_grade(make_trace("good"), [*checks, met[0], err, err.model_copy()], grade_set_id="gs")
    assert two.not_graded and two.task_score is None and two.passed is None
    assert two.not_graded_reason is not None
    assert two.not_graded_reason.startswith("judge_outage: conversation: 2 of 3 judged items errored")
