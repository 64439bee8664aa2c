"""The CI gate: judge a graded run against thresholds and, optionally, against a baseline run.

**Thresholds** name a field of a candidate's entry in the JSON report (``callbench report --json``,
``candidates[]``) by a dotted path, so any figure the report has or gains later can be gated
without a code change: ``overall``, ``task``, ``conversation``, ``pass_rate`` (percent),
``pass_hat_k.2`` (fraction), ``diagnostics.grounding``, ``outcome_success`` or a latency figure
when the report carries them. A field holding an interval (``estimate``/``low``/``high``, the
hierarchical bootstrap of stats/bootstrap.py) is judged on the interval: a minimum fails when the
*upper* bound is below it (the run is worse beyond noise), and with ``strict`` when the *lower*
bound is (the run is not surely good enough); a maximum (latency) mirrors it. A field holding a
diagnostic (``score``) or a plain number has no interval and is judged on its value. A field the
report does not have is a *skipped* decision (never a failure): a threshold on ``outcome_success``
can be set before the report computes it.

**Regression** against a baseline: for each candidate of the run paired with one of the baseline
(same name; or the only candidate of each), the paired comparison of stats/paired.py on the
scenarios both completed (mean over repeats per scenario, hierarchical bootstrap of the
differences over agents then scenarios). The gate fails when the whole interval of run minus
baseline lies below ``-max_drop`` (the run is worse by more than the allowed drop, beyond noise);
a difference whose interval reaches above ``-max_drop`` passes, however far its point estimate.

**Comparable runs**: a baseline that differs in bundle hash, caller, judges or run settings
(repeats, cutoff, loop settings, scenario filters) is refused with every difference listed,
unless ``allow_different`` is set (then the differences are listed as warnings).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

# The report's public API, in one place (report/ is being split into sub-packages).
from callbench.report.model.build import Report, build_report
from callbench.report.model.load import RunData, load_run
from callbench.stats.bootstrap import derive_rng
from callbench.stats.paired import PairedComparison, paired_comparison

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_NOT_COMPARABLE = 3
DEFAULT_MAX_DROP = 5.0
"""Score points of overall a run may lose against its baseline, beyond noise, and still pass."""


class Threshold(BaseModel):
    """``path`` (dotted, in a candidate's report entry) must be ``>= value`` (``kind="min"``) or
    ``<= value`` (``kind="max"``)."""

    path: str
    kind: Literal["min", "max"]
    value: float

    def text(self) -> str:
        return f"{self.path} {'>=' if self.kind == 'min' else '<='} {self.value:g}"


class Decision(BaseModel):
    """One decision of the gate: ``status`` passed, failed or skipped, and why (one line)."""

    name: str
    candidate: str
    status: Literal["passed", "failed", "skipped"]
    detail: str


class GateResult(BaseModel):
    """Everything the gate decided; ``exit_code`` per the module's EXIT_* constants."""

    run: str
    baseline: str | None = None
    strict: bool = False
    max_drop: float = DEFAULT_MAX_DROP
    differences: list[str] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    comparisons: list[PairedComparison] = Field(default_factory=list)
    exit_code: int = EXIT_PASSED

    @property
    def failed(self) -> list[Decision]:
        return [d for d in self.decisions if d.status == "failed"]


class GateInputError(ValueError):
    """A threshold that does not parse, or a run folder that cannot be read (one line)."""


def parse_threshold(text: str, kind: Literal["min", "max"]) -> Threshold:
    """``"overall=70"`` -> Threshold. Raises :class:`GateInputError` naming the flag."""
    path, eq, num = text.partition("=")
    try:
        value = float(num)
    except ValueError:
        value = math.nan
    if not eq or not path.strip() or math.isnan(value):
        raise GateInputError(f"--{kind} {text!r}: expected FIELD=NUMBER, e.g. overall=70 or pass_hat_k.2=0.5")
    return Threshold(path=path.strip(), kind=kind, value=value)


def _lookup(entry: dict[str, Any], path: str) -> Any:
    node: Any = entry
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def judge_threshold(candidate: str, entry: dict[str, Any], t: Threshold, strict: bool) -> Decision:
    """The decision of threshold ``t`` on a candidate's report entry (rules in the module docstring)."""
    name = t.text()
    node = _lookup(entry, t.path)
    if isinstance(node, dict) and "estimate" in node:
        est, low, high = node.get("estimate"), node.get("low"), node.get("high")
        if est is None:
            return Decision(name=name, candidate=candidate, status="skipped", detail=f"{t.path}: no value")
        low = est if low is None else low
        high = est if high is None else high
        shown = f"{est:.2f} [{low:.2f}, {high:.2f}]"
        bound = (low if strict else high) if t.kind == "min" else (high if strict else low)
        which = ("lower" if strict else "upper") if t.kind == "min" else ("upper" if strict else "lower")
        bad = bound < t.value if t.kind == "min" else bound > t.value
        why = f"{t.path} = {shown}: the {which} bound {bound:.2f} is {'not ' if not bad else ''}" + (
            f"{'below' if t.kind == 'min' else 'above'} {t.value:g}")
        return Decision(name=name, candidate=candidate, status="failed" if bad else "passed", detail=why)
    if isinstance(node, dict) and "score" in node:
        node = node["score"]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return Decision(name=name, candidate=candidate, status="skipped",
                        detail=f"{t.path}: the report has no such figure for this candidate")
    bad = node < t.value if t.kind == "min" else node > t.value
    return Decision(name=name, candidate=candidate, status="failed" if bad else "passed",
                    detail=f"{t.path} = {node:.4g} (no interval: judged on the value)")


def differences(run: RunData, base: RunData) -> list[str]:
    """What makes ``run`` and ``base`` not comparable: bundle hash, caller, judges, settings."""
    from callbench.report.model.fairness import describe_role

    m, b = run.manifest, base.manifest
    pairs = [
        ("bundle hash", m.bundle_hash, b.bundle_hash),
        ("caller", describe_role(m.caller), describe_role(b.caller)),
        ("task judge", describe_role(run.grade_set.task_judge), describe_role(base.grade_set.task_judge)),
        ("conversation judge", describe_role(run.grade_set.conversation_judge),
         describe_role(base.grade_set.conversation_judge)),
        ("repeats", m.repeats, b.repeats),
        ("pass cutoff", run.grade_set.cutoff, base.grade_set.cutoff),
        ("loop settings", m.loop_settings, b.loop_settings),
        ("scenario filters", m.filters, b.filters),
    ]
    return [f"{what}: {x!r} in the run, {y!r} in the baseline" for what, x, y in pairs if x != y]


def _pairs(run: Report, base: Report, given: list[tuple[str, str]]) -> list[tuple[str, str]]:
    mine = [c.candidate for c in run.candidates]
    theirs = [c.candidate for c in base.candidates]
    if given:
        for a, b in given:
            if a not in mine or b not in theirs:
                raise GateInputError(f"--pair {a}={b}: the run's candidates are {', '.join(mine)}; the "
                                     f"baseline's are {', '.join(theirs)}")
        return given
    same = [(c, c) for c in mine if c in theirs]
    if not same and len(mine) == 1 and len(theirs) == 1:
        return [(mine[0], theirs[0])]
    return same


def _scores(data: RunData, candidate: str) -> list[tuple[str, str, float | None]]:
    return [(r.agent_id, r.scenario_id, r.value("overall")) for r in data.records if r.candidate == candidate]


def run_gate(
    run_dir: Path,
    thresholds: list[Threshold],
    *,
    baseline_dir: Path | None = None,
    max_drop: float = DEFAULT_MAX_DROP,
    strict: bool = False,
    allow_different: bool = False,
    seed: int | None = None,
    n_samples: int = 2000,
    pairs: list[tuple[str, str]] | None = None,
) -> tuple[GateResult, Report, RunData]:
    """Judge the run at ``run_dir`` (module docstring); ``pairs`` names (run candidate, baseline
    candidate) pairs to compare when the names differ (a new model against the old). Returns the
    result, the run's report (built with :func:`callbench.report.model.build.build_report`) and the
    loaded run. Raises
    :class:`GateInputError` for a run folder the report cannot read or a ``pairs`` entry naming
    no candidate."""
    from callbench.report.model.load import ReportInputError

    try:
        data = load_run(run_dir)
        base = load_run(baseline_dir) if baseline_dir is not None else None
    except ReportInputError as e:
        raise GateInputError(str(e)) from None
    report = build_report([data], seed=seed, n_samples=n_samples)
    result = GateResult(run=str(run_dir), baseline=str(baseline_dir) if baseline_dir else None,
                        strict=strict, max_drop=max_drop)
    entries = {c.candidate: c.model_dump(mode="json") for c in report.candidates}
    for cand, entry in entries.items():
        for t in thresholds:
            result.decisions.append(judge_threshold(cand, entry, t, strict))
    if base is not None:
        result.differences = differences(data, base)
        if result.differences and not allow_different:
            result.decisions.append(Decision(
                name="comparable baseline", candidate="*", status="failed",
                detail="the runs differ (" + "; ".join(result.differences) + "); pass --allow-different "
                "to compare them anyway"))
            result.exit_code = EXIT_NOT_COMPARABLE
            return result, report, data
        base_report = build_report([base], seed=seed, n_samples=3)  # only its candidate names
        s = report.settings.seed
        for a, b in _pairs(report, base_report, pairs or []):
            comp = paired_comparison(a, _scores(data, a), b, _scores(base, b),
                                     derive_rng(s, "gate", a, b, "overall"), n_samples=n_samples)
            result.comparisons.append(comp)
            name = f"no regression of overall beyond {max_drop:g} points"
            if comp.mean_difference is None or comp.low is None or comp.high is None:
                result.decisions.append(Decision(name=name, candidate=a, status="skipped",
                                                 detail="no scenario completed by both runs"))
                continue
            bad = comp.high < -max_drop
            thin = " (fewer than 10 shared scenarios: a thin comparison)" if comp.n_scenarios < 10 else ""
            result.decisions.append(Decision(
                name=name, candidate=a, status="failed" if bad else "passed",
                detail=(f"run minus baseline on {comp.n_scenarios} shared scenario(s): "
                        f"{comp.mean_difference:+.2f} [{comp.low:+.2f}, {comp.high:+.2f}]; the interval lies "
                        f"{'entirely' if bad else 'not entirely'} below -{max_drop:g}{thin}")))
        if not result.comparisons:
            result.decisions.append(Decision(name="baseline candidates", candidate="*", status="skipped",
                                             detail="no candidate of the run matches one of the baseline"))
    result.exit_code = EXIT_FAILED if result.failed else EXIT_PASSED
    return result, report, data
