"""Outcome-critical items, the outcome of an episode, the two pass rules, calls cut by a turn cap,
and one ordering slip counted once in the diagnostics."""

from __future__ import annotations

import pytest

from callbench.bundle.models import ActionCheck, Diagnostic, Pillar, StateCheck
from callbench.grade.action_checks import grade_action_checks
from callbench.grade.models import GradedItem, Label
from callbench.grade.scoring import episode_grade, outcome, verdict
from callbench.trace import EndReason


def _item(i: str, label: Label, *, critical: bool = False, weight: int = 3,
          diagnostic: Diagnostic = Diagnostic.OUTCOME_REACHED, reason: str = "") -> GradedItem:
    return GradedItem(id=i, source="action_check", pillar=Pillar.TASK, diagnostic=diagnostic,
                      weight=weight, label=label, reason=reason, critical=critical)


def test_critical_defaults_follow_the_diagnostic_and_state_checks() -> None:
    assert ActionCheck(id="a", tool="t", diagnostic=Diagnostic.OUTCOME_REACHED).is_critical
    assert not ActionCheck(id="a", tool="t", diagnostic=Diagnostic.ARGUMENT_ACCURACY).is_critical
    assert ActionCheck(id="a", tool="t", diagnostic=Diagnostic.TOOL_CHOICE, critical=True).is_critical
    off = ActionCheck(id="a", tool="t", diagnostic=Diagnostic.OUTCOME_REACHED, critical=False)
    assert not off.is_critical
    assert StateCheck(id="s").is_critical and not StateCheck(id="s", critical=False).is_critical


def test_outcome_needs_every_critical_item_met() -> None:
    met = [_item("a", Label.MET, critical=True), _item("b", Label.NOT_MET)]
    assert outcome(met) == (True, "every critical item met (1)")
    failed = [_item("a", Label.MET, critical=True), _item("b", Label.NOT_MET, critical=True)]
    ok, why = outcome(failed)
    assert ok is False and why.startswith("critical item b not met")
    # a critical item left not applicable by its guard: the call never got to the outcome
    guarded = [_item("a", Label.NOT_APPLICABLE, critical=True, reason="guard not met")]
    ok, why = outcome(guarded)
    assert ok is False and why.startswith("not reached: critical item a did not apply")
    assert outcome([_item("b", Label.MET)]) == (None, "no outcome-critical item in this scenario")
    assert outcome(met, cut="not reached: cut at 2")[0] is None


@pytest.mark.parametrize(
    ("overall", "met", "rule", "expected"),
    [
        (75.0, False, "outcome_and_overall", False),  # a wrong outcome never passes
        (75.0, True, "outcome_and_overall", True),
        (65.0, True, "outcome_and_overall", False),
        (75.0, None, "outcome_and_overall", True),  # no outcome defined: the overall decides
        (75.0, False, "overall", True),  # the paper's rule, by name
        (None, True, "outcome_and_overall", None),
    ],
)
def test_verdict_under_each_rule(overall, met, rule, expected) -> None:
    assert verdict(overall, met, cutoff=70.0, rule=rule) is expected


def test_a_cut_call_has_no_verdict() -> None:
    assert verdict(90.0, True, cutoff=70.0, rule="outcome_and_overall", cut=True) is None


def test_an_extra_write_style_failure_cannot_pass_on_good_marks(critical_bundle, trace_of) -> None:
    """The measured case: task 62.5 with every judged item met gave overall 75 and a pass; the
    outcome (its critical check not met) now fails it under the default rule."""
    bundle, scen = critical_bundle, critical_bundle.scenario("zero_supply")[1]
    trace = trace_of(bundle, "good")
    trace.tool_events[1].arguments = {"category": "other", "shift": "evening"}
    rating = GradedItem(id="r", source="rating", pillar=Pillar.CONVERSATION,
                        diagnostic=Diagnostic.SPEAKABILITY, weight=3, rating=5)
    items = [*grade_action_checks(trace, scen), rating]
    g = episode_grade(trace, items, grade_set_id="gs", scenario=scen)
    assert g.task_score == pytest.approx(100 * 3 / 6)  # lookup (1) and no_pickup (2) met of 6
    assert g.overall == pytest.approx(75.0)
    assert g.outcome_met is False and "log_reason" in g.outcome_reason
    assert g.passed is False and g.pass_rule == "outcome_and_overall"
    paper = episode_grade(trace, items, grade_set_id="gs", scenario=scen, pass_rule="overall")
    assert paper.passed is True and paper.pass_rule == "overall"


def test_cut_by_the_turn_cap_is_not_a_failed_outcome(critical_bundle, trace_of) -> None:
    bundle, scen = critical_bundle, critical_bundle.scenario("zero_supply")[1]
    scen = scen.model_copy(update={"reference_path": [{"speech": "hi"}] * 4})  # needs 3 caller turns
    trace = trace_of(bundle, "hangup")
    trace.end_reason = EndReason.MAX_TURNS
    trace.settings = {"max_caller_turns": 2}
    g = episode_grade(trace, grade_action_checks(trace, scen), grade_set_id="gs", scenario=scen)
    assert g.cut is True and g.outcome_met is None and g.passed is None
    assert g.outcome_reason == "not reached: cut at 2 caller turns (the authored correct call takes 3)"
    trace.settings = {"max_caller_turns": 3}  # the cap left room for the whole call: a real failure
    g = episode_grade(trace, grade_action_checks(trace, scen), grade_set_id="gs", scenario=scen)
    assert g.cut is False and g.outcome_met is False


def test_one_ordering_slip_counts_once_in_the_diagnostics(critical_bundle, trace_of) -> None:
    """log_reason must come after lookup_farmer; with the lookup's arguments wrong, log_reason's own
    (exact) call cannot count: it stays not met in the pillar, says why, and enters no diagnostic."""
    bundle, scen = critical_bundle, critical_bundle.scenario("zero_supply")[1]
    trace = trace_of(bundle, "good")
    trace.tool_events[0].arguments = {"farmer_id": "F-999"}
    items = {i.id: i for i in grade_action_checks(trace, scen)}
    lr = items["log_reason"]
    assert lr.label == Label.NOT_MET and lr.not_reached == ["lookup_farmer"]
    assert lr.reason.startswith("not reached: depends on lookup_farmer")
    g = episode_grade(trace, list(items.values()), grade_set_id="gs", scenario=scen)
    assert g.task.weight == 6 and g.task.points == 2  # the pillar still counts the miss
    assert g.diagnostics[Diagnostic.ARGUMENT_ACCURACY].weight == 0  # ... but not as an argument error
    tool_choice = g.diagnostics[Diagnostic.TOOL_CHOICE]
    assert (tool_choice.weight, tool_choice.points) == (1, 0)
