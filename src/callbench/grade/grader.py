"""Grade traces: one trace (:func:`grade_trace`), one trace into a grade set as its episode finishes
(:func:`grade_into_set`, for the runner), or a whole run folder into a new grade set
(:func:`grade_run`, for ``callbench grade``).

Grading reads only trace files and the bundle (DESIGN.md: "grade reads trace files, not the
executor"), so saved runs can be regraded with another judge without rerunning a call. Each
regrade writes a NEW grade set ``RUN_DIR/grades/<grade_set_id>/`` (``grade_set.json`` plus
``episodes/<episode_id>.json.gz``) and leaves earlier grade sets in place.

Grade set files and ids: :mod:`callbench.grade.store`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from callbench.bundle.loader import BundleError
from callbench.bundle.models import Bundle, Scenario
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.action_checks import GradeError, grade_action_checks
from callbench.grade.judges import run_conversation_judge, run_task_judge
from callbench.grade.models import DEFAULT_LATENCY_BUDGET_S, EpisodeGrade, PassRule
from callbench.grade.prompts import PROMPT_VERSION
from callbench.grade.rubric import DEFAULT_RUBRIC, Rubric
from callbench.grade.scoring import DEFAULT_CUTOFF, DEFAULT_PASS_RULE, episode_grade
from callbench.grade.store import (
    create_grade_set,
    episode_path,
    finalize_grade_set,
    grade_set_id_for,
    grade_set_summary,
    iter_episode_grades,
    load_episode_grades,
    load_grade_set,
    read_episode_grade,
    read_run_manifest,
    register_grade_set,
    save_episode_grade,
)
from callbench.grade.voice_check import grade_voice_confirmation
from callbench.models.base import ModelClient, ModelSettings, Role
from callbench.models.faults import RoleFaults, collect_faults
from callbench.runfolder import episode_files
from callbench.runfolder.manifest import MANIFEST, grades_dir, traces_dir
from callbench.trace import RoleInfo, Trace, load_trace

__all__ = [
    "GradeError",
    "create_grade_set",
    "finalize_grade_set",
    "grade_into_set",
    "grade_run",
    "grade_set_id_for",
    "grade_set_summary",
    "grade_trace",
    "load_episode_grades",
    "load_grade_set",
    "register_grade_set",
]


def _scenario(bundle: Bundle, trace: Trace) -> Scenario:
    agent = bundle.agents.get(trace.agent_id)
    scen = next((s for s in agent.scenarios if s.id == trace.scenario_id), None) if agent else None
    if scen is None:
        raise GradeError(
            f"episode {trace.episode_id}: scenario {trace.agent_id}/{trace.scenario_id} is not in "
            f"bundle {bundle.meta.name!r}"
        )
    return scen


def _check_hash(bundle: Bundle, trace: Trace) -> None:
    if trace.bundle_hash != bundle.content_hash:
        raise GradeError(
            f"episode {trace.episode_id}: its trace was made with bundle hash {trace.bundle_hash[:12]}, "
            f"but the bundle at {bundle.root} has hash {bundle.content_hash[:12]}; "
            "grade it with the bundle it was run on"
        )


async def grade_trace(
    trace: Trace,
    bundle: Bundle,
    task_judge: ModelClient,
    conversation_judge: ModelClient,
    cutoff: float = DEFAULT_CUTOFF,
    *,
    grade_set_id: str = "",
    rubric: Rubric = DEFAULT_RUBRIC,
    pass_rule: PassRule = DEFAULT_PASS_RULE,
    latency_budget_s: float | None = None,
) -> EpisodeGrade:
    """Grade one trace: action checks, the task judge and the conversation judge (concurrently);
    the outcome and the pass verdict under ``pass_rule`` (:func:`~callbench.grade.scoring.verdict`;
    ``latency_budget_s``: its budget under ``outcome_overall_latency``).

    Returns an :class:`EpisodeGrade` (``skipped=True`` with no scores for a skipped trace; no judge
    is called then). Judge failures become judge-error items, never exceptions. Raises
    :class:`GradeError` when the trace's bundle hash differs from ``bundle``'s or its scenario is
    not in the bundle.
    """
    _check_hash(bundle, trace)
    scenario = _scenario(bundle, trace)
    if trace.skipped:
        return episode_grade(trace, [], grade_set_id=grade_set_id, cutoff=cutoff, pass_rule=pass_rule,
                             latency_budget_s=latency_budget_s)
    checks = grade_action_checks(trace, scenario, bundle.scenario(scenario.id)[0])
    checks += grade_voice_confirmation(trace)  # only traces with voice events get this item
    with collect_faults() as ledger:
        (task_items, task_out), (conv_items, conv_out) = await asyncio.gather(
            run_task_judge(trace, scenario, task_judge),
            run_conversation_judge(trace, scenario, conversation_judge, rubric),
        )
    grade = episode_grade(trace, checks + task_items + conv_items, grade_set_id=grade_set_id, cutoff=cutoff,
                          pass_rule=pass_rule, scenario=scenario, latency_budget_s=latency_budget_s)
    grade.faults = ledger.snapshot()
    grade.usage = {
        k: o.usage for k, o in (("task_judge", task_out), ("conversation_judge", conv_out)) if o.attempts
    }
    grade.judge_attempts = {"task_judge": task_out.attempts, "conversation_judge": conv_out.attempts}
    grade.judge_reasks = {
        k: o.reask for k, o in (("task_judge", task_out), ("conversation_judge", conv_out)) if o.reask
    }
    grade.judge_timings = {
        k: o.timings for k, o in (("task_judge", task_out), ("conversation_judge", conv_out)) if o.timings
    }
    return grade


async def grade_into_set(
    run_dir: Path,
    grade_set_id: str,
    trace: Trace,
    bundle: Bundle,
    task_judge: ModelClient,
    conversation_judge: ModelClient,
) -> EpisodeGrade:
    """Grade one trace into an existing grade set (cutoff and rubric from its ``grade_set.json``)
    and write ``episodes/<episode_id>.json.gz`` atomically. For the runner, as each episode finishes.
    An episode graded again because it was not graded keeps the judge fault counts of its earlier
    attempts (the set's ledger counts every request made for it)."""
    gs = load_grade_set(run_dir, grade_set_id)
    rubric = Rubric.model_validate(gs.rubric) if gs.rubric else DEFAULT_RUBRIC
    grade = await grade_trace(
        trace, bundle, task_judge, conversation_judge, gs.cutoff, grade_set_id=grade_set_id, rubric=rubric,
        pass_rule=gs.pass_rule, latency_budget_s=gs.latency_budget_s,
    )
    path = episode_path(run_dir, grade_set_id, trace.episode_id)
    if path.is_file():  # graded again (it was not graded): keep the judge requests made before
        try:
            before: EpisodeGrade | None = read_episode_grade(path)
        except GradeError:
            before = None
        if before is not None and before.not_graded and before.trace_sha256 == grade.trace_sha256:
            for role, counts in before.faults.items():
                grade.faults.setdefault(role, RoleFaults()).add(counts)
    save_episode_grade(run_dir, grade)
    return grade


# ---------------------------------------------------------------- a whole run


def _resolve_bundle_path(run_dir: Path, bundle_path: str) -> Path:
    p = Path(bundle_path)
    if not p.is_absolute() and not p.exists() and (run_dir / p).exists():
        return run_dir / p
    return p


def _role(client: ModelClient) -> RoleInfo:
    return RoleInfo(
        spec=client.spec,
        settings=client.settings,
        embedded_smoke_test_model=bool(getattr(client, "embedded_smoke_test_model", False)),
    )


def make_judge_client(spec: str, settings: ModelSettings, role: Role) -> ModelClient:
    """A judge client from a model spec through the model registry (``role`` routes
    ``scripted:file:`` specs to the judge script reader). Raises :class:`GradeError` naming the spec
    when it cannot be served (unknown provider, missing key, missing local model)."""
    from callbench.models.registry import create_client

    try:
        return create_client(spec, settings, role=role)
    except (ValueError, KeyError, OSError) as e:
        raise GradeError(f"cannot create the {role.replace('_', ' ')} {spec!r}: {e}") from None


def _judge(
    given: ModelClient | str | None, settings: ModelSettings | None, recorded: RoleInfo, role: Role
) -> tuple[ModelClient, bool]:
    if given is not None and not isinstance(given, str):
        return given, False
    spec = given or recorded.spec
    if settings is None:
        settings = recorded.settings if spec == recorded.spec else ModelSettings()
    return make_judge_client(spec, settings, role), True


def _read_trace(path: Path) -> Trace:
    """One trace file (either form); raises :class:`GradeError` naming it when unreadable."""
    try:
        return load_trace(path)
    except ValueError as e:
        raise GradeError(str(e)[:500]) from None


async def grade_run(
    run_dir: Path,
    *,
    task_judge: ModelClient | str | None = None,
    conversation_judge: ModelClient | str | None = None,
    task_judge_settings: ModelSettings | None = None,
    conversation_judge_settings: ModelSettings | None = None,
    cutoff: float | None = None,
    rubric: Rubric = DEFAULT_RUBRIC,
    concurrency: int = 4,
    bundle: Bundle | None = None,
    on_episode: Callable[[EpisodeGrade], Any] | None = None,
    continue_latest: bool = True,
    pass_rule: PassRule | None = None,
) -> str:
    """Grade every trace of ``RUN_DIR`` into a new grade set and return its id.

    Judges: a :class:`ModelClient`, a spec (created through the model registry with the given
    settings, or the run's recorded settings when the spec equals the recorded one), or None for
    the judges recorded in the run manifest. The bundle is loaded from the manifest's
    ``bundle_path`` (relative paths also tried under ``RUN_DIR``) unless given. Refuses with
    :class:`GradeError` when the folder is not a run, a trace is unreadable, or the bundle's
    content hash differs from the manifest's or any trace's. ``on_episode`` is called with each
    episode grade as it is written. Earlier grade sets are left in place; the new id is appended
    to the manifest's ``grade_sets``. ``cutoff`` (the pass mark on the overall score): None keeps
    the run's own (:func:`run_cutoff`), so a regrade never resets a run made with ``--cutoff 95``;
    ``pass_rule`` likewise (None: the run's own, :func:`run_pass_rule`).

    With ``continue_latest`` (the default), when the run's latest grade set was made with the same
    judges, settings, cutoff and rubric and still lacks some episodes or holds episodes that were
    *not graded* (a judge outage), only those are graded, into that set, and its
    id is returned; a complete latest set is never touched (the run is regraded into a new set).
    """
    run_dir = Path(run_dir)
    manifest = read_run_manifest(run_dir)
    if bundle is None:
        path = _resolve_bundle_path(run_dir, manifest.bundle_path)
        try:
            bundle = load_bundle(path)
        except FileNotFoundError:
            raise GradeError(
                f"{run_dir}/{MANIFEST}: bundle_path {manifest.bundle_path!r} is not a folder"
            ) from None
        except BundleError as e:
            raise GradeError(f"bundle {path} does not load: {e}") from None
    if bundle.content_hash != manifest.bundle_hash:
        raise GradeError(
            f"the bundle at {bundle.root} has hash {bundle.content_hash[:12]}, but run {manifest.run_id} "
            f"was made with {manifest.bundle_hash[:12]}; grade it with the bundle it was run on"
        )
    if cutoff is None:
        cutoff = run_cutoff(run_dir, manifest.grade_sets)
    if pass_rule is None:
        pass_rule = run_pass_rule(run_dir, manifest.grade_sets)
    # Traces are streamed: checked one at a time here, before any is graded, then
    # read again by the grading workers; none is kept, so memory does not grow with the run.
    files = episode_files.paths(traces_dir(run_dir))
    for path in files.values():
        t = _read_trace(path)
        _check_hash(bundle, t)
        _scenario(bundle, t)
    del t
    tj, own_t = _judge(task_judge, task_judge_settings, manifest.task_judge, "task_judge")
    cj, own_c = _judge(
        conversation_judge, conversation_judge_settings, manifest.conversation_judge, "conversation_judge"
    )
    try:
        resumed = (
            _continuable(run_dir, manifest.grade_sets, _role(tj), _role(cj), cutoff, rubric, list(files),
                         pass_rule)
            if continue_latest
            else None
        )
        if resumed is not None:
            gid, todo = resumed
        else:
            todo = list(files)
            gid = create_grade_set(
                run_dir,
                _role(tj),
                _role(cj),
                cutoff=cutoff,
                rubric=rubric,
                run_id=manifest.run_id,
                bundle_hash=manifest.bundle_hash,
                pass_rule=pass_rule,
                latency_budget_s=(DEFAULT_LATENCY_BUDGET_S if manifest.latency_budget_s is None
                                  else manifest.latency_budget_s),  # a recorded 0 s is a budget
            ).grade_set_id
        pending = iter(todo)

        async def worker() -> None:  # ``concurrency`` workers share one iterator of episode ids
            for eid in pending:
                g = await grade_into_set(run_dir, gid, _read_trace(files[eid]), bundle, tj, cj)
                if on_episode is not None:
                    on_episode(g)

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
        finalize_grade_set(run_dir, gid)
    finally:
        for c, own in ((tj, own_t), (cj, own_c)):
            if own:
                await c.aclose()
    return gid


def run_cutoff(run_dir: Path, grade_sets: list[str]) -> float:
    """The run's pass mark: the cutoff of its first judge grade set (the one ``callbench run
    --cutoff`` made), else :data:`~callbench.grade.scoring.DEFAULT_CUTOFF` for a run with none
    (a regrade keeps the run's cutoff). Human label sets are skipped; an unreadable grade set raises
    :class:`GradeError` naming its file."""
    for gid in grade_sets:
        if not (grades_dir(run_dir, gid) / "grade_set.json").is_file():
            continue
        gs = load_grade_set(run_dir, gid)
        if gs.kind == "judge":
            return gs.cutoff
    return DEFAULT_CUTOFF


def run_pass_rule(run_dir: Path, grade_sets: list[str]) -> PassRule:
    """The run's pass rule: that of its first judge grade set made since grade sets record one
    (``callbench run --pass-rule``), else the default
    (:data:`~callbench.grade.scoring.DEFAULT_PASS_RULE`). A regrade of a run graded before outcomes
    existed gets the default rule, and its grade set says so."""
    for gid in grade_sets:
        path = grades_dir(run_dir, gid) / "grade_set.json"
        if not path.is_file():
            continue
        gs = load_grade_set(run_dir, gid)
        if gs.kind == "judge" and "pass_rule" in gs.model_fields_set:
            return gs.pass_rule
    return DEFAULT_PASS_RULE


def pending_episodes(run_dir: Path, grade_set_id: str) -> set[str]:
    """Episode ids of a grade set that were *not graded* (to be graded again)."""
    return {g.episode_id for g in iter_episode_grades(run_dir, grade_set_id) if g.not_graded}


def _continuable(run_dir: Path, grade_sets: list[str], tj: RoleInfo, cj: RoleInfo, cutoff: float,
                 rubric: Rubric, episode_ids: list[str],
                 pass_rule: PassRule = DEFAULT_PASS_RULE) -> tuple[str, list[str]] | None:
    """(latest grade set id, episode ids it still needs) when that set can be continued, else None."""
    if not grade_sets or not (grades_dir(run_dir, grade_sets[-1]) / "grade_set.json").is_file():
        return None
    gs = load_grade_set(run_dir, grade_sets[-1])
    same = (
        gs.task_judge.model_dump(mode="json") == tj.model_dump(mode="json")
        and gs.conversation_judge.model_dump(mode="json") == cj.model_dump(mode="json")
        and gs.cutoff == cutoff
        and gs.pass_rule == pass_rule
        and gs.rubric == rubric.model_dump(mode="json", by_alias=True)
        and gs.prompt_version == PROMPT_VERSION
    )
    if not same:
        return None
    done = {g.episode_id for g in iter_episode_grades(run_dir, gs.grade_set_id) if not g.not_graded}
    todo = [e for e in episode_ids if e not in done]
    return (gs.grade_set_id, todo) if todo else None
