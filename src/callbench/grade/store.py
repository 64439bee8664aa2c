"""Grade sets on disk: ids, ``grade_set.json``, episode grade files, registration in the run manifest.

Layout (``runfolder/manifest.py``): ``RUN_DIR/grades/<grade_set_id>/grade_set.json``
(:class:`GradeSetManifest`) and ``episodes/<episode_id>.json.gz`` (:class:`EpisodeGrade`, gzip JSON;
``.json`` in runs graded before gzip, still read: :mod:`callbench.runfolder.episode_files`); every write
is atomic (``trace.atomic_write_text``).

Grade set ids: ``gs<NNN>-<hash10>``. ``NNN`` is a counter (1 + the highest counter already in
``RUN_DIR/grades``, claimed with an exclusive ``mkdir`` so two graders never share a folder);
``hash10`` is the first 10 hex digits of the SHA-256 of the canonical JSON of both judges' specs
and settings, the cutoff, the rubric's hash and the judge prompt version. The same configuration
therefore always shows the same hash, and the counter orders grade sets in time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic_core import PydanticSerializationError

from callbench.grade.action_checks import GradeError
from callbench.grade.models import EpisodeGrade, GradeSetManifest, PassRule
from callbench.grade.prompts import PROMPT_VERSION
from callbench.grade.rubric import DEFAULT_RUBRIC, Rubric
from callbench.grade.scoring import DEFAULT_CUTOFF, DEFAULT_PASS_RULE
from callbench.models.output_limits import safe_json_text
from callbench.runfolder import episode_files
from callbench.runfolder.manifest import GRADES, MANIFEST, RunManifest, grades_dir
from callbench.runfolder.provenance import code_version
from callbench.trace import RoleInfo, atomic_write_text

GRADE_SET_FILE = "grade_set.json"
EPISODES_DIR = "episodes"
_ID = re.compile(r"^gs(\d{3,})-")


def episodes_folder(run_dir: Path, grade_set_id: str) -> Path:
    """``RUN_DIR/grades/<grade_set_id>/episodes``."""
    return grades_dir(Path(run_dir), grade_set_id) / EPISODES_DIR


def episode_path(run_dir: Path, grade_set_id: str, episode_id: str) -> Path:
    """An episode's grade file: ``RUN_DIR/grades/<grade_set_id>/episodes/<episode_id>.json.gz``
    (gzip JSON), or ``.json`` in a run graded before gzip (:mod:`callbench.runfolder.episode_files`)."""
    return episode_files.path_for(episodes_folder(run_dir, grade_set_id), episode_id)


def save_episode_grade(run_dir: Path, grade: EpisodeGrade) -> Path:
    """Write an episode grade atomically into its grade set (compressed JSON); returns the path.
    A lone surrogate left in a string is written as the text of its escape (``safe_json_text``)."""
    return episode_files.write_text(
        episodes_folder(run_dir, grade.grade_set_id), grade.episode_id, grade_text(grade) + "\n")


def grade_text(grade: EpisodeGrade) -> str:
    """The JSON text a grade file holds (without its final newline): pydantic's compact JSON, or,
    when a string holds a lone surrogate UTF-8 cannot encode, the same fields through
    ``json.dumps`` with each such surrogate written as its escape's text."""
    try:
        return grade.model_dump_json()
    except PydanticSerializationError:
        return safe_json_text(json.dumps(grade.model_dump(mode="json"), ensure_ascii=False,
                                         separators=(",", ":")))


def read_episode_grade(path: Path) -> EpisodeGrade:
    """One episode grade file of either form; raises :class:`GradeError` naming the file."""
    try:
        return EpisodeGrade.model_validate_json(episode_files.read_text(path))
    except (OSError, ValueError) as e:
        raise GradeError(f"{path}: not a readable episode grade: {str(e)[:300]}") from None


def iter_episode_grades(run_dir: Path, grade_set_id: str) -> Iterator[EpisodeGrade]:
    """The episode grades of a grade set one at a time, by episode id (nothing is kept); raises
    :class:`GradeError` on a bad file."""
    for p in episode_files.paths(episodes_folder(run_dir, grade_set_id)).values():
        yield read_episode_grade(p)


def grade_set_id_for(
    task_judge: RoleInfo, conversation_judge: RoleInfo, cutoff: float, rubric: Rubric, counter: int,
    pass_rule: PassRule = DEFAULT_PASS_RULE, latency_budget_s: float | None = None,
) -> str:
    """``gs<counter:03d>-<hash10>`` (see the module docstring)."""
    config: dict[str, object] = {
        "task_judge": task_judge.model_dump(mode="json"),
        "conversation_judge": conversation_judge.model_dump(mode="json"),
        "cutoff": cutoff,
        "rubric": rubric.sha256(),
        "prompts": PROMPT_VERSION,
    }
    if pass_rule != DEFAULT_PASS_RULE:
        config["pass_rule"] = pass_rule
    if latency_budget_s is not None:
        config["latency_budget_s"] = latency_budget_s
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]
    return f"gs{counter:03d}-{digest}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def save_grade_set(run_dir: Path, gs: GradeSetManifest) -> None:
    """Rewrite ``RUN_DIR/grades/<id>/grade_set.json`` atomically."""
    atomic_write_text(
        grades_dir(run_dir, gs.grade_set_id) / GRADE_SET_FILE, gs.model_dump_json(indent=1) + "\n"
    )


def read_run_manifest(run_dir: Path) -> RunManifest:
    """``RUN_DIR/manifest.json``; raises :class:`GradeError` when missing or unreadable."""
    p = run_dir / MANIFEST
    if not p.is_file():
        raise GradeError(f"{run_dir}: no {MANIFEST}; not a run folder")
    try:
        return RunManifest.model_validate_json(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise GradeError(f"{p}: not a readable run manifest: {str(e)[:300]}") from None


def register_grade_set(run_dir: Path, grade_set_id: str) -> None:
    """Append ``grade_set_id`` to ``RUN_DIR/manifest.json``'s ``grade_sets`` (atomic rewrite)."""
    m = read_run_manifest(run_dir)
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
    pass_rule: PassRule = DEFAULT_PASS_RULE,
    latency_budget_s: float | None = None,
) -> GradeSetManifest:
    """Claim a new grade set folder and write its ``grade_set.json`` (which records ``pass_rule``,
    the rule every pass of the set was decided by).

    ``register=True`` also appends the id to the run manifest on disk. A runner that keeps the run
    manifest in memory and saves it itself should pass ``register=False`` and add the id to its
    own ``manifest.grade_sets`` (otherwise its next save would drop it).
    """
    # the budget only decides passes under the latency rule; other grade sets do not record it
    budget = latency_budget_s if pass_rule == "outcome_overall_latency" else None
    root = Path(run_dir) / GRADES
    root.mkdir(parents=True, exist_ok=True)
    used = [int(m.group(1)) for p in root.iterdir() if (m := _ID.match(p.name))]
    counter = max(used, default=0) + 1
    while True:
        gid = grade_set_id_for(task_judge, conversation_judge, cutoff, rubric, counter, pass_rule, budget)
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
        pass_rule=pass_rule,
        latency_budget_s=budget,
        code_version=code_version(),
        run_id=run_id,
        bundle_hash=bundle_hash,
        prompt_version=PROMPT_VERSION,
        rubric=rubric.model_dump(mode="json", by_alias=True),
    )
    save_grade_set(Path(run_dir), gs)
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
    return list(iter_episode_grades(run_dir, grade_set_id))


def finalize_grade_set(run_dir: Path, grade_set_id: str, *, register: bool = True) -> GradeSetManifest:
    """Recount episodes, skipped episodes and judge errors from the episode files, stamp
    ``finished`` and rewrite ``grade_set.json``.

    ``register=True`` (re)appends the id to the run manifest's ``grade_sets`` when it is missing:
    a runner that saved its in-memory manifest after :func:`create_grade_set` registered the set
    would otherwise have dropped it. Call it once the runner no longer rewrites the manifest."""
    gs = load_grade_set(run_dir, grade_set_id)
    gs.episodes = gs.skipped = gs.judge_errors = gs.not_graded = 0
    for g in iter_episode_grades(run_dir, grade_set_id):  # one at a time: bounded memory
        gs.episodes += 1
        gs.skipped += g.skipped
        gs.judge_errors += g.judge_errors
        gs.not_graded += g.not_graded
    gs.finished = _now()
    save_grade_set(Path(run_dir), gs)
    if register:
        register_grade_set(Path(run_dir), grade_set_id)
    return gs


def grade_set_summary(run_dir: Path, grade_set_id: str) -> list[str]:
    """A few plain lines about a grade set: counts, judges, mean scores over scored episodes."""
    gs = load_grade_set(run_dir, grade_set_id)
    # per-episode numbers only, one grade at a time (bounded memory at any run size)
    task: list[float | None] = []
    conv: list[float | None] = []
    overall: list[float | None] = []
    n_not_graded = n_passed = 0
    for g in iter_episode_grades(run_dir, grade_set_id):
        if g.skipped:
            continue
        if g.not_graded:
            n_not_graded += 1
            continue
        task.append(g.task_score)
        conv.append(g.conversation_score)
        overall.append(g.overall)
        n_passed += bool(g.passed)

    def mean(xs: list[float | None]) -> str:
        vals = [x for x in xs if x is not None]
        return f"{sum(vals) / len(vals):.1f}" if vals else "n/a"
    stand_ins = [r.spec for r in (gs.task_judge, gs.conversation_judge) if r.spec.startswith("scripted:")]
    note = ([f"stand-in judges ({', '.join(dict.fromkeys(stand_ins))}): scripted, no model; these "
             "grades show that grading works and are not a measurement of quality"] if stand_ins else [])
    return [
        f"grade set {gs.grade_set_id}: {gs.episodes} episode(s), {gs.skipped} skipped, "
        f"{n_not_graded} not graded, {gs.judge_errors} judge error(s)",
        f"judges: task {gs.task_judge.spec}, conversation {gs.conversation_judge.spec}; cutoff {gs.cutoff:g}",
        *note,
        f"mean task {mean(task)}, conversation {mean(conv)}, overall {mean(overall)}; "
        f"passed {n_passed} of {len(overall)}",
        f"written to {grades_dir(Path(run_dir), gs.grade_set_id)}",
    ]
