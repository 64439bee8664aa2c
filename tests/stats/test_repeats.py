"""pass^k, verdict flips and within-scenario SD against independent computations: pass^k by
enumerating every k-subset of a scenario's repeats (the definition the estimator is unbiased
for), SD with the standard library's ``statistics.stdev``."""

from __future__ import annotations

import statistics
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.stats.repeats import pass_hat_k, repeat_stats


def brute_pass_hat_k(verdicts: list[bool], k: int) -> float:
    """Share of the k-subsets of the repeats in which every repeat passes."""
    subsets = list(combinations(verdicts, k))
    return sum(all(s) for s in subsets) / len(subsets)


def test_textbook_values() -> None:
    # 4 repeats, 3 pass: pass^1 = 3/4, pass^2 = C(3,2)/C(4,2) = 3/6, pass^3 = 1/4, pass^4 = 0
    assert pass_hat_k(4, 3, 1) == 0.75
    assert pass_hat_k(4, 3, 2) == 0.5
    assert pass_hat_k(4, 3, 3) == 0.25
    assert pass_hat_k(4, 3, 4) == 0.0
    assert pass_hat_k(2, 2, 2) == 1.0
    with pytest.raises(ValueError):
        pass_hat_k(2, 3, 1)
    with pytest.raises(ValueError):
        pass_hat_k(2, 1, 3)


def test_two_scenarios_worked_example() -> None:
    # scenario A: 80, 60, 90 (pass, fail, pass); scenario B: 75, 71 (pass, pass)
    s = repeat_stats({"A": [80.0, 60.0, 90.0], "B": [75.0, 71.0]})
    assert s.max_repeats == 3 and s.n_scenarios == 2 and s.n_scenarios_repeated == 2
    assert s.pass_hat_k == {"1": pytest.approx((2 / 3 + 1) / 2), "2": pytest.approx((1 / 3 + 1) / 2),
                            "3": 0.0}  # fmt: skip
    # B has only two repeats: it cannot enter pass^3
    assert s.pass_hat_k_scenarios == {"1": 2, "2": 2, "3": 1}
    assert s.n_flipped == 1 and s.verdict_flip_rate == 0.5
    sd_a = statistics.stdev([80.0, 60.0, 90.0])
    sd_b = statistics.stdev([75.0, 71.0])
    assert s.within_scenario_sd == pytest.approx((sd_a + sd_b) / 2)


def test_single_repeat_gives_nothing() -> None:
    s = repeat_stats({"A": [80.0], "B": [10.0]})
    assert s.pass_hat_k is None and s.verdict_flip_rate is None and s.within_scenario_sd is None
    assert s.max_repeats == 1 and s.n_scenarios == 2


def test_own_cutoffs_per_repeat() -> None:
    s = repeat_stats({"A": [65.0, 65.0]}, {"A": [60.0, 70.0]})
    assert s.n_flipped == 1 and s.pass_hat_k == {"1": 0.5, "2": 0.0}
    with pytest.raises(ValueError, match="2 scores but 1 cutoffs"):
        repeat_stats({"A": [65.0, 65.0]}, {"A": [60.0]})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), min_size=1, max_size=6),
        min_size=1,
        max_size=8,
    )
)
def test_matches_enumeration(groups: list[list[float]]) -> None:
    scores = {f"s{i}": g for i, g in enumerate(groups)}
    s = repeat_stats(scores, cutoff=50.0)
    repeated = [g for g in groups if len(g) >= 2]
    if not repeated:
        assert s.pass_hat_k is None
        return
    assert s.pass_hat_k is not None
    for k in range(1, max(len(g) for g in groups) + 1):
        vals = [brute_pass_hat_k([v >= 50.0 for v in g], k) for g in groups if len(g) >= k]
        assert s.pass_hat_k[str(k)] == pytest.approx(sum(vals) / len(vals))
        assert s.pass_hat_k_scenarios[str(k)] == len(vals)
    flips = [len({v >= 50.0 for v in g}) > 1 for g in repeated]
    assert s.verdict_flip_rate == pytest.approx(sum(flips) / len(repeated))
    assert s.within_scenario_sd == pytest.approx(
        sum(statistics.stdev(g) for g in repeated) / len(repeated), abs=1e-9
    )
