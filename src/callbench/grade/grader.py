"""Grade traces: one trace (:func:`grade_trace`), one trace into a grade set as its episode finishes
(:func:`grade_into_set`, for the runner), or a whole run folder into a new grade set
(:func:`grade_run`, for ``callbench grade``).

Grading reads only trace files and the bundle (DESIGN.md: "grade reads trace files, not the
executor"), so saved runs can be regraded with another judge without rerunning a call. Each
regrade writes a NEW grade set ``RUN_DIR/grades/<grade_set_id>/`` (``grade_set.json`` plus
``episodes/<episode_id>.json``) and leaves earlier grade sets in place.

Grade set ids: ``gs<NNN>-<hash10>``. ``NNN`` is a counter (1 + the highest counter already in
``RUN_DIR/grades``, claimed with an exclusive ``mkdir`` so two graders never share a folder);
``hash10`` is the first 10 hex digits of the SHA-256 of the canonical JSON of both judges' specs
and settings, the cutoff, the rubric's hash and the judge prompt version. The same configuration
therefore always shows the same hash, and the counter orders grade sets in time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from callbench.bundle.loader import BundleError, load_bundle
from callbench.bundle.models import Bundle, Scenario
from callbench.grade.action_checks import GradeError, grade_action_checks
from callbench.grade.judges import run_conversation_judge, run_task_judge
from callbench.grade.models import EpisodeGrade, GradeSetManifest
from callbench.grade.prompts import PROMPT_VERSION
from callbench.grade.rubric import DEFAULT_RUBRIC, Rubric
from callbench.grade.scoring import DEFAULT_CUTOFF, episode_grade
from callbench.models.base import ModelClient, ModelSettings, Role
from callbench.runs.manifest import GRADES, MANIFEST, RunManifest, grades_dir, traces_dir
from callbench.runs.provenance import code_version
from callbench.trace import RoleInfo, Trace, atomic_write_text, load_trace

GRADE_SET_FILE = "grade_set.json"
EPISODES_DIR = "episodes"
_ID = re.compile(r"^gs(\d{3,})-")

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
) -> EpisodeGrade:
    """Grade one trace: action checks, the task judge and the conversation judge (concurrently).

    Returns an :class:`EpisodeGrade` (``skipped=True`` with no scores for a skipped trace; no judge
    is called then). Judge failures become judge-error items, never exceptions. Raises
    :class:`GradeError` when the trace's bundle hash differs from ``bundle``'s or its scenario is
    not in the bundle.
    """
    _check_hash(bundle, trace)
    scenario = _scenario(bundle, trace)
    if trace.skipped:
        return episode_grade(trace, [], grade_set_id=grade_set_id, cutoff=cutoff)
    checks = grade_action_checks(trace, scenario)
    (task_items, task_out), (conv_items, conv_out) = await asyncio.gather(
        run_task_judge(trace, scenario, task_judge),
        run_conversation_judge(trace, scenario, conversation_judge, rubric),
    )
    grade = episode_grade(trace, checks + task_items + conv_items, grade_set_id=grade_set_id, cutoff=cutoff)
    grade.usage = {
        k: o.usage for k, o in (("task_judge", task_out), ("conversation_judge", conv_out)) if o.attempts
    }
    grade.judge_attempts = {"task_judge": task_out.attempts, "conversation_judge": conv_out.attempts}
    return grade


# ---------------------------------------------------------------- grade sets on disk


def grade_set_id_for(
    task_judge: RoleInfo, conversation_judge: RoleInfo, cutoff: float, rubric: Rubric, counter: int
) -> str:
    """``gs<counter:03d>-<hash10>`` (see the module docstring)."""
    config = {
        "task_judge": task_judge.model_dump(mode="json"),
        "conversation_judge": conversation_judge.model_dump(mode="json"),
        "cutoff": cutoff,
        "rubric": rubric.sha256(),
        "prompts": PROMPT_VERSION,
    }
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]
    return f"gs{counter:03d}-{digest}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _save_set(run_dir: Path, gs: GradeSetManifest) -> None:
    atomic_write_text(
        grades_dir(run_dir, gs.grade_set_id) / GRADE_SET_FILE, gs.model_dump_json(indent=1) + "\n"
    )


def _read_manifest(run_dir: Path) -> RunManifest:
    p = run_dir / MANIFEST
    if not p.is_file():
        raise GradeError(f"{run_dir}: no {MANIFEST}; not a run folder")
    try:
        return RunManifest.model_validate_json(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise GradeError(f"{p}: not a readable run manifest: {str(e)[:300]}") from None


def register_grade_set(run_dir: Path, grade_set_id: str) -> None:
    """Append ``grade_set_id`` to ``RUN_DIR/manifest.json``'s ``grade_sets`` (atomic rewrite)."""
    m = _read_manifest(run_dir)
    if grade_set_id not in m.grade_sets:
        m.grade_sets.append(grade_set_id)
        atomic_write_text(run_dir / MANIFEST, m.model_dump_json(indent=1) + "\n")


def create_grade_set(
    run_dir: Path,
    task_judge: RoleInfo,
    conversation_judge: RoleInfo,
    *,
    cutoff: float = DEFAULT_CUTOFF,
    rubric: Rubric = DEFAULT_RUBRIC,
    run_id: str = "",
    bundle_hash: str = "",
    register: bool = True,
) -> GradeSetManifest:
    """Claim a new grade set folder and write its ``grade_set.json``.

    ``register=True`` also appends the id to the run manifest on disk. A runner that keeps the run
    manifest in memory and saves it itself should pass ``register=False`` and add the id to its
    own ``manifest.grade_sets`` (otherwise its next save would drop it).
    """
    root = Path(run_dir) / GRADES
    root.mkdir(parents=True, exist_ok=True)
    used = [int(m.group(1)) for p in root.iterdir() if (m := _ID.match(p.name))]
    counter = max(used, default=0) + 1
    while True:
        gid = grade_set_id_for(task_judge, conversation_judge, cutoff, rubric, counter)
        try:
            (root / gid).mkdir()
            break
        except FileExistsError:
            counter += 1
    gs = GradeSetManifest(
        grade_set_id=gid,
        created=_now(),
        task_judge=task_judge,
        conversation_judge=conversation_judge,
        cutoff=cutoff,
        code_version=code_version(),
        run_id=run_id,
        bundle_hash=bundle_hash,
        prompt_version=PROMPT_VERSION,
        rubric=rubric.model_dump(mode="json", by_alias=True),
    )
    _save_set(Path(run_dir), gs)
    if register:
        register_grade_set(Path(run_dir), gid)
    return gs


def load_grade_set(run_dir: Path, grade_set_id: str) -> GradeSetManifest:
    """Read ``grade_set.json``; raises :class:`GradeError` naming the file."""
    p = grades_dir(Path(run_dir), grade_set_id) / GRADE_SET_FILE
    try:
        return GradeSetManifest.model_validate_json(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise GradeError(f"{p}: not a readable grade set: {str(e)[:300]}") from None


def load_episode_grades(run_dir: Path, grade_set_id: str) -> list[EpisodeGrade]:
    """Every episode grade of a grade set, by episode id; raises :class:`GradeError` on a bad file."""
    folder = grades_dir(Path(run_dir), grade_set_id) / EPISODES_DIR
    out = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append(EpisodeGrade.model_validate_json(p.read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            raise GradeError(f"{p}: not a readable episode grade: {str(e)[:300]}") from None
    return out


async def grade_into_set(
    run_dir: Path,
    grade_set_id: str,
    trace: Trace,
    bundle: Bundle,
    task_judge: ModelClient,
    conversation_judge: ModelClient,
) -> EpisodeGrade:
    """Grade one trace into an existing grade set (cutoff and rubric from its ``grade_set.json``)
    and write ``episodes/<episode_id>.json`` atomically. For the runner, as each episode finishes."""
    gs = load_grade_set(run_dir, grade_set_id)
    rubric = Rubric.model_validate(gs.rubric) if gs.rubric else DEFAULT_RUBRIC
    grade = await grade_trace(
        trace, bundle, task_judge, conversation_judge, gs.cutoff, grade_set_id=grade_set_id, rubric=rubric
    )
    path = grades_dir(Path(run_dir), grade_set_id) / EPISODES_DIR / f"{trace.episode_id}.json"
    atomic_write_text(path, grade.model_dump_json(indent=1) + "\n")
    return grade


def finalize_grade_set(run_dir: Path, grade_set_id: str) -> GradeSetManifest:
    """Recount episodes, skipped episodes and judge errors from the episode files, stamp
    ``finished`` and rewrite ``grade_set.json``."""
    gs = load_grade_set(run_dir, grade_set_id)
    grades = load_episode_grades(run_dir, grade_set_id)
    gs.episodes = len(grades)
    gs.skipped = sum(1 for g in grades if g.skipped)
    gs.judge_errors = sum(g.judge_errors for g in grades)
    gs.finished = _now()
    _save_set(Path(run_dir), gs)
    return gs


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


def _load_traces(run_dir: Path) -> list[Trace]:
    folder = traces_dir(run_dir)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    out = []
    for p in files:
        try:
            out.append(load_trace(p))
        except ValueError as e:
            raise GradeError(str(e)[:500]) from None
    return out


async def grade_run(
    run_dir: Path,
    *,
    task_judge: ModelClient | str | None = None,
    conversation_judge: ModelClient | str | None = None,
    task_judge_settings: ModelSettings | None = None,
    conversation_judge_settings: ModelSettings | None = None,
    cutoff: float = DEFAULT_CUTOFF,
    rubric: Rubric = DEFAULT_RUBRIC,
    concurrency: int = 4,
    bundle: Bundle | None = None,
    on_episode: Callable[[EpisodeGrade], Any] | None = None,
) -> str:
    """Grade every trace of ``RUN_DIR`` into a new grade set and return its id.

    Judges: a :class:`ModelClient`, a spec (created through the model registry with the given
    settings, or the run's recorded settings when the spec equals the recorded one), or None for
    the judges recorded in the run manifest. The bundle is loaded from the manifest's
    ``bundle_path`` (relative paths also tried under ``RUN_DIR``) unless given. Refuses with
    :class:`GradeError` when the folder is not a run, a trace is unreadable, or the bundle's
    content hash differs from the manifest's or any trace's. ``on_episode`` is called with each
    episode grade as it is written. Earlier grade sets are left in place; the new id is appended
    to the manifest's ``grade_sets``.
    """
    run_dir = Path(run_dir)
    manifest = _read_manifest(run_dir)
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
    traces = _load_traces(run_dir)
    for t in traces:
        _check_hash(bundle, t)
        _scenario(bundle, t)
    tj, own_t = _judge(task_judge, task_judge_settings, manifest.task_judge, "task_judge")
    cj, own_c = _judge(
        conversation_judge, conversation_judge_settings, manifest.conversation_judge, "conversation_judge"
    )
    try:
        gs = create_grade_set(
            run_dir,
            _role(tj),
            _role(cj),
            cutoff=cutoff,
            rubric=rubric,
            run_id=manifest.run_id,
            bundle_hash=manifest.bundle_hash,
        )
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(t: Trace) -> None:
            async with gate:
                g = await grade_into_set(run_dir, gs.grade_set_id, t, bundle, tj, cj)
            if on_episode is not None:
                on_episode(g)

        await asyncio.gather(*(one(t) for t in traces))
        finalize_grade_set(run_dir, gs.grade_set_id)
    finally:
        for c, own in ((tj, own_t), (cj, own_c)):
            if own:
                await c.aclose()
    return gs.grade_set_id


def grade_set_summary(run_dir: Path, grade_set_id: str) -> list[str]:
    """A few plain lines about a grade set: counts, judges, mean scores over scored episodes."""
    gs = load_grade_set(run_dir, grade_set_id)
    scored = [g for g in load_episode_grades(run_dir, grade_set_id) if not g.skipped]

    def mean(xs: list[float | None]) -> str:
        vals = [x for x in xs if x is not None]
        return f"{sum(vals) / len(vals):.1f}" if vals else "n/a"

    return [
        f"grade set {gs.grade_set_id}: {gs.episodes} episode(s), {gs.skipped} skipped, "
        f"{gs.judge_errors} judge error(s)",
        f"judges: task {gs.task_judge.spec}, conversation {gs.conversation_judge.spec}; cutoff {gs.cutoff:g}",
        f"mean task {mean([g.task_score for g in scored])}, conversation "
        f"{mean([g.conversation_score for g in scored])}, overall {mean([g.overall for g in scored])}; "
        f"passed {sum(1 for g in scored if g.passed)} of {len(scored)}",
        f"written to {grades_dir(Path(run_dir), gs.grade_set_id)}",
    ]
