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
    assert "never met: lookup_farmer" in items["log_reason"].reason


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
