"""Latency quantiles and budget shares: point estimates recomputed independently (numpy's own
inverted-CDF quantile, a plain count), intervals from the same hierarchical resampling as the
scores (a hand-made resampling loop reproduces the estimate's interval)."""

from __future__ import annotations

import numpy as np
import pytest

from callbench.stats.bootstrap import derive_rng
from callbench.stats.latency import latency_quantile, share_within_budget, weighted_quantile

AGENTS = ["a", "a", "a", "a", "b", "b", "b", "b"]
SCENS = ["s1", "s1", "s2", "s2", "s3", "s3", "s4", "s4"]


def _turns(seed: int = 3) -> list[list[float | None]]:
    rng = np.random.default_rng(seed)
    out: list[list[float | None]] = []
    for i in range(8):
        values: list[float | None] = [float(v) for v in rng.lognormal(np.log(0.6 + 0.1 * i), 0.4, size=5 + i)]
        values.append(None)  # a turn that said nothing
        out.append(values)
    return out


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_quantile_estimate_matches_numpy(q: float) -> None:
    turns = _turns()
    pooled = [v for t in turns for v in t if v is not None]
    result = latency_quantile(AGENTS, SCENS, turns, q, derive_rng(1, "lat"), n_samples=400)
    assert result.estimate == pytest.approx(float(np.quantile(pooled, q, method="inverted_cdf")))
    assert result.low is not None and result.high is not None
    assert result.low <= result.estimate <= result.high
    assert (result.n_episodes, result.n_agents, result.n_scenarios) == (8, 2, 4)


def test_share_within_budget_is_a_plain_count() -> None:
    turns = _turns()
    pooled = [v for t in turns for v in t if v is not None]
    result = share_within_budget(AGENTS, SCENS, turns, 0.8, derive_rng(1, "share"), n_samples=300)
    assert result.estimate == pytest.approx(100.0 * sum(v <= 0.8 for v in pooled) / len(pooled))
    assert 0.0 <= result.low <= result.estimate <= result.high <= 100.0  # type: ignore[operator]


def test_interval_is_the_hierarchical_resampling_of_pooled_turns() -> None:
    """A slow loop that redraws agents, scenarios within them, then repeats, pools the drawn
    episodes' turns and takes numpy's quantile gives the same interval from the same seed."""
    turns = _turns(7)
    fast = latency_quantile(AGENTS, SCENS, turns, 0.9, derive_rng(5, "x"), n_samples=300)
    rng = derive_rng(5, "x")
    from callbench.stats.bootstrap import build_structure, draw, expand

    structure = build_structure(AGENTS, SCENS, [float(i) for i in range(8)])
    episodes, mask = expand(structure, draw(structure, rng, 250))
    more, more_mask = expand(structure, draw(structure, rng, 50))
    stats = []
    for eps, m in ((episodes, mask), (more, more_mask)):
        for k in range(eps.shape[0]):
            drawn = [int(structure.values[e]) for e in eps[k][m[k]]]
            pooled = [v for e in drawn for v in turns[e] if v is not None]
            stats.append(float(np.quantile(pooled, 0.9, method="inverted_cdf")))
    low, high = np.percentile(stats, [2.5, 97.5])
    assert (fast.low, fast.high) == pytest.approx((float(low), float(high)))


def test_undefined_episodes_are_excluded_and_counted() -> None:
    result = latency_quantile(["a", "a"], ["s", "t"], [[None], [0.5, 0.7]], 0.5, derive_rng(0, "u"),
                              n_samples=50)
    assert result.estimate == 0.5 and result.n_excluded == 1 and result.n_episodes == 1
    empty = latency_quantile(["a"], ["s"], [[None]], 0.5, derive_rng(0, "u"), n_samples=50)
    assert empty.estimate is None


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        latency_quantile(["a"], ["s", "t"], [[1.0]], 0.5, derive_rng(0, "e"))
    with pytest.raises(ValueError, match="quantile must be in"):
        latency_quantile(["a"], ["s"], [[1.0]], 1.5, derive_rng(0, "e"))
    with pytest.raises(ValueError, match="budget"):
        share_within_budget(["a"], ["s"], [[1.0]], -1.0, derive_rng(0, "e"))


def test_weighted_quantile_counts_multiplicity() -> None:
    values = np.array([1.0, 2.0, 3.0])
    weights = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 2.0], [3.0, 1.0, 0.0]])
    assert weighted_quantile(values, weights, 0.5).tolist() == [2.0, 3.0, 1.0]


@pytest.mark.parametrize(("turns", "seed"), [(7, 0), (64, 1), (1000, 2), (1000, 3)])
def test_bracketed_quantile_equals_the_dense_one_exactly(turns: int, seed: int) -> None:
    """The resampled quantile found bracket by bracket is the dense computation's (a cumulative sum
    over every turn of every resample), bit for bit: ties, episodes never drawn, fewer turns than
    brackets, q of 0 and 1."""
    from callbench.stats.latency import _Resampled

    rng = np.random.default_rng(seed)
    n = max(2, turns // 5)
    values = np.sort(np.round(rng.gamma(2.0, 0.3, size=turns), 1))  # rounded: many ties
    owner = rng.integers(0, n, size=turns)
    owner[:n] = np.arange(n) if turns >= n else owner[:n]
    counts = rng.poisson(1.0, size=(40, n)).astype(np.float64)
    counts[:, owner[0]] += 1.0  # every resample has some weight
    resampled = _Resampled(values, owner, n)
    for q in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0):
        dense = weighted_quantile(values, counts[:, owner], q)
        assert resampled.quantile(counts, q).tolist() == dense.tolist()
    within = 100.0 * (counts[:, owner] * (values <= 0.5)).sum(axis=1) / counts[:, owner].sum(axis=1)
    assert resampled.share_within(counts, 0.5).tolist() == within.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_episode_counts_are_those_of_the_expanded_draws(seed: int) -> None:
    """The resamples' episode counts equal a count of :func:`expand`'s episodes from the same
    generator state, with agents of different scenario counts and scenarios of different repeats."""
    from callbench.stats.bootstrap import build_structure, draw, expand
    from callbench.stats.latency import _counts

    rng = np.random.default_rng(seed)
    agents, scens = [], []
    for a in range(4):
        for s in range(2 + (a + seed) % 3):
            for _ in range(1 + int(rng.integers(0, 4))):
                agents.append(f"a{a}")
                scens.append(f"s{s}")
    structure = build_structure(agents, scens, [1.0] * len(agents))
    got = _counts(structure, derive_rng(seed, "c"), 30)
    episodes, mask = expand(structure, draw(structure, derive_rng(seed, "c"), 30))
    for k in range(30):
        expected = np.bincount(episodes[k][mask[k]], minlength=structure.n_episodes)
        assert got[k].tolist() == expected.astype(float).tolist()
    assert got.sum(axis=1).min() >= 1.0


def test_several_quantiles_at_once_equal_each_alone() -> None:
    """latency_quantiles prepares the turns once; each result is the single call's with its own
    generator, bit for bit."""
    from callbench.stats.latency import latency_quantiles

    turns = _turns(11)
    together = latency_quantiles(AGENTS, SCENS, turns, [(q, derive_rng(2, str(q))) for q in (0.5, 0.9, 0.99)],
                                 n_samples=260)
    alone = [latency_quantile(AGENTS, SCENS, turns, q, derive_rng(2, str(q)), n_samples=260)
             for q in (0.5, 0.9, 0.99)]
    assert [r.model_dump() for r in together] == [r.model_dump() for r in alone]
    assert together[0].high is not None and together[0].high < together[2].high  # type: ignore[operator]
