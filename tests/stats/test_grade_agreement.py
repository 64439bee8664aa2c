"""Pairing two grade sets' items: groups, exclusions and values against an independent kappa."""

from __future__ import annotations

import pytest

from callbench.bundle.models import Diagnostic, Pillar
from callbench.grade.models import EpisodeGrade, GradedItem, Label
from callbench.stats.grade_agreement import grade_set_agreement

from .test_agreement import loop_kappa

CATS = ["met", "partial", "not_met"]


def crit(
    iid: str, label: str, pillar: Pillar = Pillar.TASK, diag: Diagnostic = Diagnostic.GROUNDING
) -> GradedItem:
    src = "task_criterion" if pillar == Pillar.TASK else "conversation_criterion"
    return GradedItem(id=iid, source=src, pillar=pillar, diagnostic=diag, weight=2, label=Label(label))


def rating(iid: str, value: int | None, label: Label | None = None) -> GradedItem:
    return GradedItem(
        id=iid,
        source="rating",
        pillar=Pillar.CONVERSATION,
        diagnostic=Diagnostic.SPEAKABILITY,
        weight=1,
        rating=value,
        label=label,
    )


def eg(eid: str, items: list[GradedItem], gs: str, skipped: bool = False) -> EpisodeGrade:
    return EpisodeGrade(
        episode_id=eid,
        grade_set_id=gs,
        trace_sha256="x",
        agent_id="a",
        scenario_id=eid,
        language="en",
        difficulty="medium",
        repeat=0,
        candidate="c",
        end_reason="caller_done",
        items=[] if skipped else items,
        skipped=skipped,
    )


def test_pairs_groups_and_exclusions() -> None:
    check = GradedItem(
        id="chk",
        source="action_check",
        pillar=Pillar.TASK,
        diagnostic=Diagnostic.TOOL_CHOICE,
        weight=1,
        label=Label.MET,
    )
    a = [
        eg(
            "e1",
            [
                check,
                crit("t1", "met"),
                crit("t2", "partial"),
                crit("c1", "met", Pillar.CONVERSATION, Diagnostic.POLICY_COMPLIANCE),
                rating("r1", 5),
                rating("r2", 3),
            ],
            "A",
        ),
        eg(
            "e2",
            [crit("t1", "not_met"), crit("t2", "met"), crit("t3", "met"), rating("r1", 4), rating("r2", 2)],
            "A",
        ),
        eg("e3", [crit("t1", "met")], "A"),  # only in A
        eg("e4", [crit("t1", "met")], "A", skipped=True),
    ]
    b = [
        eg(
            "e1",
            [
                check,
                crit("t1", "met"),
                crit("t2", "met"),
                crit("c1", "not_met", Pillar.CONVERSATION, Diagnostic.POLICY_COMPLIANCE),
                rating("r1", 4),
                rating("r2", None, Label.NOT_APPLICABLE),
            ],
            "B",
        ),
        eg(
            "e2",
            [
                crit("t1", "not_met"),
                crit("t2", "judge_error"),
                rating("r1", 4),
                rating("r2", 1),
                crit("t9", "met"),
            ],
            "B",
        ),
        eg("e4", [crit("t1", "met")], "B"),
        eg("e5", [crit("t1", "met")], "B"),  # only in B
    ]
    res = grade_set_agreement(a, b, grade_set_a="A", grade_set_b="B", seed=3, n_samples=200)
    ex = res.excluded
    assert (ex.episodes_only_in_a, ex.episodes_only_in_b, ex.episodes_skipped) == (1, 1, 1)
    assert (ex.items_only_in_a, ex.items_only_in_b) == (1, 1)  # e2: t3 only in A, t9 only in B
    assert ex.judge_error == 1 and ex.not_applicable == 1
    # criteria pairs: e1 t1 met/met, t2 partial/met, c1 met/not_met; e2 t1 not_met/not_met
    pa, pb = ["met", "partial", "met", "not_met"], ["met", "met", "not_met", "not_met"]
    ia = [CATS.index(x) for x in pa]
    ib = [CATS.index(x) for x in pb]
    assert res.criteria.n == 4 and res.criteria.n_episodes == 2
    assert res.criteria.percent_agreement == 50.0
    assert res.criteria.kappa == pytest.approx(loop_kappa(ia, ib, 3))
    assert res.criteria.confusion == [[1, 0, 1], [1, 0, 0], [0, 0, 1]]
    # ratings pairs: e1 r1 5/4; e2 r1 4/4, r2 2/1
    assert res.ratings.n == 3 and res.ratings.weights == "quadratic"
    assert res.ratings.weighted_kappa == pytest.approx(loop_kappa([4, 3, 1], [3, 3, 0], 5, "quadratic"))
    # per pillar and diagnostic
    task = res.by_pillar["task"].criteria
    assert task is not None and task.n == 3 and res.by_pillar["task"].ratings is None
    conv = res.by_pillar["conversation"]
    assert (
        conv.criteria is not None
        and conv.criteria.n == 1
        and conv.ratings is not None
        and conv.ratings.n == 3
    )
    pol = res.by_diagnostic["policy_compliance"].criteria
    # one item, met vs not_met: p_o = 0, p_e = 1 * 0 = 0, so kappa = 0
    assert pol is not None and pol.n == 1 and pol.kappa == 0.0 == loop_kappa([0], [2], 3)
    assert set(res.by_diagnostic) == {"grounding", "policy_compliance", "speakability"}
    # seeded: the same call gives the same intervals
    again = grade_set_agreement(a, b, grade_set_a="A", grade_set_b="B", seed=3, n_samples=200)
    assert again.criteria.interval == res.criteria.interval
    assert again.model_dump_json() == res.model_dump_json()


def test_nothing_shared() -> None:
    res = grade_set_agreement(
        [eg("e1", [crit("t1", "met")], "A")], [], grade_set_a="A", grade_set_b="B", seed=0
    )
    assert res.criteria.n == 0 and res.criteria.kappa is None
    assert res.criteria.undefined_reason == "no item graded by both"
    assert res.ratings.weighted_kappa is None and res.by_pillar == {}
    assert res.excluded.episodes_only_in_a == 1
