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


def test_unknown_scenario_in_a_large_bundle_names_close_ids_not_all() -> None:
    """Regression: ``--scenarios nosuch`` on the 100-scenario starter listed all 100 ids."""
    from callbench.bundle.validate.audits import load_bundle
    from callbench.runs.demo import starter_path

    starter = load_bundle(starter_path())
    with pytest.raises(ValueError) as e:
        select_scenarios(starter, ScenarioFilters(scenarios=["lpg_en_late_delivery_no_second_bookin"]))
    msg = str(e.value)
    assert "did you mean lpg_en_late_delivery_no_second_booking?" in msg
    assert "100 scenarios in all" in msg and msg.count("_") < 20
    with pytest.raises(ValueError) as e:
        select_scenarios(starter, ScenarioFilters(scenarios=["zzzz"]))
    assert str(e.value) == (
        f"--scenarios zzzz: not in the bundle (100 scenarios in all; callbench inspect {starter.root} "
        "--scenarios lists them)"
    )
