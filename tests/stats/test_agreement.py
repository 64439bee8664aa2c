"""Agreement statistics against textbook values and independent computations: unweighted kappa
by plain loops (and scikit-learn when installed), quadratic-weighted kappa by the identity
kappa_w = 2 cov(a, b) / (var a + var b + (mean a - mean b)^2) (population moments), and the
cluster bootstrap by its behaviour on one cluster."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.stats.agreement import agreement, kappa_from_confusion, weight_matrix


def loop_kappa(a: list[int], b: list[int], k: int, weights: str | None = None) -> float | None:
    """Cohen's kappa (weights None) or weighted kappa with plain Python loops."""
    n = len(a)
    if n == 0:
        return None
    obs = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        obs[x][y] += 1 / n
    row = [sum(obs[i]) for i in range(k)]
    col = [sum(obs[i][j] for i in range(k)) for j in range(k)]
    if weights is None:
        po = sum(obs[i][i] for i in range(k))
        pe = sum(row[i] * col[i] for i in range(k))
        return None if abs(1 - pe) < 1e-12 else (po - pe) / (1 - pe)

    def w(i: int, j: int) -> float:
        d = abs(i - j) / (k - 1)
        return d if weights == "linear" else d * d

    o = sum(w(i, j) * obs[i][j] for i in range(k) for j in range(k))
    e = sum(w(i, j) * row[i] * col[j] for i in range(k) for j in range(k))
    return None if e < 1e-12 else 1 - o / e


@pytest.mark.parametrize(
    ("confusion", "expected"),
    [
        ([[20, 5], [10, 15]], 0.4),  # p_o = 0.7, p_e = 0.5
        ([[45, 15], [25, 15]], (0.60 - 0.54) / (1 - 0.54)),  # 0.1304
        ([[25, 35], [5, 35]], (0.60 - 0.46) / (1 - 0.46)),  # 0.2593
        ([[10, 0], [0, 10]], 1.0),
        ([[0, 10], [10, 0]], -1.0),
    ],
)
def test_textbook_kappas(confusion: list[list[int]], expected: float) -> None:
    assert kappa_from_confusion(confusion) == pytest.approx(expected)


def test_weighted_kappa_hand_example() -> None:
    # three categories; A = [0, 1, 2], B = [0, 2, 2]
    # O/3 = [[1,0,0],[0,0,1],[0,0,1]]/3; rows (1/3,1/3,1/3), cols (1/3,0,2/3)
    # linear weights [[0,.5,1],[.5,0,.5],[1,.5,0]]: observed 0.5/3 = 1/6;
    # expected = sum w_ij r_i c_j = 1/3 * (0.5*? ...) computed: row0: 0*1/3 + 1*2/3 = 2/3;
    # row1: .5*1/3 + .5*2/3 = .5; row2: 1*1/3 + 0 = 1/3; total/3 = (2/3 + 1/2 + 1/3)/3 = 1/2
    m = [[1, 0, 0], [0, 0, 1], [0, 0, 1]]
    assert kappa_from_confusion(m, "linear") == pytest.approx(1 - (1 / 6) / (1 / 2))
    assert weight_matrix(3, "quadratic").tolist() == [[0, 0.25, 1], [0.25, 0, 0.25], [1, 0.25, 0]]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=40))
def test_unweighted_matches_loops(pairs: list[tuple[int, int]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    res = agreement(a, b, list(range(len(a))), [0, 1, 2], np.random.default_rng(0), n_samples=20)
    expected = loop_kappa(a, b, 3)
    if expected is None:
        assert res.kappa is None and res.undefined_reason
    else:
        assert res.kappa == pytest.approx(expected, abs=1e-12)
    assert res.percent_agreement == pytest.approx(100 * sum(x == y for x, y in pairs) / len(pairs))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=40))
def test_quadratic_matches_moment_identity(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs], dtype=float)
    b = np.array([p[1] for p in pairs], dtype=float)
    res = agreement(
        list(a.astype(int)),
        list(b.astype(int)),
        [0] * len(a),
        [1, 2, 3, 4, 5],
        np.random.default_rng(0),
        weights="quadratic",
        n_samples=10,
    )
    denom = a.var() + b.var() + (a.mean() - b.mean()) ** 2
    if denom < 1e-12:
        assert res.kappa is None
    else:
        cov = ((a - a.mean()) * (b - b.mean())).mean()
        assert res.kappa == pytest.approx(2 * cov / denom, abs=1e-9)
        assert res.kappa == pytest.approx(
            loop_kappa(list(a.astype(int) - 1), list(b.astype(int) - 1), 5, "quadratic"), abs=1e-9
        )


def test_matches_sklearn_when_installed() -> None:
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    a = rng.integers(1, 6, 200)
    b = np.clip(a + rng.integers(-1, 2, 200), 1, 5)
    for w in (None, "linear", "quadratic"):
        res = agreement(list(a), list(b), list(range(200)), [1, 2, 3, 4, 5], rng, weights=w, n_samples=10)
        assert res.kappa == pytest.approx(sk.cohen_kappa_score(a, b, labels=[1, 2, 3, 4, 5], weights=w))


def test_degenerate_all_one_label() -> None:
    res = agreement(
        ["met"] * 5,
        ["met"] * 5,
        ["e1", "e1", "e2", "e3", "e3"],
        ["met", "partial", "not_met"],
        np.random.default_rng(1),
        n_samples=50,
    )
    assert res.kappa is None and res.interval is None
    assert res.undefined_reason is not None and "same label (met)" in res.undefined_reason
    assert res.percent_agreement == 100.0
    dumped = json.loads(res.model_dump_json())
    assert dumped["kappa"] is None and "NaN" not in res.model_dump_json()
    # weighted, too
    res_w = agreement(
        [3] * 4, [3] * 4, [1, 2, 3, 4], [1, 2, 3, 4, 5], np.random.default_rng(1), weights="quadratic"
    )
    assert res_w.kappa is None and res_w.undefined_reason


def test_no_items() -> None:
    res = agreement([], [], [], ["met", "partial", "not_met"], np.random.default_rng(0))
    assert res.n == 0 and res.kappa is None and res.percent_agreement is None
    assert res.undefined_reason == "no item graded by both"


def test_bootstrap_resamples_episodes_not_items() -> None:
    a = ["met", "met", "not_met", "partial", "met", "not_met"]
    b = ["met", "not_met", "not_met", "met", "met", "partial"]
    # one episode: every resample draws the same episode, so the interval collapses to the estimate
    one = agreement(a, b, ["e"] * 6, ["met", "partial", "not_met"], np.random.default_rng(5), n_samples=200)
    assert one.interval is not None and one.kappa is not None
    assert one.interval.low == pytest.approx(one.kappa) and one.interval.high == pytest.approx(one.kappa)
    assert one.percent_agreement_interval is not None
    assert one.percent_agreement_interval.low == one.percent_agreement_interval.high == pytest.approx(50.0)
    # six episodes: the interval has width, and the same seed gives the same interval
    many = [
        agreement(
            a, b, list("abcdef"), ["met", "partial", "not_met"], np.random.default_rng(5), n_samples=500
        )
        for _ in range(2)
    ]
    assert many[0].interval == many[1].interval
    assert many[0].interval is not None and many[0].interval.high > many[0].interval.low
    assert many[0].interval.n_undefined >= 0 and many[0].n_episodes == 6


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        agreement([1], [1, 2], [0], [1, 2], np.random.default_rng(0))
    with pytest.raises(ValueError, match="not one of"):
        agreement([7], [1], [0], [1, 2], np.random.default_rng(0))
    with pytest.raises(ValueError):
        kappa_from_confusion([[1, 2]])
    assert math.isclose(kappa_from_confusion([[3, 1], [1, 3]]) or 0.0, 0.5)
