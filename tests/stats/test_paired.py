from __future__ import annotations

import numpy as np
import pytest

from callbench.stats.bootstrap import derive_rng, hierarchical_bootstrap
from callbench.stats.paired import paired_comparison, scenario_means


def test_scenario_means_average_repeats_and_drop_undefined() -> None:
    m = scenario_means([("a", "s1", 80.0), ("a", "s1", 60.0), ("a", "s2", None), ("b", "s1", 10.0)])
    assert m == {("a", "s1"): 70.0, ("b", "s1"): 10.0}


def test_wins_losses_ties_on_shared_scenarios_only() -> None:
    a = [
        ("ag1", "s1", 80.0),
        ("ag1", "s1", 60.0),  # mean 70
        ("ag1", "s2", 90.0),
        ("ag2", "s1", 40.0),
        ("ag2", "s2", 55.0),
        ("ag2", "s3", 100.0),  # b never completed s3
    ]
    b = [
        ("ag1", "s1", 70.0),  # tie (70 - 70)
        ("ag1", "s2", 50.0),  # win for a (+40)
        ("ag2", "s1", 45.0),  # loss for a (-5)
        ("ag2", "s2", 55.0 + 1e-12),  # tie within tolerance
        ("ag2", "s3", None),  # skipped: not shared
        ("ag3", "s1", 10.0),  # a never ran it
    ]
    p = paired_comparison("A", a, "B", b, derive_rng(1))
    assert (p.wins, p.losses, p.ties) == (1, 1, 2)
    assert p.n_scenarios == 4 and p.n_agents == 2
    assert (p.only_a, p.only_b) == (1, 1)
    assert p.mean_difference == pytest.approx((0 + 40 - 5 - 1e-12) / 4)
    assert p.low is not None and p.high is not None
    assert p.low <= p.mean_difference <= p.high


def test_constant_difference_gives_point_interval_that_excludes_zero() -> None:
    rng = np.random.default_rng(0)
    base = {(f"ag{a}", f"s{s}"): rng.uniform(20, 80) for a in range(5) for s in range(4)}
    a = [(ag, sc, v + 5.0) for (ag, sc), v in base.items()]
    b = [(ag, sc, v) for (ag, sc), v in base.items()]
    p = paired_comparison("A", a, "B", b, derive_rng(2))
    assert p.mean_difference == pytest.approx(5.0)
    assert p.low == pytest.approx(5.0) and p.high == pytest.approx(5.0)
    assert p.excludes_zero
    assert (p.wins, p.losses, p.ties) == (20, 0, 0)
    # The marginal (unpaired) intervals are wide and overlap; pairing removes scenario variance.
    agents = [k[0] for k in base]
    scens = [k[1] for k in base]
    ma = hierarchical_bootstrap(agents, scens, [x[2] for x in a], derive_rng(3))
    mb = hierarchical_bootstrap(agents, scens, [x[2] for x in b], derive_rng(3))
    assert ma.low is not None and mb.high is not None
    assert ma.low < mb.high


def test_no_shared_scenarios() -> None:
    p = paired_comparison("A", [("x", "s", 1.0)], "B", [("y", "s", 2.0)], derive_rng(0))
    assert p.n_scenarios == 0 and p.mean_difference is None and p.low is None
    assert not p.excludes_zero
    assert (p.only_a, p.only_b) == (1, 1)


def test_interval_contains_zero_for_noise_and_is_seeded() -> None:
    rng = np.random.default_rng(5)
    a = [(f"ag{i}", f"s{j}", float(rng.uniform(0, 100))) for i in range(6) for j in range(5)]
    b = [(ag, sc, float(rng.uniform(0, 100))) for ag, sc, _ in a]
    p1 = paired_comparison("A", a, "B", b, derive_rng(4, "pair"))
    p2 = paired_comparison("A", a, "B", b, derive_rng(4, "pair"))
    assert p1 == p2
    assert p1.low is not None and p1.high is not None and p1.low < p1.high
    assert p1.wins + p1.losses + p1.ties == 30
