from __future__ import annotations

import pytest

from callbench.bundle.models import Bundle
from callbench.models.base import ModelSettings
from callbench.runs.plan import ScenarioFilters, candidate_slug, plan_episodes, select_scenarios


def test_slug_is_stable_and_depends_on_settings() -> None:
    a = candidate_slug("openai:gpt-4o", ModelSettings())
    assert a == candidate_slug("openai:gpt-4o", ModelSettings())
    assert a.startswith("openai_gpt-4o-")
    assert a != candidate_slug("openai:gpt-4o", ModelSettings(temperature=0.7))


def test_plan_orders_candidates_scenarios_repeats(dairy: Bundle) -> None:
    plan = plan_episodes(
        dairy,
        [("scripted:reference", ModelSettings()), ("scripted:hangup", ModelSettings())],
        3,
        ScenarioFilters(),
    )
    n_scen = len(select_scenarios(dairy, ScenarioFilters()))
    assert len(plan) == 2 * 3 * n_scen
    assert [k.repeat for k in plan[:3]] == [0, 1, 2]
    assert len({k.episode_id for k in plan}) == len(plan)
    assert plan[0].episode_id.endswith(f"--{plan[0].scenario_id}--r0")


def test_unknown_filter_value_is_named(dairy: Bundle) -> None:
    with pytest.raises(ValueError, match="--languages xx-XX"):
        select_scenarios(dairy, ScenarioFilters(languages=["xx-XX"]))


def test_limit_and_bad_repeats(dairy: Bundle) -> None:
    assert len(select_scenarios(dairy, ScenarioFilters(limit=1))) == 1
    with pytest.raises(ValueError, match="repeats"):
        plan_episodes(dairy, [("scripted:reference", ModelSettings())], 0, ScenarioFilters())
    with pytest.raises(ValueError, match="twice"):
        plan_episodes(dairy, [("a:b", ModelSettings()), ("a:b", ModelSettings())], 1, ScenarioFilters())
