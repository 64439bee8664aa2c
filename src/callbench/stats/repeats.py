"""Reliability over repeats: pass^k, verdict flips and within-scenario spread of the overall score.

Inputs are, per scenario (an ``(agent_id, scenario_id)`` pair), the overall scores of its
completed, scored repeats (skipped, ungraded and not-run episodes and undefined overall scores
are left out before anything is computed). A repeat's *verdict* is pass = overall >= the cutoff
of its grade (DESIGN.md "Scores").

pass^k (introduced by tau-bench, Yao et al. 2024, "tau-bench: A Benchmark for Tool-Agent-User
Interaction in Real-World Domains", and computed the same way by tau2-bench): for a scenario with ``c``
passing repeats out of ``n`` completed repeats, the probability that ``k`` repeats drawn without
replacement all pass is ``C(c, k) / C(n, k)`` (unbiased for the chance that k fresh trials all
pass, like the pass@k estimator of Chen et al. 2021 with passes and failures swapped). pass^k is
the mean of that value over scenarios. pass^1 is the mean per-scenario pass rate.

Scenarios with fewer completed repeats than planned (a repeat skipped or not graded): a scenario
with ``n_s`` completed repeats enters pass^k for every ``k <= n_s`` with its own ``C(c, k) /
C(n_s, k)`` and is left out of pass^k for ``k > n_s`` (it cannot say whether k trials all pass);
the number of scenarios behind each k is reported beside it. k runs from 1 to the most repeats
any scenario has; a k no scenario reaches is omitted.

Verdict flip rate: among scenarios with at least two completed repeats, the share whose repeats
do not all get the same verdict (a fraction in 0..1).

Within-scenario SD: among scenarios with at least two completed repeats, the mean of the sample
standard deviation (``ddof = 1``) of the overall score across the scenario's repeats, in score
points (0..100).

With no scenario holding two completed repeats (a single-repeat run) every figure is ``None``:
pass^1 would only repeat the pass rate, and nothing can flip.

These figures describe the spread that caller, channel seed, candidate and judge randomness
together produce on this bundle; they carry no interval.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np
from pydantic import BaseModel, Field

K = TypeVar("K", bound=Hashable)


class RepeatStats(BaseModel):
    """Reliability figures of one candidate over repeats (see the module docstring).

    ``pass_hat_k`` maps ``str(k)`` to a fraction in 0..1; ``pass_hat_k_scenarios`` maps ``str(k)``
    to the number of scenarios behind it. ``within_scenario_sd`` is in score points.
    """

    max_repeats: int = 0  # the most completed repeats any scenario has
    n_scenarios: int = 0  # scenarios with at least one completed repeat
    n_scenarios_repeated: int = 0  # scenarios with at least two completed repeats
    pass_hat_k: dict[str, float] | None = None
    pass_hat_k_scenarios: dict[str, int] = Field(default_factory=dict)
    verdict_flip_rate: float | None = None
    n_flipped: int = 0
    within_scenario_sd: float | None = None


def pass_hat_k(n: int, c: int, k: int) -> float:
    """``C(c, k) / C(n, k)``: the chance that ``k`` of ``n`` trials, ``c`` of them passing, drawn
    without replacement, all pass. Raises ``ValueError`` unless ``0 <= c <= n`` and
    ``1 <= k <= n``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return math.comb(c, k) / math.comb(n, k)


def pass_hat_k_table(verdicts: Mapping[K, Sequence[bool]]) -> tuple[dict[str, float], dict[str, int]]:
    """``({str(k): pass^k}, {str(k): scenarios behind it})`` for k = 1 .. the most repeats, from
    each scenario's verdicts (any verdict: pass, or outcome met as tau2-bench counts it). A scenario
    enters pass^k for every ``k <= len(its verdicts)`` (module docstring). Empty without verdicts."""
    table: dict[str, float] = {}
    counts: dict[str, int] = {}
    most = max((len(v) for v in verdicts.values()), default=0)
    for k in range(1, most + 1):
        vals = [pass_hat_k(len(v), sum(v), k) for v in verdicts.values() if len(v) >= k]
        if vals:
            table[str(k)] = sum(vals) / len(vals)
            counts[str(k)] = len(vals)
    return table, counts


def repeat_stats(
    scores: Mapping[K, Sequence[float]],
    cutoffs: Mapping[K, Sequence[float]] | None = None,
    *,
    cutoff: float = 70.0,
    passes: Mapping[K, Sequence[bool]] | None = None,
) -> RepeatStats:
    """Reliability figures from ``scores[scenario] = [overall of each completed repeat]``.

    ``cutoffs[scenario]`` gives each repeat's own pass cutoff (same length as its scores);
    without it every repeat uses ``cutoff``. ``passes[scenario]``, when given, are the repeats'
    verdicts as graded (the pass rule may ask more than the cutoff: an outcome met) and replace the
    cutoff comparison. Scenarios with no score are ignored. Raises ``ValueError`` when a
    scenario's cutoffs or passes do not match its scores in length.
    """
    verdicts: dict[K, list[bool]] = {}
    for key, vals in scores.items():
        if passes is not None:
            given = list(passes.get(key, []))
            if len(given) != len(vals):
                raise ValueError(f"scenario {key!r}: {len(vals)} scores but {len(given)} verdicts")
            if vals:
                verdicts[key] = given
            continue
        cuts = list(cutoffs[key]) if cutoffs is not None and key in cutoffs else [cutoff] * len(vals)
        if len(cuts) != len(vals):
            raise ValueError(f"scenario {key!r}: {len(vals)} scores but {len(cuts)} cutoffs")
        if vals:
            verdicts[key] = [v >= c for v, c in zip(vals, cuts, strict=True)]
    out = RepeatStats(n_scenarios=len(verdicts))
    if not verdicts:
        return out
    out.max_repeats = max(len(v) for v in verdicts.values())
    repeated = [k for k, v in verdicts.items() if len(v) >= 2]
    out.n_scenarios_repeated = len(repeated)
    if not repeated:
        return out
    out.pass_hat_k, out.pass_hat_k_scenarios = pass_hat_k_table(verdicts)
    out.n_flipped = sum(len(set(verdicts[k])) > 1 for k in repeated)
    out.verdict_flip_rate = out.n_flipped / len(repeated)
    sds = [float(np.std(np.asarray(scores[k], dtype=float), ddof=1)) for k in repeated]
    out.within_scenario_sd = sum(sds) / len(sds)
    return out
