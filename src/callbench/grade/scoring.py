"""Scores of one episode from its graded items: exactly the paper's equations.

Paper (scoring section) and DESIGN.md "Scores": every applicable item i has a weight
w_i in {1, 2, 3}; a label maps to r_i = 0 / 0.5 / 1 (not met / partial / met) and a rating
g_i in 1..5 to r_i = (g_i - 1) / 4; not-applicable items (and, here, judge errors) enter neither
sum. For a pillar P:

    S_P = 100 * sum_{i in P} w_i r_i / sum_{i in P} w_i          (undefined when P has no item)

overall = mean of the defined pillars (paper Eq. 1 averages the two; an undefined pillar is left
out rather than counted as 0). The ten diagnostics break the same points down: each item adds
w_i r_i and w_i to exactly one diagnostic, except a check that failed only because a check it
must follow was never met (``not_reached``): the slip is counted once, at that predecessor.

Outcome (DESIGN.md "Scores"; tau2-bench multiplies its reward components for the same reason):
met when every applicable critical item is met; a critical item left not applicable by its guard
means the call never reached the outcome (not met). No outcome when the scenario has no critical
item, or when a caller-turn cap cut the call before the authored correct call could finish.
passed, under the default rule ``outcome_and_overall``: outcome not failed and overall >= cutoff
(provisional 70); under the paper's rule ``overall``: overall >= cutoff alone. A cut call has no
verdict (None).
"""

from __future__ import annotations

import math

from callbench.bundle.models import Diagnostic, Pillar, Scenario
from callbench.grade.models import (
    LABEL_VALUE,
    EpisodeGrade,
    GradedItem,
    Label,
    PassRule,
    PointTotals,
)
from callbench.trace import EndReason, Trace

DEFAULT_CUTOFF = 70.0
DEFAULT_PASS_RULE: PassRule = "outcome_and_overall"
NOT_GRADED_SHARE = 0.5
"""An episode is not graded when, in either pillar, more than this share of the judged items
(criteria and ratings that apply) are judge errors: scoring the rest would let a
judge outage decide the score (with every conversation item errored, the task pillar alone made
the overall score)."""
INFRA_PREFIX = "judge infrastructure error"


def not_graded_reason(items: list[GradedItem]) -> str | None:
    """Why an episode with these graded items is not graded, or None when it is.

    ``judge_outage: <pillar>: e of n judged items errored (<first reason>)`` when the errors came
    from the judge's provider (infrastructure), else ``judge_output: ...`` (unusable replies).
    """
    for pillar in (Pillar.TASK, Pillar.CONVERSATION):
        judged = [i for i in items if i.pillar == pillar and i.source != "action_check"
                  and i.label != Label.NOT_APPLICABLE]
        errored = [i for i in judged if i.label == Label.JUDGE_ERROR]
        if judged and len(errored) > NOT_GRADED_SHARE * len(judged):
            infra = any(INFRA_PREFIX in i.reason for i in errored)
            category = "judge_outage" if infra else "judge_output"
            return (f"{category}: {pillar.value}: {len(errored)} of {len(judged)} judged items errored "
                    f"({errored[0].reason[:200]})")
    return None


def item_value(item: GradedItem) -> float | None:
    """r of an item: (g - 1) / 4 for a rating, 0 / 0.5 / 1 for a label, None when the item is not
    applicable or a judge error (it then enters neither sum)."""
    if item.label in (Label.NOT_APPLICABLE, Label.JUDGE_ERROR):
        return None
    if item.source == "rating":
        if item.rating is None:
            return None
        return (item.rating - 1) / 4
    if item.label is None:
        return None
    return LABEL_VALUE[item.label]


def totals(items: list[GradedItem]) -> PointTotals:
    """points = sum(w r), weight = sum(w), items = count, over the applicable items given."""
    t = PointTotals()
    for it in items:
        r = item_value(it)
        if r is None:
            continue
        t.points += it.weight * r
        t.weight += it.weight
        t.items += 1
    return t


def score_items(items: list[GradedItem]) -> tuple[PointTotals, PointTotals, dict[Diagnostic, PointTotals]]:
    """Task totals, conversation totals and the ten diagnostics' totals (every diagnostic present,
    empty ones with weight 0 and score None)."""
    task = totals([i for i in items if i.pillar == Pillar.TASK])
    conv = totals([i for i in items if i.pillar == Pillar.CONVERSATION])
    diags = {d: totals([i for i in items if i.diagnostic == d and not i.not_reached]) for d in Diagnostic}
    return task, conv, diags


def cut_by_cap(trace: Trace, scenario: Scenario | None) -> str | None:
    """Why ``trace`` counts as cut by a turn cap, or None: it ended at the caller-turn limit
    (``end_reason == max_turns``) and that limit (``trace.settings["max_caller_turns"]``) is below
    the caller turns the scenario's authored correct call takes (:meth:`Scenario.caller_turns_needed`)."""
    if scenario is None or trace.end_reason != EndReason.MAX_TURNS:
        return None
    cap = trace.settings.get("max_caller_turns")
    needed = scenario.caller_turns_needed()
    if not isinstance(cap, int) or cap >= needed:
        return None
    return f"not reached: cut at {cap} caller turns (the authored correct call takes {needed})"


def outcome(items: list[GradedItem], cut: str | None = None) -> tuple[bool | None, str]:
    """``(outcome_met, reason)`` from the graded critical items (``GradedItem.critical``).

    None with the cut reason when ``cut``; None when no item is critical; False naming the first
    critical item not met, or not applicable (its guard was not met: the call never got there);
    True when every critical item is met."""
    if cut is not None:
        return None, cut
    crit = [i for i in items if i.critical]
    if not crit:
        return None, "no outcome-critical item in this scenario"
    for i in crit:
        if i.label == Label.NOT_APPLICABLE:
            return False, f"not reached: critical item {i.id} did not apply ({i.reason[:160]})"
        if i.label != Label.MET:
            return False, f"critical item {i.id} not met ({i.reason[:160]})"
    return True, f"every critical item met ({len(crit)})"


def verdict(overall: float | None, outcome_met: bool | None, *, cutoff: float, rule: PassRule,
            cut: bool = False, timed: bool = False, first_word_p90_s: float | None = None,
            latency_budget_s: float | None = None) -> bool | None:
    """The pass verdict: None when ``overall`` is None or the call was cut; under
    ``outcome_and_overall`` the outcome must not have failed and overall >= cutoff; under
    ``overall`` (the paper's rule) overall >= cutoff alone; under ``outcome_overall_latency`` as
    ``outcome_and_overall`` and the call's p90 time to first word at most ``latency_budget_s``
    (None without a budget or timings: no verdict; a timed call that never spoke fails)."""
    if overall is None or cut:
        return None
    if rule == "overall":
        return overall >= cutoff
    passed = outcome_met is not False and overall >= cutoff
    if rule != "outcome_overall_latency":
        return passed
    if latency_budget_s is None or not timed:
        return None
    return passed and first_word_p90_s is not None and first_word_p90_s <= latency_budget_s


def grade_verdict(g: EpisodeGrade) -> bool | None:
    """:func:`verdict` of a saved grade under its own rule, cutoff and latency fields."""
    return verdict(g.overall, g.outcome_met, cutoff=g.cutoff, rule=g.pass_rule, cut=g.cut, timed=g.timed,
                   first_word_p90_s=g.first_word_p90_s, latency_budget_s=g.latency_budget_s)


def first_word_p90(trace: Trace) -> float | None:
    """The inverted-CDF p90 (Hyndman and Fan definition 1: the smallest value whose cumulative
    share of turns reaches 0.9) of the times to first word of the trace's candidate turns that
    spoke, in seconds; None without timings or when no turn spoke."""
    if trace.latency is None:
        return None
    values = sorted(t.time_to_first_word_s for t in trace.latency.turns if t.time_to_first_word_s is not None)
    if not values:
        return None
    return values[max(0, math.ceil(0.9 * len(values) - 1e-9) - 1)]


def overall_score(task: float | None, conversation: float | None) -> float | None:
    """Mean of the defined pillar scores; None when neither is defined."""
    defined = [s for s in (task, conversation) if s is not None]
    return sum(defined) / len(defined) if defined else None


def episode_grade(
    trace: Trace, items: list[GradedItem], *, grade_set_id: str, cutoff: float = DEFAULT_CUTOFF,
    pass_rule: PassRule = DEFAULT_PASS_RULE, scenario: Scenario | None = None,
    latency_budget_s: float | None = None,
) -> EpisodeGrade:
    """The :class:`EpisodeGrade` of a graded trace; a skipped trace gets ``skipped=True`` and no
    items or scores (skipped episodes are excluded from means, never scored 0). An episode whose
    judged items mostly errored (:func:`not_graded_reason`) keeps its items but gets
    ``not_graded=True`` and no scores. ``scenario`` (when given) tells whether a turn cap cut the
    call (:func:`cut_by_cap`); the outcome and verdict follow :func:`outcome` and :func:`verdict`."""
    base = dict(
        episode_id=trace.episode_id,
        grade_set_id=grade_set_id,
        trace_sha256=trace.sha256(),
        agent_id=trace.agent_id,
        scenario_id=trace.scenario_id,
        language=trace.language,
        difficulty=trace.difficulty,
        repeat=trace.repeat,
        candidate=trace.candidate.spec,
        end_reason=str(trace.end_reason),
        cutoff=cutoff,
        pass_rule=pass_rule,
        timed=trace.latency is not None,
        first_word_p90_s=(p90 := first_word_p90(trace)),
        latency_budget_s=latency_budget_s,
    )
    if trace.skipped:
        return EpisodeGrade(**base, skipped=True, skip_reason=trace.skip_reason or "skipped")
    for it in items:
        it.r = item_value(it)
    reason = not_graded_reason(items)
    if reason is not None:
        return EpisodeGrade(**base, items=items, not_graded=True, not_graded_reason=reason,
                            judge_errors=sum(1 for i in items if i.label == Label.JUDGE_ERROR))
    task, conv, diags = score_items(items)
    overall = overall_score(task.score, conv.score)
    cut = cut_by_cap(trace, scenario)
    met, why = outcome(items, cut)
    return EpisodeGrade(
        **base,
        items=items,
        task=task,
        conversation=conv,
        task_score=task.score,
        conversation_score=conv.score,
        overall=overall,
        passed=verdict(overall, met, cutoff=cutoff, rule=pass_rule, cut=cut is not None,
                       timed=trace.latency is not None, first_word_p90_s=p90,
                       latency_budget_s=latency_budget_s),
        outcome_met=met,
        outcome_reason=why,
        cut=cut is not None,
        diagnostics=diags,
        judge_errors=sum(1 for i in items if i.label == Label.JUDGE_ERROR),
    )
