"""Agreement between two raters on the same items, with cluster bootstrap intervals (pure numpy).

Used to compare grade sets (two judges, one judge twice, a judge and people): the raters' labels
on each shared item become one cell of a ``K x K`` confusion matrix ``O`` (rows: rater A, columns:
rater B, categories in a fixed order), summed over items.

Statistics (``N = sum(O)``, ``p = O / N``, row and column marginals ``r``, ``c``):

- percent agreement: ``100 * trace(O) / N``.
- Cohen's kappa (Cohen 1960, "A coefficient of agreement for nominal scales"), unweighted:
  ``(p_o - p_e) / (1 - p_e)`` with ``p_o = trace(p)`` and ``p_e = sum_k r_k c_k``. Undefined when
  ``p_e = 1`` (both raters gave every item one and the same category: there is no disagreement to
  beat by chance) or when there is no item.
- weighted kappa (Cohen 1968, "Weighted kappa: Nominal scale agreement with provision for scaled
  disagreement or partial credit"): ``1 - sum(w O) / sum(w E)`` with the chance-expected matrix
  ``E = N r c^T`` and disagreement weights ``w_ij = |i - j| / (K - 1)`` (linear) or
  ``(i - j)^2 / (K - 1)^2`` (quadratic). Quadratic weights are the default for the 1-5 ratings:
  a 1-vs-5 disagreement then costs 16 times a 1-vs-2 one, and the statistic equals an intraclass
  correlation for large samples (Fleiss and Cohen 1973). Undefined when ``sum(w E) = 0`` (both
  raters gave every item one and the same category) or when there is no item.

Undefined values are ``None`` with a reason, never NaN.

Intervals: items from one episode are not independent (one judge call grades them together), so
the bootstrap resamples *episodes* (clusters) with replacement, keeping each drawn episode's items
together, and recomputes the statistic on the pooled confusion matrix; the interval is the
percentile interval of the samples where the statistic is defined (``n_undefined`` counts the
others; with none defined the interval is ``None``). Drawing C clusters with replacement is done
as one multinomial draw of their multiplicities per sample. The generator is passed in (seeded
by the caller, e.g. :func:`callbench.stats.bootstrap.derive_rng`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

Weights = Literal["linear", "quadratic"]


class Interval(BaseModel):
    """A percentile bootstrap interval over resampled episodes."""

    low: float
    high: float
    confidence: float
    n_samples: int
    n_undefined: int = 0  # samples where the statistic was undefined (left out)


class AgreementResult(BaseModel):
    """Agreement of two raters on ``n`` items from ``n_episodes`` episodes.

    ``percent_agreement`` in 0..100; ``kappa`` in -1..1 (unweighted Cohen's kappa, or weighted
    kappa when ``weights`` is set); ``None`` with ``undefined_reason`` when undefined.
    ``confusion[i][j]`` counts items rater A put in ``categories[i]`` and rater B in ``categories[j]``.
    """

    n: int = 0
    n_episodes: int = 0
    categories: list[str]
    weights: Weights | None = None
    percent_agreement: float | None = None
    percent_agreement_interval: Interval | None = None
    kappa: float | None = None
    interval: Interval | None = None
    undefined_reason: str | None = None
    confusion: list[list[int]]


def weight_matrix(k: int, weights: Weights) -> NDArray[np.float64]:
    """Disagreement weights ``w_ij`` for ``k`` ordered categories (module docstring); ``k >= 2``."""
    if k < 2:
        raise ValueError(f"weighted kappa needs at least 2 categories, got {k}")
    idx = np.arange(k, dtype=float)
    d = np.abs(idx[:, None] - idx[None, :]) / (k - 1)
    return d if weights == "linear" else d**2


def _kappa_batch(
    conf: NDArray[np.float64], weights: Weights | None
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Kappa of each ``K x K`` matrix in ``conf`` (shape ``(B, K, K)``) and whether it is defined."""
    n = conf.sum(axis=(1, 2))
    safe_n = np.where(n > 0, n, 1.0)
    p = conf / safe_n[:, None, None]
    r, c = p.sum(axis=2), p.sum(axis=1)
    expected = r[:, :, None] * c[:, None, :]
    k = conf.shape[1]
    if weights is None:
        po = np.trace(p, axis1=1, axis2=2)
        pe = np.trace(expected, axis1=1, axis2=2)
        denom = 1.0 - pe
        ok = (n > 0) & (denom > 1e-12)
        kappa = np.where(ok, (po - pe) / np.where(ok, denom, 1.0), 0.0)
    else:
        w = weight_matrix(k, weights)
        observed = (w * p).sum(axis=(1, 2))
        chance = (w * expected).sum(axis=(1, 2))
        ok = (n > 0) & (chance > 1e-12)
        kappa = np.where(ok, 1.0 - observed / np.where(ok, chance, 1.0), 0.0)
    return kappa, ok


def kappa_from_confusion(
    confusion: Sequence[Sequence[float]] | NDArray[np.float64], weights: Weights | None = None
) -> float | None:
    """Cohen's kappa (``weights=None``) or weighted kappa of one confusion matrix; ``None`` when
    undefined (module docstring). Raises ``ValueError`` for a non-square or negative matrix."""
    m = np.asarray(confusion, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or (m < 0).any():
        raise ValueError("confusion must be a square matrix of non-negative counts")
    kappa, ok = _kappa_batch(m[None], weights)
    return float(kappa[0]) if bool(ok[0]) else None


def _undefined_reason(conf: NDArray[np.float64], categories: Sequence[str]) -> str:
    if conf.sum() == 0:
        return "no item graded by both"
    rows, cols = conf.sum(axis=1), conf.sum(axis=0)
    if (rows > 0).sum() == 1 and (cols > 0).sum() == 1 and int(rows.argmax()) == int(cols.argmax()):
        only = categories[int(rows.argmax())]
        return f"both raters gave every item the same label ({only}): chance agreement is 1"
    return "chance agreement is 1"


def agreement(
    labels_a: Sequence[Hashable],
    labels_b: Sequence[Hashable],
    clusters: Sequence[Hashable],
    categories: Sequence[Hashable],
    rng: np.random.Generator,
    *,
    weights: Weights | None = None,
    n_samples: int = 2000,
    confidence: float = 0.95,
) -> AgreementResult:
    """Percent agreement and (weighted) kappa of two raters with episode-bootstrap intervals.

    ``labels_a[i]``, ``labels_b[i]``: the two raters' labels of item i, each one of ``categories``
    (in order: the order matters for weighted kappa); ``clusters[i]``: item i's episode. Raises
    ``ValueError`` for sequences of different lengths, a label outside ``categories``, or bad
    bootstrap settings.
    """
    if not len(labels_a) == len(labels_b) == len(clusters):
        raise ValueError(
            "labels_a, labels_b and clusters differ in length "
            f"({len(labels_a)}, {len(labels_b)}, {len(clusters)})"
        )
    if n_samples < 1 or not 0.0 < confidence < 1.0:
        raise ValueError(f"need n_samples >= 1 and 0 < confidence < 1, got {n_samples}, {confidence}")
    index = {c: i for i, c in enumerate(categories)}
    k = len(categories)
    for lab in (*labels_a, *labels_b):
        if lab not in index:
            raise ValueError(f"label {lab!r} is not one of {list(categories)}")
    cluster_ids = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    per_cluster = np.zeros((len(cluster_ids), k, k))
    for a, b, c in zip(labels_a, labels_b, clusters, strict=True):
        per_cluster[cluster_ids[c], index[a], index[b]] += 1
    total = per_cluster.sum(axis=0)
    names = [str(c) for c in categories]
    out = AgreementResult(
        n=len(labels_a),
        n_episodes=len(cluster_ids),
        categories=names,
        weights=weights,
        confusion=total.astype(int).tolist(),
    )
    if out.n == 0:
        out.undefined_reason = "no item graded by both"
        return out
    out.percent_agreement = float(100.0 * np.trace(total) / total.sum())
    kappa, ok = _kappa_batch(total[None], weights)
    if bool(ok[0]):
        out.kappa = float(kappa[0])
    else:
        out.undefined_reason = _undefined_reason(total, names)

    n_clusters = len(cluster_ids)
    mult = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_samples)
    samples = (mult @ per_cluster.reshape(n_clusters, k * k)).reshape(n_samples, k, k)
    q = [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2]
    pa = 100.0 * np.trace(samples, axis1=1, axis2=2) / samples.sum(axis=(1, 2))
    lo, hi = np.percentile(pa, q)
    out.percent_agreement_interval = Interval(
        low=float(lo), high=float(hi), confidence=confidence, n_samples=n_samples
    )
    kappas, oks = _kappa_batch(samples, weights)
    if oks.any():
        lo, hi = np.percentile(kappas[oks], q)
        out.interval = Interval(
            low=float(lo),
            high=float(hi),
            confidence=confidence,
            n_samples=n_samples,
            n_undefined=int((~oks).sum()),
        )
    return out
