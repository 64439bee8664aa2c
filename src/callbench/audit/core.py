"""``callbench audit``: what a bundle's scores can be trusted to measure.

Beyond ``validate`` (whose problems, ``excerpt.partial`` among them, are part of the audit), every
scenario goes through the real episode loop (:func:`callbench.sim.episode.run_episode`) and the real
action-check grading (:func:`callbench.grade.action_checks.grade_action_checks`) with scripted
models (:mod:`callbench.models.scripted`), no network:

- *reference replay*: ``scripted:reference`` plays the scenario's ``reference_path`` against the
  plan-following caller ``scripted:plan``. Every action check must be met (``audit.reference_unmet``
  per unmet check), the call must end normally (``audit.reference_end``), no candidate message may
  carry a protocol error (``audit.reference_error``), and every authored channel event must be
  reached and apply (``audit.channel_not_applied``, ``audit.channel_never_reached``: an ASR
  event anchored on words the caller never says measures nothing). A scenario without a reference
  path cannot be replayed (``audit.reference_missing``).
- *null floor*: the do-nothing candidates :data:`NULL_CANDIDATES` (``scripted:hangup`` ends the call
  at once, ``scripted:talk`` only talks) play the same scenario; :func:`floor_share` is the share of
  the applicable action-check weight each meets (a guarded check whose ``applies_after`` guards
  are unmet is not applicable: it enters neither sum). A scenario over :data:`FLOOR_MAX`
  (``audit.floor_high``) or a bundle mean over :data:`FLOOR_MEAN` (``audit.floor_mean_high``, on
  ``bundle.yaml``) is a problem: its negative checks reward doing nothing.
- *causal reference paths*: every reference argument value is known before its call
  (:func:`callbench.audit.causal.find_noncausal`, ``audit.reference_noncausal``).
- *gaming floor*: the gaming candidates :data:`GAMING_CANDIDATES` play the scenario too and are held
  to the same bounds (``audit.floor_high`` names the scenario, the candidate and the checks met).
- *outcome*: every scenario has an outcome-critical item (or says why not, ``no_critical_reason``:
  otherwise ``audit.no_critical``); the reference replay meets every critical item (its unmet checks
  are ``audit.reference_unmet`` already) and no floor candidate meets any (``audit.critical_floor``,
  naming the candidate and the item): an outcome that doing nothing or gaming reaches measures
  nothing.
- *rule-breaking*: a call that breaks a negative check never meets more weight than no call
  (:func:`callbench.audit.forbidden.find_forbidden_gains`, ``audit.forbidden_above_floor``).
- *leaks*: :func:`callbench.audit.leaks.find_leaks` (``audit.leak``).
- *judges on known answers* (optional): the reference, null-floor and contrastive traces
  (:mod:`callbench.audit.contrast`) graded by the judges (:mod:`callbench.audit.judges`); a judge
  that fails the validation gate (:mod:`callbench.audit.validation`) is a problem
  (``audit.judge_gate``, located at the option that named the judge: ``--task-judge`` or
  ``--conversation-judge``, :attr:`AuditJudges.sources`).

Every problem is a :class:`~callbench.bundle.loader.Problem` located at a file and field path (or,
for a judge, at its command-line option).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection
from typing import Literal

from pydantic import BaseModel, Field

from callbench.audit.causal import find_noncausal
from callbench.audit.contrast import derive_contrast_traces
from callbench.audit.forbidden import find_forbidden_gains
from callbench.audit.judges import AuditJudges, JudgeAudit, audit_judges
from callbench.audit.leaks import find_leaks
from callbench.audit.store import ContrastCount
from callbench.bundle.loader import Problem
from callbench.bundle.models import CONTRAST_KINDS, Bundle, LoadedAgent, Scenario
from callbench.bundle.validate.audits import bundle_files, validate_loaded
from callbench.grade.action_checks import grade_action_checks
from callbench.grade.models import GradedItem, Label
from callbench.models.base import ModelSettings
from callbench.models.scripted.models import GAMING_SPECS, create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import EndReason, Trace

REFERENCE_CANDIDATE = "scripted:reference"
CALLER = "scripted:plan"
NULL_CANDIDATES = ("scripted:hangup", "scripted:talk")
"""The do-nothing candidates of the null floor: one hangs up at once, one only talks."""
GAMING_CANDIDATES = GAMING_SPECS
"""The gaming candidates of the floor (:mod:`callbench.models.scripted.gaming`): junk arguments for
every lookup tool, junk for every tool that does not end the call then hang-up, "it is done"
without any call, and every tool that does not end the call, for several turns, with the values
the caller has said."""
FLOOR_CANDIDATES = NULL_CANDIDATES + GAMING_CANDIDATES
GENERATION_FLOOR = tuple(c for c in FLOOR_CANDIDATES if c != "scripted:caller-values")
"""The floor a generated or imported draft is held to before it is written: every floor agent but
the one that uses the caller's stated values, whose bound drafts from a real call (checks drafted
from the call's own lookups) cannot meet before a person pins the arguments that matter in review;
``callbench audit`` holds every scenario of a bundle to the whole floor (docs/decisions.md)."""
"""Every candidate of the floor, in report order."""
FLOOR_MEAN = 0.10
FLOOR_MAX = 0.25
"""Null-floor bounds: a do-nothing candidate meets at most 10% of the applicable
action-check weight on average over the scenarios audited, and at most 25% in any one."""
AUDIT_SEED = 20260314
"""Run seed of the audit's episodes (channel noise and backend draws derive from it)."""


class CheckOutcome(BaseModel):
    """One action check in one audited episode: ``label`` met / not_met / not_applicable;
    ``critical``: the check decides the episode's outcome."""

    id: str
    weight: int
    label: Literal["met", "not_met", "not_applicable"]
    reason: str = ""
    critical: bool = False


class ChannelTally(BaseModel):
    """Authored channel events of one episode: applied, reached but not applied, never reached."""

    applied: int = 0
    not_applied: int = 0
    never_reached: int = 0


class EpisodeAudit(BaseModel):
    """One audited episode: the candidate spec, how the call ended, its action checks, its authored
    channel events, and ``share`` = met weight / applicable weight (0.0 when nothing applies)."""

    candidate: str
    end_reason: str
    skip_reason: str | None = None
    checks: list[CheckOutcome] = Field(default_factory=list)
    channel: ChannelTally = Field(default_factory=ChannelTally)
    met_weight: int = 0
    applicable_weight: int = 0
    share: float = 0.0


class ScenarioAudit(BaseModel):
    """The audit of one scenario: its file, the reference replay (None without a reference path)
    and the null-floor episode of each do-nothing candidate (by spec)."""

    agent_id: str
    scenario_id: str
    file: str
    reference: EpisodeAudit | None = None
    floor: dict[str, EpisodeAudit] = Field(default_factory=dict)

    @property
    def reference_met(self) -> bool:
        """True when the reference replay met every action check."""
        return self.reference is not None and all(c.label == "met" for c in self.reference.checks)


class FloorSummary(BaseModel):
    """One do-nothing candidate over the audited scenarios: mean and max share (0..1) and the
    scenario with the max share (None when every share is 0)."""

    mean: float
    max: float
    max_scenario: str | None
    scenarios: int


class NullFloor(BaseModel):
    """The null floor of the audited scenarios: a summary per do-nothing candidate and the bounds."""

    candidates: dict[str, FloorSummary] = Field(default_factory=dict)
    mean_bound: float = FLOOR_MEAN
    max_bound: float = FLOOR_MAX


class AuditReport(BaseModel):
    """What :func:`audit_bundle` found. ``problems`` are located; ``judges`` is set when judges were
    audited; ``traces`` (not serialised) holds every audited episode's trace for the judge audit."""

    bundle_name: str
    bundle_version: str
    bundle_hash: str
    scenarios: list[ScenarioAudit] = Field(default_factory=list)
    null_floor: NullFloor = Field(default_factory=NullFloor)
    problems: list[Problem] = Field(default_factory=list)
    judges: JudgeAudit | None = None
    traces: list[Trace] = Field(default_factory=list, exclude=True)

    def to_json(self) -> dict[str, object]:
        """The ``--json`` shape: ``{"bundle": {...}, "scenarios": [...], "null_floor": {...},
        "problems": [...]}`` plus ``"judges"`` when judges were audited."""
        out: dict[str, object] = {
            "bundle": {"name": self.bundle_name, "version": self.bundle_version, "hash": self.bundle_hash},
            "scenarios": [s.model_dump(mode="json") for s in self.scenarios],
            "null_floor": self.null_floor.model_dump(mode="json"),
            "problems": [p.model_dump(mode="json") for p in self.problems],
        }
        if self.judges is not None:
            out["judges"] = self.judges.model_dump(mode="json")
        return out


def floor_share(items: list[GradedItem]) -> tuple[int, int, float]:
    """(met weight, applicable weight, share) of action-check items: share = sum of the weights of
    met checks / sum of the weights of applicable checks (not_applicable items enter neither sum),
    0.0 when no check applies."""
    applicable = [i for i in items if i.label != Label.NOT_APPLICABLE]
    total = sum(i.weight for i in applicable)
    met = sum(i.weight for i in applicable if i.label == Label.MET)
    return met, total, (met / total if total else 0.0)


async def _episode(
    bundle: Bundle, agent: LoadedAgent, scen: Scenario, spec: str
) -> tuple[Trace, EpisodeAudit]:
    trace = await run_episode(
        agent,
        scen,
        candidate=create_scripted(spec, ModelSettings(seed=AUDIT_SEED), bundle),
        caller=create_scripted(CALLER, None, bundle),
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        episode_id=f"audit-{scen.id}-{spec.removeprefix('scripted:')}",
        run_seed=AUDIT_SEED,
        repeat=0,
    )
    items = [] if trace.skipped else grade_action_checks(trace, scen, agent)
    met, total, share = floor_share(items)
    authored = [e for ct in trace.caller_turns for e in ct.channel_events if e.source == "authored"]
    tally = ChannelTally(
        applied=sum(e.applied for e in authored),
        not_applied=sum(not e.applied for e in authored),
        never_reached=len(trace.unreached_channel_events),
    )
    checks = [
        CheckOutcome(id=i.id, weight=i.weight, label=str(i.label), reason=i.reason, critical=i.critical)
        for i in items
    ]
    return trace, EpisodeAudit(
        candidate=spec,
        end_reason=str(trace.end_reason),
        skip_reason=trace.skip_reason,
        checks=checks,
        channel=tally,
        met_weight=met,
        applicable_weight=total,
        share=share,
    )


def _reference_problems(scen: Scenario, trace: Trace, ep: EpisodeAudit, file: str) -> list[Problem]:
    out: list[Problem] = []
    if trace.skipped:
        return [
            Problem(
                file=file,
                path="reference_path",
                code="audit.reference_end",
                message=f"the reference replay was skipped: {trace.skip_reason}",
            )
        ]
    if trace.end_reason not in (EndReason.CALL_ENDED, EndReason.CALLER_DONE):
        out.append(
            Problem(
                file=file,
                path="reference_path",
                code="audit.reference_end",
                message=f"the reference replay ended with {trace.end_reason} (expected the agent "
                "ending the call, or the caller finishing its plan)",
            )
        )
    for m in trace.messages:
        if m.error:
            out.append(
                Problem(
                    file=file,
                    path="reference_path",
                    code="audit.reference_error",
                    message=f"message {m.index}: {m.error}"[:400],
                )
            )
    index = {c.id: i for i, c in enumerate(scen.action_checks)}
    for c in ep.checks:
        if c.label != "met":
            out.append(
                Problem(
                    file=file,
                    path=f"action_checks.{index[c.id]}",
                    code="audit.reference_unmet",
                    message=f"the reference replay leaves check {c.id!r} {c.label}: {c.reason}"[:400],
                )
            )
    for ct in trace.caller_turns:
        for e in ct.channel_events:
            if e.source == "authored" and not e.applied:
                out.append(
                    Problem(
                        file=file,
                        path=e.program_path or "channel",
                        code="audit.channel_not_applied",
                        message=f"caller turn {ct.index}: the {e.kind} event on {e.span!r} does not "
                        f"apply on the reference replay: {e.detail}"[:400],
                    )
                )
    for e in trace.unreached_channel_events:
        out.append(
            Problem(
                file=file,
                path=e.program_path or "channel",
                code="audit.channel_never_reached",
                message=f"the {e.kind} event for caller turn {e.turn} is never reached on the "
                f"reference replay (the call has fewer caller turns)",
            )
        )
    return out


def _summaries(scenarios: list[ScenarioAudit]) -> NullFloor:
    floor = NullFloor()
    for spec in FLOOR_CANDIDATES:
        shares = {s.scenario_id: s.floor[spec].share for s in scenarios if spec in s.floor}
        if not shares:
            continue
        worst = max(shares, key=lambda k: (shares[k], k))
        floor.candidates[spec] = FloorSummary(
            mean=statistics.fmean(shares.values()),
            max=shares[worst],
            max_scenario=worst if shares[worst] > 0 else None,
            scenarios=len(shares),
        )
    return floor


async def audit_bundle(
    bundle: Bundle,
    *,
    scenario_ids: Collection[str] | None = None,
    judges: AuditJudges | None = None,
    static_problems: list[Problem] | None = None,
    floor_candidates: tuple[str, ...] = FLOOR_CANDIDATES,
) -> AuditReport:
    """Audit ``bundle`` (or only the scenarios ``scenario_ids``; only those are replayed).

    Returns an :class:`AuditReport`: per scenario the reference replay and the null floor, the
    bundle's null floor per do-nothing candidate, and every located problem: validate's (scoped to
    the files of the audited scenarios and their agents when ``scenario_ids`` is given) and the
    audit's own (codes in the module docstring). With ``judges``, the reference-replay and
    null-floor traces are also graded by them and ``report.judges`` holds each judge's accuracy on
    these known answers (:func:`callbench.audit.judges.audit_judges`). Raises ``KeyError`` for
    a scenario id not in the bundle. ``static_problems``: validate's problems when the caller has
    them already (``callbench audit`` validates the folder first), so they are not computed twice.
    ``floor_candidates``: the floor agents that play each scenario (all of them by default).
    Never raises for bad bundle content: an episode that cannot be
    run or graded is an ``audit.internal`` problem on its scenario file.
    """
    pairs = bundle.scenarios()
    if scenario_ids is not None:
        known = {s.id for _, s in pairs}
        missing = sorted(set(scenario_ids) - known)
        if missing:
            raise KeyError(f"scenario(s) not in bundle {bundle.meta.name!r}: {', '.join(missing)}")
        pairs = [(a, s) for a, s in pairs if s.id in set(scenario_ids)]
    files = bundle_files(bundle)
    report = AuditReport(
        bundle_name=bundle.meta.name, bundle_version=bundle.meta.version, bundle_hash=bundle.content_hash
    )
    static = validate_loaded(bundle) if static_problems is None else list(static_problems)
    if scenario_ids is not None:
        keep = {files.scenario(a, s) for a, s in pairs} | {files.agent(a) for a, _ in pairs}
        keep |= {files.prompt(a) for a, _ in pairs}
        static = [p for p in static if p.file in keep]
    report.problems += static
    for agent, scen in pairs:
        sfile = files.scenario(agent, scen)
        names = {"agent": files.agent(agent), "prompt": files.prompt(agent), "scenario": sfile}
        sa = ScenarioAudit(agent_id=agent.config.id, scenario_id=scen.id, file=sfile)
        report.problems += find_leaks(agent, scen, names)
        report.problems += find_forbidden_gains(agent, scen, sfile)
        specs = ([REFERENCE_CANDIDATE] if scen.reference_path else []) + list(floor_candidates)
        if not scen.reference_path:
            report.problems.append(
                Problem(
                    file=sfile,
                    path="reference_path",
                    code="audit.reference_missing",
                    message="no reference path: the scenario's correct call cannot "
                    "be replayed, so nothing shows its checks can be met",
                )
            )
        if not scen.critical_check_ids and not scen.no_critical_reason.strip():
            report.problems.append(
                Problem(
                    file=sfile, path="action_checks", code="audit.no_critical",
                    message=f"{scen.id}: no outcome-critical check (a state check, a check with "
                    "diagnostic outcome_reached, or one marked critical: true), so its episodes have "
                    "no outcome; mark the check(s) that show the caller got what they called for, or "
                    "give no_critical_reason",
                )
            )
        for spec in specs:
            try:
                trace, ep = await _episode(bundle, agent, scen, spec)
            except Exception as e:  # never a traceback on bundle content, whatever the bug (as validate)
                report.problems.append(
                    Problem(
                        file=sfile,
                        code="audit.internal",
                        message=f"the {spec} episode cannot be run or graded: {type(e).__name__}: {e}"[:400],
                    )
                )
                continue
            report.traces.append(trace)
            if spec == REFERENCE_CANDIDATE:
                sa.reference = ep
                report.problems += _reference_problems(scen, trace, ep, sfile)
                if not trace.skipped:
                    report.problems += find_noncausal(agent, scen, trace, sfile)
            else:
                sa.floor[spec] = ep
                for c in ep.checks:
                    if c.critical and c.label == "met":
                        report.problems.append(
                            Problem(
                                file=sfile, path=f"action_checks.{c.id}", code="audit.critical_floor",
                                message=f"{scen.id}: {spec} meets the outcome-critical check {c.id!r} "
                                "(a floor agent must reach no outcome): guard it with applies_after on "
                                "a check only the right call meets, or pin the arguments that matter",
                            )
                        )
                if ep.share > FLOOR_MAX:
                    met = ", ".join(f"{c.id} ({c.weight})" for c in ep.checks if c.label == "met")
                    report.problems.append(
                        Problem(
                            file=sfile,
                            path="action_checks",
                            code="audit.floor_high",
                            message=f"{scen.id}: {spec} meets {ep.share:.0%} of the applicable "
                            f"action-check weight (over {FLOOR_MAX:.0%}) with {met}: guard the negative "
                            "checks with applies_after on a check that only reaching the scenario's "
                            "record meets",
                        )
                    )
        report.scenarios.append(sa)
    report.null_floor = _summaries(report.scenarios)
    # the mean bound is the bundle's: an audit of some scenarios (the generator audits each new one)
    # holds each to the per-scenario bound only, or one scenario would meet a mean of itself
    for spec, summary in report.null_floor.candidates.items() if scenario_ids is None else ():
        if summary.mean > FLOOR_MEAN:
            report.problems.append(
                Problem(
                    file=files.bundle_file,
                    code="audit.floor_mean_high",
                    message=f"{spec} meets {summary.mean:.0%} of the applicable action-check weight "
                    f"on average over {summary.scenarios} scenario(s) (over {FLOOR_MEAN:.0%})",
                )
            )
    if judges is not None:
        report.judges = await _judge_validation(bundle, report, judges)
        for role, acc in report.judges.judges.items():
            if not acc.gate.passed:
                report.problems.append(
                    Problem(  # the judges come from the command line, not from the bundle
                        file=judges.sources.get(role, role),
                        code="audit.judge_gate",
                        message=f"the {role.replace('_', ' ')} {acc.judge.spec} fails the judge-validation "
                        f"gate: {'; '.join(acc.gate.reasons)}",
                    )
                )
    return report


async def _judge_validation(bundle: Bundle, report: AuditReport, judges: AuditJudges) -> JudgeAudit:
    """Derive the contrastive traces from every reference replay (:mod:`callbench.audit.contrast`),
    then grade them with the reference and floor traces (:func:`audit_judges`). The floor agents
    whose scores with these judges are kept are those the audit played (every key of
    ``ScenarioAudit.floor``: the null candidates and any other floor agent added there)."""
    counts: dict[str, ContrastCount] = {k: ContrastCount() for k in CONTRAST_KINDS}
    derived: list[Trace] = []
    for ref in [t for t in report.traces if t.candidate.spec == REFERENCE_CANDIDATE and not t.skipped]:
        agent, scen = bundle.scenario(ref.scenario_id)
        for c in await derive_contrast_traces(bundle, agent, scen, ref, caller=CALLER, run_seed=AUDIT_SEED):
            if c.trace is None:
                counts[c.kind].not_derived.append(f"{scen.id}: {c.note}")
            else:
                counts[c.kind].derived += 1
                derived.append(c.trace)
    floor_agents = sorted({spec for s in report.scenarios for spec in s.floor})
    return await audit_judges(
        bundle, report.traces + derived, judges, floor_candidates=floor_agents, contrast=counts,
        null_candidates=NULL_CANDIDATES,
    )
