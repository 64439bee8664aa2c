"""The optional pass rule with a latency budget: the call's p90 time to first word."""

from __future__ import annotations

import numpy as np
import pytest

from callbench.grade.models import PASS_RULES
from callbench.grade.scoring import first_word_p90, verdict
from callbench.grade.store import grade_set_id_for
from callbench.trace import EpisodeLatency, RoleInfo, Trace, TurnLatency


def timed(trace: Trace, firsts: list[float | None]) -> Trace:
    turns = [TurnLatency(turn=i, start_s=float(i), time_to_first_word_s=f, completion_s=2.0)
             for i, f in enumerate(firsts)]
    latency = EpisodeLatency(started_at="2026-01-01T00:00:00+00:00", turns=turns)
    return trace.model_copy(update={"latency": latency})


@pytest.fixture
def trace() -> Trace:
    from tests.report.conftest import make_trace

    return make_trace("e1", RoleInfo(spec="c"), RoleInfo(spec="k"), "ag0", "sc0", 0, bundle_hash="b" * 64,
                      lang="en", diff="medium", reply="Booked.", skipped=False, caller_prompt="p")


def test_p90_is_the_inverted_cdf_of_the_turns_that_spoke(trace: Trace) -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 9, 10, 11, 37):
        firsts = [float(x) for x in rng.gamma(3.0, 0.2, n)]
        got = first_word_p90(timed(trace, [*firsts, None]))
        assert got == pytest.approx(float(np.quantile(firsts, 0.9, method="inverted_cdf")))
    assert first_word_p90(trace) is None and first_word_p90(timed(trace, [None])) is None


def test_latency_rule_needs_the_budget_as_well() -> None:
    assert "outcome_overall_latency" in PASS_RULES
    kw = {"cutoff": 70.0, "rule": "outcome_overall_latency", "timed": True, "latency_budget_s": 0.8}
    assert verdict(80.0, True, first_word_p90_s=0.8, **kw) is True  # type: ignore[arg-type]
    assert verdict(80.0, True, first_word_p90_s=0.81, **kw) is False  # type: ignore[arg-type]
    assert verdict(60.0, True, first_word_p90_s=0.2, **kw) is False  # type: ignore[arg-type]
    assert verdict(80.0, False, first_word_p90_s=0.2, **kw) is False  # type: ignore[arg-type]
    assert verdict(80.0, True, first_word_p90_s=None, **kw) is False  # type: ignore[arg-type]  # never spoke
    untimed = {**kw, "timed": False}
    assert verdict(80.0, True, first_word_p90_s=None, **untimed) is None  # type: ignore[arg-type]
    # the default rule ignores latency entirely
    assert verdict(80.0, True, cutoff=70.0, rule="outcome_and_overall", timed=True, first_word_p90_s=9.0,
                   latency_budget_s=0.8) is True


def test_grade_records_p90_and_budget_and_decides_by_them(trace: Trace) -> None:
    from callbench.grade.scoring import episode_grade, grade_verdict

    t = timed(trace, [0.3, 0.5, 1.4])
    g = episode_grade(t, [], grade_set_id="gs", pass_rule="outcome_overall_latency", latency_budget_s=1.5)
    assert g.timed and g.first_word_p90_s == 1.4 and g.latency_budget_s == 1.5
    tight = g.model_copy(update={"overall": 90.0, "outcome_met": True, "latency_budget_s": 1.0})
    assert grade_verdict(tight) is False
    assert grade_verdict(tight.model_copy(update={"latency_budget_s": 1.4})) is True


def test_grade_set_id_depends_on_the_budget_only_when_given() -> None:
    from callbench.grade.rubric import DEFAULT_RUBRIC

    role = RoleInfo(spec="j")
    base = grade_set_id_for(role, role, 70.0, DEFAULT_RUBRIC, 1, "outcome_overall_latency")
    assert base != grade_set_id_for(role, role, 70.0, DEFAULT_RUBRIC, 1, "outcome_overall_latency", 0.8)
    assert grade_set_id_for(role, role, 70.0, DEFAULT_RUBRIC, 1, "outcome_overall_latency", 0.8) != \
        grade_set_id_for(role, role, 70.0, DEFAULT_RUBRIC, 1, "outcome_overall_latency", 1.2)
