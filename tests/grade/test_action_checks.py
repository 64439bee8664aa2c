"""Action checks over trace tool events: labels, reasons, cited events and messages."""

from __future__ import annotations

import pytest

from callbench.bundle.models import Diagnostic, Pillar
from callbench.grade.action_checks import GradeError, call_records, grade_action_checks
from callbench.grade.models import Label


def _by_id(items):
    return {i.id: i for i in items}


def test_good_trace_meets_every_check(make_trace, bundle):
    _, scen = bundle.scenario("zero_supply")
    items = _by_id(grade_action_checks(make_trace("good"), scen))
    assert list(items) == ["lookup_farmer", "log_reason", "no_pickup"]
    lk, lr, np_ = items["lookup_farmer"], items["log_reason"], items["no_pickup"]
    assert (lk.label, lk.r, lk.weight, lk.diagnostic) == (Label.MET, 1.0, 1, Diagnostic.TOOL_CHOICE)
    assert (lk.cited_events, lk.cited_messages) == ([0], [3])
    assert (lr.label, lr.weight, lr.cited_events, lr.cited_messages) == (Label.MET, 3, [1], [5])
    assert lr.diagnostic == Diagnostic.ARGUMENT_ACCURACY and lr.pillar == Pillar.TASK
    assert lr.source == "action_check" and lr.reason == "1 matching call(s) of log_zero_supply_reason"
    assert (np_.label, np_.cited_events) == (Label.MET, [])


def test_wrong_argument_cites_the_near_miss(make_trace, bundle):
    _, scen = bundle.scenario("zero_supply")
    t = make_trace("good")
    t.tool_events[1].arguments = {"category": "other", "shift": "evening"}
    lr = _by_id(grade_action_checks(t, scen))["log_reason"]
    assert lr.label == Label.NOT_MET and lr.r == 0.0
    assert lr.reason == (
        "0 matching call(s) of log_zero_supply_reason, need at least 1; 1 call(s) with other arguments"
    )
    assert (lr.cited_events, lr.cited_messages) == ([1], [5])


def test_order_and_unparseable_arguments(make_trace, bundle):
    _, scen = bundle.scenario("zero_supply")
    t = make_trace("good")
    t.tool_events[0].arguments = None  # get_farmer arguments did not parse
    t.tool_events[0].parse_error = "Expecting value"
    items = _by_id(grade_action_checks(t, scen))
    assert items["lookup_farmer"].label == Label.NOT_MET
    # log_reason must come after lookup_farmer, which was never met
    assert items["log_reason"].label == Label.NOT_MET
    assert items["log_reason"].reason.startswith("not reached: depends on lookup_farmer")
    assert items["log_reason"].not_reached == ["lookup_farmer"]  # one slip, counted once


def test_forbidden_tool_and_non_executed_calls(make_trace, bundle):
    _, scen = bundle.scenario("zero_supply")
    t = make_trace("good")
    t.tool_events[2].name = "schedule_pickup"
    assert _by_id(grade_action_checks(t, scen))["no_pickup"].label == Label.NOT_MET
    assert _by_id(grade_action_checks(t, scen))["no_pickup"].cited_messages == [9]
    t.tool_events[2].executed = False
    t.tool_events[2].outcome = "limit_reached"
    assert [c.index for c in call_records(t)] == [0, 1]
    assert _by_id(grade_action_checks(t, scen))["no_pickup"].label == Label.MET


def test_after_cycle_is_a_grade_error(make_trace, bundle):
    _, scen = bundle.scenario("zero_supply")
    bad = scen.model_copy(deep=True)
    bad.action_checks[0].after = ["log_reason"]
    with pytest.raises(GradeError, match=r"zero_supply.*cycle"):
        grade_action_checks(make_trace("good"), bad)


def _guarded(scen):
    """The zero_supply scenario with ``no_pickup`` guarded by ``log_reason``."""
    g = scen.model_copy(deep=True)
    g.action_checks[2].applies_after = ["log_reason"]
    return g


def test_guarded_negative_is_not_applicable_when_the_guard_is_unmet(make_trace, bundle):
    scen = _guarded(bundle.scenario("zero_supply")[1])
    t = make_trace("hangup")
    items = _by_id(grade_action_checks(t, scen))
    np_ = items["no_pickup"]
    assert items["log_reason"].label == Label.NOT_MET
    assert (np_.label, np_.r) == (Label.NOT_APPLICABLE, None)
    assert np_.reason == "not applicable: guard check(s) not met: log_reason"
    # Without the guard the do-nothing trace meets it (the null-floor problem the guard fixes).
    assert _by_id(grade_action_checks(t, bundle.scenario("zero_supply")[1]))["no_pickup"].label == Label.MET


def test_guarded_negative_applies_once_the_guard_is_met(make_trace, bundle):
    scen = _guarded(bundle.scenario("zero_supply")[1])
    t = make_trace("good")
    assert _by_id(grade_action_checks(t, scen))["no_pickup"].label == Label.MET
    t.tool_events[2].name = "schedule_pickup"  # the forbidden call, after the guard was met
    np_ = _by_id(grade_action_checks(t, scen))["no_pickup"]
    assert (np_.label, np_.r, np_.cited_events) == (Label.NOT_MET, 0.0, [2])


def test_guarded_check_enters_neither_sum(make_trace, bundle):
    from callbench.grade.scoring import score_items

    _, plain = bundle.scenario("zero_supply")
    t = make_trace("hangup")
    task_plain, _, _ = score_items(grade_action_checks(t, plain))
    task_guarded, _, _ = score_items(grade_action_checks(t, _guarded(plain)))
    # weights 1 + 3 + 2: unguarded the negative adds 2 of 6 weight met; guarded only 4 weight count
    assert (task_plain.points, task_plain.weight) == (2.0, 6.0)
    assert (task_guarded.points, task_guarded.weight, task_guarded.items) == (0.0, 4.0, 2)


def test_not_applicable_guard_chains(make_trace, bundle):
    from callbench.bundle.checks import evaluate_checks

    _, scen = bundle.scenario("zero_supply")
    g = scen.model_copy(deep=True)
    # lookup_farmer guarded by log_reason; log_reason must come after lookup_farmer -> a cycle
    g.action_checks[0].applies_after = ["log_reason"]
    with pytest.raises(GradeError, match="applies_after' cycle"):
        grade_action_checks(make_trace("good"), g)
    # no_pickup guarded by a guarded check that is not applicable: not applicable too
    g = scen.model_copy(deep=True)
    g.action_checks[1].applies_after = ["no_pickup"]
    g.action_checks[1].after = []
    g.action_checks[2].applies_after = ["lookup_farmer"]
    res = {r.id: r for r in evaluate_checks(g, call_records(make_trace("hangup")))}
    assert (res["no_pickup"].applicable, res["no_pickup"].met) == (False, False)
    assert (res["log_reason"].applicable, res["log_reason"].met) == (False, False)
    assert res["log_reason"].reason == "not applicable: guard check(s) not met: no_pickup"
    res = {r.id: r for r in evaluate_checks(g, call_records(make_trace("good")))}
    assert res["no_pickup"].applicable and res["no_pickup"].met
    assert res["log_reason"].applicable and res["log_reason"].met
