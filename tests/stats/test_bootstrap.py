from __future__ import annotations

import numpy as np
import pytest

from callbench.stats import bootstrap as bs
from callbench.stats.bootstrap import (
    Draws,
    build_structure,
    derive_rng,
    draw,
    expand,
    flat_bootstrap,
    hierarchical_bootstrap,
    hierarchical_sample_means,
    means_from_draws,
    percentile_interval,
)


def grid(n_agents: int, n_scen: int, n_rep: int) -> tuple[list[str], list[str]]:
    agents = [f"a{a}" for a in range(n_agents) for _ in range(n_scen) for _ in range(n_rep)]
    scens = [f"s{s}" for _ in range(n_agents) for s in range(n_scen) for _ in range(n_rep)]
    return agents, scens


def test_constant_scores_give_zero_width_interval() -> None:
    agents, scens = grid(4, 3, 2)
    r = hierarchical_bootstrap(agents, scens, [62.5] * len(agents), derive_rng(1))
    assert r.estimate == 62.5
    assert r.low == 62.5 and r.high == 62.5
    assert r.width == 0.0
    assert (r.n_agents, r.n_scenarios, r.n_episodes, r.n_excluded) == (4, 12, 24, 0)


def test_two_agent_case_matches_exact_resampling_distribution() -> None:
    # Two agents, one episode each (0 and 100). Drawing 2 agents with replacement gives sample
    # means 0, 50, 100 with probabilities 1/4, 1/2, 1/4.
    s = build_structure(["x", "y"], ["s", "s"], [0.0, 100.0])
    means = hierarchical_sample_means(s, derive_rng(3), 4000)
    values, counts = np.unique(means, return_counts=True)
    assert values.tolist() == [0.0, 50.0, 100.0]
    freq = counts / counts.sum()
    assert freq == pytest.approx([0.25, 0.5, 0.25], abs=0.03)
    assert percentile_interval(means, 0.95) == (0.0, 100.0)


def test_estimate_lies_in_interval_and_is_plain_mean() -> None:
    rng = np.random.default_rng(0)
    agents, scens = grid(8, 5, 3)
    values = rng.uniform(0, 100, len(agents)).tolist()
    r = hierarchical_bootstrap(agents, scens, values, derive_rng(5))
    assert r.estimate == pytest.approx(float(np.mean(values)))
    assert r.low is not None and r.high is not None
    assert r.low < r.estimate < r.high


def test_seeded_reproducibility() -> None:
    agents, scens = grid(6, 4, 2)
    values = [float((i * 37) % 101) for i in range(len(agents))]
    a = hierarchical_bootstrap(agents, scens, values, derive_rng(11, "cand", "overall"))
    b = hierarchical_bootstrap(agents, scens, values, derive_rng(11, "cand", "overall"))
    c = hierarchical_bootstrap(agents, scens, values, derive_rng(12, "cand", "overall"))
    d = hierarchical_bootstrap(agents, scens, values, derive_rng(11, "other", "overall"))
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)
    assert (a.low, a.high) != (d.low, d.high)


def test_hierarchical_interval_wider_than_flat_on_clustered_data() -> None:
    # Strong agent effects, small within-agent noise: episodes of one agent are not independent.
    rng = np.random.default_rng(42)
    agents, scens = grid(10, 10, 3)
    effect = {f"a{a}": rng.normal(60, 15) for a in range(10)}
    values = [effect[a] + rng.normal(0, 2) for a in agents]
    h = hierarchical_bootstrap(agents, scens, values, derive_rng(1))
    f = flat_bootstrap(values, derive_rng(1))
    assert h.estimate == pytest.approx(f.estimate or 0.0)
    assert h.width is not None and f.width is not None
    assert h.width > 3 * f.width


def test_none_and_nan_are_excluded_and_counted() -> None:
    agents = ["a", "a", "b", "b", "c"]
    scens = ["s1", "s2", "s1", "s2", "s1"]
    values = [80.0, None, 40.0, float("nan"), None]
    r = hierarchical_bootstrap(agents, scens, values, derive_rng(2))
    assert r.n_excluded == 3
    assert r.n_episodes == 2
    assert r.n_agents == 2  # agent c had only an undefined value
    assert r.estimate == 60.0
    f = flat_bootstrap(values, derive_rng(2))
    assert (f.n_excluded, f.n_episodes, f.estimate) == (3, 2, 60.0)


def test_all_undefined_gives_no_estimate() -> None:
    r = hierarchical_bootstrap(["a"], ["s"], [None], derive_rng(0))
    assert r.estimate is None and r.low is None and r.high is None
    assert r.n_excluded == 1


def counts_of(structure: bs.ClusterStructure, draws: Draws) -> np.ndarray:
    episodes, mask = expand(structure, draws)
    return np.stack(
        [np.bincount(episodes[k][mask[k]], minlength=structure.n_episodes) for k in range(episodes.shape[0])]
    )


def test_cluster_drawn_twice_counts_twice() -> None:
    # agent a0: scenarios s0 (values 10, 20), s1 (30, 40); agent a1: s0 (90, 100).
    s = build_structure(
        ["a0", "a0", "a0", "a0", "a1", "a1"],
        ["s0", "s0", "s1", "s1", "s0", "s0"],
        [10.0, 20.0, 30.0, 40.0, 90.0, 100.0],
    )
    assert s.n_scen.tolist() == [2, 1] and s.n_rep.tolist() == [2, 2, 2]
    # Sample 0: agent a0 drawn twice; first slot draws scenario s1 twice, second slot s0 and s1.
    # Repeats: first index of each pair. Sample 1: a1 then a0 (only a1's first scenario slot counts).
    draws = Draws(
        agents=np.array([[0, 0], [1, 0]]),
        scenarios=np.array([[[1, 1], [0, 1]], [[0, 1], [0, 0]]]),
        repeats=np.array([[[[0, 1], [1, 1]], [[0, 0], [1, 0]]], [[[1, 1], [0, 0]], [[0, 1], [1, 1]]]]),
    )
    counts = counts_of(s, draws)
    # sample 0: slot1 s1 -> eps (2,3), s1 -> (3,3); slot2 s0 -> (0,0), s1 -> (3,2)
    assert counts[0].tolist() == [2, 0, 2, 4, 0, 0]
    # sample 1: slot1 agent a1 has 1 scenario: s0 -> (5,5) (second scenario slot masked);
    # slot2 agent a0: s0 -> (0,1), s0 -> (1,1)
    assert counts[1].tolist() == [1, 3, 0, 0, 0, 2]
    means = means_from_draws(s, draws)
    assert means[0] == pytest.approx((2 * 10 + 2 * 30 + 4 * 40) / 8)
    assert means[1] == pytest.approx((10 + 3 * 20 + 2 * 100) / 6)
    episodes, mask = expand(s, draws)
    assert (episodes[~mask] == s.n_episodes).all()  # ignored slots hold the sentinel


def test_balanced_fast_path_equals_general_path() -> None:
    agents, scens = grid(5, 4, 3)
    s = build_structure(agents, scens, [float((i * 7) % 13) for i in range(len(agents))])
    assert s.balanced_scenarios and s.balanced_repeats
    d = draw(s, derive_rng(8), 500)
    fast = means_from_draws(s, d)
    slow = means_from_draws(s, d, fast=False)
    assert np.allclose(fast, slow, rtol=0, atol=1e-9)
    assert len(set(fast.tolist())) > 100  # real resampling, not a constant


def test_random_draws_stay_inside_the_drawn_clusters() -> None:
    # Ragged: agents with 1, 3 and 5 scenarios, scenarios with 1..3 repeats.
    agents, scens, values = [], [], []
    for a, n_s in enumerate([1, 3, 5]):
        for sc in range(n_s):
            for _ in range(1 + (a + sc) % 3):
                agents.append(a)
                scens.append(sc)
                values.append(float(len(values)))
    s = build_structure(agents, scens, values)
    d = draw(s, derive_rng(9), 300)
    episodes, mask = expand(s, d)
    ep_agent = np.asarray([agents[int(v)] for v in s.values])  # values encode original positions
    for k in range(300):
        for slot in range(s.n_agents):
            drawn = sorted({int(x) for x in ep_agent[episodes[k, slot][mask[k, slot]]]})
            assert drawn == [int(d.agents[k, slot])]
            # every drawn scenario slot of this agent holds exactly its repeat count
            n_scen = int(s.n_scen[d.agents[k, slot]])
            assert mask[k, slot, :n_scen].any(axis=-1).all()
            assert not mask[k, slot, n_scen:].any()


def test_chunked_sampling_returns_all_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bs, "_CHUNK_ELEMENTS", 50)
    agents, scens = grid(3, 4, 2)
    s = build_structure(agents, scens, [float(i) for i in range(len(agents))])
    means = hierarchical_sample_means(s, derive_rng(1), 333)
    assert means.shape == (333,)
    assert float(means.min()) >= 0.0 and float(means.max()) <= len(agents) - 1


def test_percentile_interval_and_bad_input() -> None:
    assert percentile_interval(np.arange(101, dtype=float), 0.95) == pytest.approx((2.5, 97.5))
    assert percentile_interval(np.arange(101, dtype=float), 0.9) == pytest.approx((5.0, 95.0))
    with pytest.raises(ValueError, match="confidence"):
        percentile_interval(np.arange(3, dtype=float), 1.5)
    with pytest.raises(ValueError, match="differ in length"):
        build_structure(["a"], ["s", "t"], [1.0])
    with pytest.raises(ValueError, match="seed"):
        derive_rng(-1)


def test_bounded_draws_are_uniform_within_each_bound() -> None:
    highs = np.array([1, 2, 3, 5], dtype=np.int64)[:, None]
    x = bs._bounded(derive_rng(4), highs, np.array([1, 2, 3, 5]), (4, 30_000))
    for row, high in zip(x, highs[:, 0], strict=True):
        counts = np.bincount(row, minlength=int(high))
        assert counts.size == high  # never reaches the bound
        assert counts / row.size == pytest.approx([1 / high] * int(high), abs=0.01)
