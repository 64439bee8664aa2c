"""When may runs be compared? (paper: "Fair comparisons therefore run every candidate against the
same caller model, prompt, and settings"; so: refuse different bundle hashes, flag caller or
judge model, prompt or settings differences.)

- Different bundle hashes: :class:`UnfairComparisonError` (the CLI exits 2). Scores on different
  scenarios, fixtures or criteria are not comparable at all.
- Caller spec/settings that differ between run manifests or between traces; caller system
  prompts that differ for the same scenario; task or conversation judge spec/settings that differ
  between the chosen grade sets; grade sets from different code versions (judge prompts live in
  code); different cutoffs or loop settings: a :class:`FairnessFlag` each, shown prominently.
- Any role that ran on the embedded smoke-test model is listed by :func:`smoke_test_roles`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from pydantic import BaseModel

from callbench.models.base import ModelSettings
from callbench.report.model.load import RunData
from callbench.trace import RoleInfo


class UnfairComparisonError(Exception):
    """Runs that must not be combined (different bundle hashes)."""


class FairnessFlag(BaseModel):
    """One difference between runs that makes their comparison unfair or doubtful."""

    kind: (
        str  # caller | caller_prompt | task_judge | conversation_judge | judge_code | cutoff | loop_settings
    )
    message: str


def role_key(role: RoleInfo) -> str:
    """Identity of a role for fairness: spec and settings (the timeout does not change outputs)."""
    return json.dumps(
        {"spec": role.spec, "settings": role.settings.model_dump(mode="json", exclude={"timeout_s"})},
        sort_keys=True,
    )


_DEFAULT_SETTINGS: dict[str, Any] = ModelSettings().model_dump(mode="json")


def describe_role(role: RoleInfo) -> str:
    """``spec`` plus non-default settings, header values hidden (they may hold credentials)."""
    # exclude_defaults does not drop fields whose serializer rewrites them (base_url, extra_headers),
    # so compare with the defaults' own serialised form
    defaults = _DEFAULT_SETTINGS
    dumped: dict[str, Any] = role.settings.model_dump(mode="json")
    settings = {k: v for k, v in dumped.items() if k not in defaults or v != defaults[k]}
    if "extra_headers" in settings:
        settings["extra_headers"] = sorted(settings["extra_headers"])
    extra = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
    smoke = " [embedded smoke-test model]" if role.embedded_smoke_test_model else ""
    return f"{role.spec}{' (' + extra + ')' if extra else ''}{smoke}"


def check_bundles(runs: list[RunData]) -> None:
    """Raise :class:`UnfairComparisonError` when the runs' bundle hashes differ."""
    hashes = {r.manifest.bundle_hash for r in runs}
    if len(hashes) > 1:
        lines = "; ".join(f"{r.run_dir}: {r.manifest.bundle_hash[:16]}" for r in runs)
        raise UnfairComparisonError(
            f"refusing to combine runs of different bundles (bundle hashes differ: {lines}); "
            "report them separately"
        )


def _differs(kind: str, what: str, by_source: dict[str, set[str]]) -> FairnessFlag | None:
    values = {v for vs in by_source.values() for v in vs}
    if len(values) <= 1:
        return None
    detail = "; ".join(f"{src}: {' | '.join(sorted(vs))}" for src, vs in by_source.items())
    return FairnessFlag(kind=kind, message=f"{what} differs: {detail}")


def check_fairness(runs: list[RunData]) -> list[FairnessFlag]:
    """Check bundles (raises :class:`UnfairComparisonError`) and return every flagged difference
    between the runs' callers, caller prompts, judges, judge code, cutoffs and loop settings."""
    check_bundles(runs)
    flags: list[FairnessFlag] = []

    callers: dict[str, set[str]] = defaultdict(set)
    caller_keys: set[str] = set()
    for run in runs:
        roles = [run.manifest.caller, *run.facts.callers]
        for role in roles:
            caller_keys.add(role_key(role))
            callers[run.manifest.run_id].add(describe_role(role))
    if len(caller_keys) > 1:
        flag = _differs("caller", "caller model or settings", callers)
        flags.append(flag or FairnessFlag(kind="caller", message="caller settings differ between runs"))

    prompts: dict[tuple[str, str], set[str]] = defaultdict(set)
    for run in runs:
        for key, texts in run.facts.caller_prompts.items():
            prompts[key] |= texts
    differing = sorted(k for k, v in prompts.items() if len(v) > 1)
    if differing:
        examples = ", ".join(f"{a}/{s}" for a, s in differing[:3])
        flags.append(
            FairnessFlag(
                kind="caller_prompt",
                message=f"caller prompt differs for the same scenario in {len(differing)} scenario(s), "
                f"e.g. {examples}",
            )
        )

    for kind, label in (("task_judge", "task judge"), ("conversation_judge", "conversation judge")):
        keys = {role_key(getattr(r.grade_set, kind)) for r in runs}
        if len(keys) > 1:
            by_run = {r.manifest.run_id: {describe_role(getattr(r.grade_set, kind))} for r in runs}
            flags.append(
                _differs(kind, f"{label} model or settings", by_run)
                or FairnessFlag(kind=kind, message=f"{label} settings differ between runs")
            )

    code = {r.manifest.run_id: {r.grade_set.code_version or "unknown"} for r in runs}
    flag = _differs("judge_code", "grading code version (judge prompts may differ)", code)
    if flag:
        flags.append(flag)
    cutoffs = {r.manifest.run_id: {f"{r.grade_set.cutoff:g}"} for r in runs}
    flag = _differs("cutoff", "pass cutoff", cutoffs)
    if flag:
        flags.append(flag)
    loops = {r.manifest.run_id: {json.dumps(r.manifest.loop_settings, sort_keys=True)} for r in runs}
    flag = _differs("loop_settings", "episode loop settings", loops)
    if flag:
        flags.append(flag)
    return flags


def smoke_test_roles(runs: list[RunData]) -> list[str]:
    """Every role (with its run) that ran on the embedded smoke-test model, e.g.
    ``"caller (run r1)"``; empty when none did."""
    found: set[str] = set()
    for run in runs:
        rid = run.manifest.run_id
        m = run.manifest
        named: list[tuple[str, RoleInfo]] = [
            ("caller", m.caller),
            # the judges of the reported grade set (those of the run manifest graded it too, or
            # were replaced by a regrade whose labels are not the ones shown)
            ("task judge", run.grade_set.task_judge),
            ("conversation judge", run.grade_set.conversation_judge),
            *((f"candidate {c.spec}", c) for c in m.candidates),
            *((f"candidate {c.spec}", c) for c in run.facts.candidates),
            *(("caller", c) for c in run.facts.callers),
        ]
        for name, role in named:
            if role.embedded_smoke_test_model:
                found.add(f"{name} (run {rid})")
    return sorted(found)


REFERENCE_SPEC = "scripted:reference"
"""The candidate that replays each scenario's reference path
(:class:`callbench.models.scripted.models.ReferenceCandidate`): a scripted reference, not a model."""


def reference_candidates(runs: list[RunData]) -> list[str]:
    """Every candidate (with its run) that is the scripted reference path, e.g.
    ``"candidate scripted:reference (run r1)"``; empty when no run has one."""
    found = {
        f"candidate {c.spec} (run {run.manifest.run_id})"
        for run in runs
        for c in run.manifest.candidates
        if c.spec == REFERENCE_SPEC
    }
    return sorted(found)


def stand_in_judges(runs: list[RunData]) -> list[str]:
    """Every judge of a reported grade set that is a scripted stand-in (``scripted:*``: fixed
    labels or replies from a file, no model), e.g. ``"task judge scripted:met (run r1)"``; empty
    when every judge is a model. Their grades show the pipeline works; they measure nothing about
    quality (under ``scripted:met`` an agent that hangs up at once passes most calls)."""
    found = set()
    for run in runs:
        for name, role in (("task judge", run.grade_set.task_judge),
                           ("conversation judge", run.grade_set.conversation_judge)):
            if role.spec.startswith("scripted:"):
                found.add(f"{name} {role.spec} (run {run.manifest.run_id})")
    return sorted(found)


def deployed_notes(runs: list[RunData]) -> list[str]:
    """One line per deployed candidate of ``runs`` (a candidate that is an endpoint, not a model:
    ``runfolder.manifest.RunManifest.deployed_configs``): whether its configuration was read and
    checked against the bundle's agent before the run (with the hash recorded) or could not be
    read (its tools and prompt were not checked), and what no adapter can observe of it
    (:data:`callbench.models.deployed.base.UNOBSERVED`). Empty when no run has one."""
    from callbench.models.deployed.base import UNOBSERVED

    blind = ", ".join(u.replace("_", " ") for u in UNOBSERVED)
    out: list[str] = []
    for run in runs:
        for spec, digest in sorted(run.manifest.deployed_configs.items()):
            checked = (f"its configuration was read and its tools checked against the bundle before "
                       f"the run (sha256 {digest[:12]})" if digest else
                       "its configuration cannot be read on this platform, so its tools and prompt were "
                       "not checked against the bundle")
            out.append(f"{spec} (run {run.manifest.run_id}) is a deployed agent: {checked}; callbench "
                       f"cannot observe its {blind}, so no token cost is shown for it.")
    return out
