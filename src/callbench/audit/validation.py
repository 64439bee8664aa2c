"""The statistics of judge validation: per-class recall, balanced accuracy, their
intervals, and the gate a judge must pass for a grade set it made to be official.

- *Balanced accuracy* = (recall on items whose known label is ``met`` + recall on items whose
  known label is ``not_met``) / 2 (Brodersen, Ong, Stephan & Buhmann, "The balanced accuracy and
  its posterior distribution", ICPR 2010). A constant judge gets exactly 0.5 whatever the class
  sizes: one recall is 1, the other 0. Plain accuracy rewards a constant ``not_met`` judge when
  most known answers are ``not_met`` (66.7% on the starter's old audit). Undefined (None) when a
  class has no item.
- *Recall intervals*: Wilson score interval (Wilson, "Probable inference, the law of succession, and
  statistical inference", JASA 22, 1927; the interval Brown, Cai & DasGupta, Statistical Science
  16, 2001, recommend for a binomial proportion): centre (k + z²/2) / (n + z²), half-width
  z / (n + z²) * sqrt(k (n - k) / n + z² / 4), z = 1.96 for 95%.
- *Balanced-accuracy interval*: percentile bootstrap (Efron & Tibshirani, An Introduction to the
  Bootstrap, 1993) resampling the labelled items with replacement within each class (drawing each
  class's agreeing count from Binomial(n, k / n)), :data:`BOOTSTRAP_SAMPLES` samples, seed fixed,
  so the same labels always give the same interval.
- *Gate* (:func:`gate`): balanced accuracy >= :data:`MIN_BALANCED_ACCURACY` and at most
  :data:`MAX_NULL_MET` of the null-trace criteria whose known label is ``not_met`` called ``met``.
  Both thresholds are settable (``callbench audit --min-balanced-accuracy``, ``--max-null-met``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from callbench.audit.store import ClassSplit, Gate, Rate

MIN_BALANCED_ACCURACY = 0.80
"""A judge's balanced accuracy on the audit's known answers must be at least this."""
MAX_NULL_MET = 0.10
"""A judge may call at most this share of the null traces' not_met criteria met."""
Z95 = 1.959963984540054
BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 20260314


@dataclass(frozen=True)
class Observation:
    """One judged criterion on one audit trace: the trace ``kind`` (``reference``, a floor agent's
    spec, or a contrastive kind), whether it is a null-floor trace, the criterion's diagnostic, its
    known label and the judge's label (``partial`` never agrees)."""

    kind: str
    null: bool
    diagnostic: str
    expected: str
    label: str

    @property
    def agrees(self) -> bool:
        return self.label == self.expected


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (module docstring); (None, None)
    when ``n`` is 0. Raises ``ValueError`` unless 0 <= k <= n."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None, None
    centre = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int) -> Rate:
    """``k`` of ``n`` as a :class:`Rate` with its Wilson interval."""
    low, high = wilson_interval(k, n)
    return Rate(k=k, n=n, value=k / n if n else None, low=low, high=high)


def class_split(obs: Iterable[Observation]) -> ClassSplit:
    """Recall on the known-``met`` and the known-``not_met`` observations and the balanced accuracy."""
    obs = list(obs)
    met = [o for o in obs if o.expected == "met"]
    not_met = [o for o in obs if o.expected == "not_met"]
    r_met = rate(sum(o.agrees for o in met), len(met))
    r_not = rate(sum(o.agrees for o in not_met), len(not_met))
    ba = None
    if r_met.value is not None and r_not.value is not None:
        ba = (r_met.value + r_not.value) / 2
    return ClassSplit(recall_met=r_met, recall_not_met=r_not, balanced_accuracy=ba)


def balanced_accuracy_interval(
    split: ClassSplit, *, samples: int = BOOTSTRAP_SAMPLES, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of the balanced accuracy (module docstring); (None, None) when
    it is undefined."""
    a, b = split.recall_met, split.recall_not_met
    if a.value is None or b.value is None:
        return None, None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    ba = (rng.binomial(a.n, a.value, samples) / a.n + rng.binomial(b.n, b.value, samples) / b.n) / 2
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ba, [tail, 100 - tail])
    return float(low), float(high)


def gate(
    split: ClassSplit,
    null_met: Rate,
    *,
    min_balanced_accuracy: float = MIN_BALANCED_ACCURACY,
    max_null_met: float = MAX_NULL_MET,
) -> Gate:
    """Whether a judge passes (module docstring); each failed condition is a reason in words."""
    reasons = []
    ba = split.balanced_accuracy
    if ba is None:
        missing = "met" if split.recall_met.n == 0 else "not_met"
        reasons.append(f"balanced accuracy cannot be measured: no known {missing} answer was labelled")
    elif ba < min_balanced_accuracy:
        reasons.append(f"balanced accuracy {ba:.2f} < {min_balanced_accuracy:.2f}")
    if null_met.value is not None and null_met.value > max_null_met:
        reasons.append(
            f"calls {null_met.value:.0%} of null-trace criteria met ({null_met.k}/{null_met.n}; "
            f"at most {max_null_met:.0%} allowed)"
        )
    return Gate(
        passed=not reasons,
        min_balanced_accuracy=min_balanced_accuracy,
        max_null_met=max_null_met,
        reasons=reasons,
    )
