"""Discrimination on the starter bundle: with scripted judges, the reference path scores
100 on action checks in every scenario, while a candidate that only chats and hangs up
(``scripted:hangup``) scores far lower. Runs the real simulator with scripted models."""

from __future__ import annotations

from pathlib import Path

import pytest

import callbench.examples
from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.grader import grade_trace
from callbench.grade.scoring import totals
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import Trace

STARTER = Path(callbench.examples.__file__).parent / "starter"
FAR_LOWER = 40.0
"""Across the bundle, the hang-up candidate's mean action-check score is at least this far below 100.

Per scenario the bound is the abstention share: a candidate that only chats can earn at most the
weight of the checks that zero calls satisfy (``count.min == 0``: "never call X", "at most two
attempts"). In a refusal scenario those dominate (the starter's wrong-person parcel call: 13 of 16
points), so "far lower" is asserted on the bundle mean and, per scenario, as "no more than
abstaining earns"."""


def _bundle() -> Bundle:
    return load_bundle(STARTER)


def _scenario_ids() -> list[str]:
    try:
        return [s.id for _, s in _bundle().scenarios()]
    except Exception:  # the test below reports a bundle that does not load
        return []


SCENARIOS = _scenario_ids()


def test_starter_bundle_loads_and_has_scenarios():
    assert [s.id for _, s in _bundle().scenarios()], "the starter bundle has no scenarios"


async def _episode(bundle: Bundle, scenario_id: str, candidate_spec: str) -> Trace:
    agent, scenario = bundle.scenario(scenario_id)
    return await run_episode(
        agent,
        scenario,
        candidate=create_scripted(candidate_spec, bundle=bundle),
        caller=create_scripted("scripted:plan", bundle=bundle),
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        episode_id=f"{candidate_spec.split(':')[1]}--{scenario_id}--r0",
        run_seed=7,
        repeat=0,
    )


def _action_score(grade) -> float | None:
    return totals([i for i in grade.items if i.source == "action_check"]).score


def _abstain_share(bundle: Bundle, scenario_id: str) -> float:
    checks = bundle.scenario(scenario_id)[1].action_checks
    return 100.0 * sum(c.importance for c in checks if c.count.min == 0) / sum(c.importance for c in checks)


@pytest.mark.parametrize("scenario_id", SCENARIOS)
async def test_reference_scores_100_on_action_checks_and_hangup_far_lower(scenario_id):
    bundle = _bundle()
    judge = create_scripted_judge("scripted:met")
    ref = await _episode(bundle, scenario_id, "scripted:reference")
    hang = await _episode(bundle, scenario_id, "scripted:hangup")
    assert not ref.skipped, ref.skip_reason
    assert not hang.skipped, hang.skip_reason
    g_ref = await grade_trace(ref, bundle, judge, judge)
    g_hang = await grade_trace(hang, bundle, judge, judge)
    unmet = [(i.id, i.reason) for i in g_ref.items if i.source == "action_check" and i.r != 1.0]
    assert unmet == [], f"reference path misses action checks: {unmet}"
    assert _action_score(g_ref) == 100.0
    hang_score = _action_score(g_hang)
    assert hang_score is not None and hang_score < 100.0
    assert hang_score <= _abstain_share(bundle, scenario_id) + 1e-9, hang_score
    assert g_hang.task_score is not None and g_ref.task_score is not None
    assert g_hang.task_score < g_ref.task_score
    for g, t in ((g_ref, ref), (g_hang, hang)):
        msgs, events = {m.index for m in t.messages}, {e.index for e in t.tool_events}
        assert all(set(i.cited_messages) <= msgs and set(i.cited_events) <= events for i in g.items)
        assert g.judge_errors == 0


async def test_hangup_far_lower_across_the_bundle():
    bundle = _bundle()
    judge = create_scripted_judge("scripted:met")
    ref, hang = [], []
    for sid in SCENARIOS:
        for spec, out in (("scripted:reference", ref), ("scripted:hangup", hang)):
            g = await grade_trace(await _episode(bundle, sid, spec), bundle, judge, judge)
            out.append(_action_score(g))
    assert ref and all(s == 100.0 for s in ref)
    mean_hang = sum(hang) / len(hang)
    assert mean_hang <= 100.0 - FAR_LOWER, hang
