"""Human labels: export a labelling sheet from a graded run, import the filled sheet as a grade set
of kind ``human`` (``callbench labels export`` / ``callbench labels import``), so judge-human
agreement is ``callbench agreement RUN_DIR --grade-set <judge set> --grade-set <human set>``.

The sheet (CSV, UTF-8, one row per judged item of every graded, not skipped episode of a source
grade set; :data:`COLUMNS`): ids (``episode_id``, ``agent_id``, ``scenario_id``, ``repeat``),
``kind`` (``criterion`` or ``rating``), ``item_id``, ``pillar``, ``diagnostic``, ``statement``
(the criterion's statement or the rating's question), ``anchors`` (met / partial / not met, or
what a 1, 3 and 5 look like), ``excerpts`` (the operating-instruction excerpts a criterion
quotes), ``cited_messages`` (the messages the source judge cited, as ``[index] role: text``),
``transcript`` (the whole conversation as the candidate saw it, tool calls and results
included), then the empty ``label`` (``met``, ``partial`` or ``not_met`` for a criterion; ``1`` to
``5`` for a rating) and an optional ``note``. The judge's own labels and reasons are left out so
the labeller is blind to them. Ratings the rubric makes not applicable for the trace (for example
"speech around tool calls" when no tool was called) are left out.

Import checks every row and reports every problem at once, located as ``FILE: row N, column C:
what is wrong`` (row 1 is the header; a row is a CSV record, which may span several lines); on any
problem nothing is stored. Rows with an empty label are skipped and counted. The grade set
(``RUN_DIR/grades/<id>/``) copies each labelled item's metadata (source, pillar, diagnostic,
weight) from the source grade set, with the human label or rating, and the source's action checks;
an episode whose judged items were all labelled gets pillar and overall scores (grade/scoring.py),
an episode labelled in part gets none. A human grade set is not appended to the run manifest's
``grade_sets``, so ``callbench report`` keeps showing the latest judge grades unless it is given
``--grade-set`` explicitly.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from callbench.bundle.loader import BundleError
from callbench.bundle.models import Bundle, Scenario
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.action_checks import GradeError
from callbench.grade.models import EpisodeGrade, GradedItem, GradeSetManifest, Label, PointTotals
from callbench.grade.rubric import DEFAULT_RUBRIC, RatingSpec, Rubric
from callbench.grade.scoring import grade_verdict, item_value, overall_score, score_items
from callbench.grade.store import (
    create_grade_set,
    finalize_grade_set,
    iter_episode_grades,
    load_episode_grades,
    load_grade_set,
    read_run_manifest,
    save_episode_grade,
    save_grade_set,
)
from callbench.runfolder import episode_files
from callbench.runfolder.manifest import MANIFEST, traces_dir
from callbench.trace import RoleInfo, Trace, TraceMessage, atomic_write_text, load_trace

COLUMNS = [
    "episode_id", "agent_id", "scenario_id", "repeat", "kind", "item_id", "pillar", "diagnostic",
    "statement", "anchors", "excerpts", "cited_messages", "transcript", "source_grade_set", "label", "note",
]  # fmt: skip
REQUIRED = ["episode_id", "item_id", "kind", "label", "source_grade_set"]
CRITERION_LABELS = {
    "met": Label.MET,
    "partial": Label.PARTIAL,
    "not_met": Label.NOT_MET,
    "not met": Label.NOT_MET,
}
MAX_SHOWN_PROBLEMS = 30


def _bundle_for(run_dir: Path, bundle_path: str, bundle_hash: str) -> Bundle:
    p = Path(bundle_path)
    if not p.is_absolute() and not p.exists() and (run_dir / p).exists():
        p = run_dir / p
    try:
        bundle = load_bundle(p)
    except FileNotFoundError:
        raise GradeError(f"{run_dir / MANIFEST}: bundle_path {bundle_path!r} is not a folder") from None
    except BundleError as e:
        raise GradeError(f"bundle {p} does not load: {e}") from None
    if bundle.content_hash != bundle_hash:
        raise GradeError(
            f"the bundle at {p} has hash {bundle.content_hash[:12]}, but the run was made with "
            f"{bundle_hash[:12]}; export with the bundle the run was made with"
        )
    return bundle


def _rubric(gs: GradeSetManifest) -> Rubric:
    return Rubric.model_validate(gs.rubric) if gs.rubric else DEFAULT_RUBRIC


def _message_text(m: TraceMessage) -> str:
    parts = [m.content or ""]
    parts += [f"<calls {c.name}({c.arguments})>" for c in m.tool_calls]
    if m.role == "tool":
        parts = [f"<result of {m.name or 'tool'}> {m.content or ''}"]
    return f"[{m.index}] {m.role}: " + " ".join(p for p in parts if p).strip()


def transcript(trace: Trace) -> str:
    """The conversation as the candidate saw it, one ``[index] role: text`` line per message
    (the system instructions left out: they are long and the same for every episode of an agent)."""
    return "\n".join(_message_text(m) for m in trace.messages if m.role != "system")


def _anchors_criterion(sc: Scenario, item_id: str) -> tuple[str, str, str]:
    for c in sc.criteria:
        if c.id == item_id:
            a = c.anchors
            return (
                c.statement,
                f"met: {a.met}\npartial: {a.partial}\nnot_met: {a.not_met}",
                "\n".join(c.excerpts),
            )
    raise GradeError(f"criterion {item_id!r} is not in scenario {sc.id!r} of the run's bundle")


def _anchors_rating(spec: RatingSpec) -> tuple[str, str, str]:
    a = spec.anchors
    return spec.question, f"1: {a.one}\n3: {a.three}\n5: {a.five}\n(2 and 4 lie between)", ""


def sheet_rows(run_dir: Path, grade_set_id: str | None = None) -> list[dict[str, Any]]:
    """The rows of the labelling sheet for ``grade_set_id`` (default: the run's latest grade set).
    Raises :class:`GradeError` when the run, grade set, bundle or a trace cannot be read."""
    run_dir = Path(run_dir)
    manifest = read_run_manifest(run_dir)
    if grade_set_id is None:
        if not manifest.grade_sets:
            raise GradeError(
                f"{run_dir / MANIFEST}: the run has no grade set; grade it first (callbench grade)"
            )
        grade_set_id = manifest.grade_sets[-1]
    gs = load_grade_set(run_dir, grade_set_id)
    rubric = {r.id: r for r in _rubric(gs).ratings}
    bundle = _bundle_for(run_dir, manifest.bundle_path, manifest.bundle_hash)
    rows: list[dict[str, Any]] = []
    for g in iter_episode_grades(run_dir, grade_set_id):
        if g.skipped:
            continue
        tpath = episode_files.path_for(traces_dir(run_dir), g.episode_id)
        try:
            trace = load_trace(tpath)
        except ValueError as e:
            raise GradeError(str(e)) from None
        agent = bundle.agents.get(g.agent_id)
        sc = next((s for s in agent.scenarios if s.id == g.scenario_id), None) if agent else None
        if sc is None:
            raise GradeError(f"scenario {g.agent_id}/{g.scenario_id} is not in the run's bundle")
        messages = {m.index: m for m in trace.messages}
        text = transcript(trace)
        for item in g.items:
            if item.source == "action_check":
                continue
            if item.source == "rating":
                spec = rubric.get(item.id)
                if spec is None or not spec.applicable(trace)[0]:
                    continue
                statement, anchors, excerpts = _anchors_rating(spec)
            else:
                statement, anchors, excerpts = _anchors_criterion(sc, item.id)
            cited = "\n".join(_message_text(messages[i]) for i in item.cited_messages if i in messages)
            rows.append(
                {
                    "episode_id": g.episode_id, "agent_id": g.agent_id, "scenario_id": g.scenario_id,
                    "repeat": g.repeat, "kind": "rating" if item.source == "rating" else "criterion",
                    "item_id": item.id, "pillar": item.pillar.value, "diagnostic": item.diagnostic.value,
                    "statement": statement, "anchors": anchors, "excerpts": excerpts,
                    "cited_messages": cited, "transcript": text, "source_grade_set": grade_set_id,
                    "label": "", "note": "",
                }
            )  # fmt: skip
    return rows


def export_labels(run_dir: Path, out: Path, grade_set_id: str | None = None) -> int:
    """Write the labelling sheet to ``out`` (atomically); returns the number of rows."""
    rows = sheet_rows(run_dir, grade_set_id)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(Path(out), buf.getvalue())
    return len(rows)


class LabelImport:
    """The outcome of :func:`import_labels`: the new grade set id and row counts."""

    def __init__(
        self, grade_set_id: str, labelled: int, unlabelled: int, episodes: int, complete: int
    ) -> None:
        self.grade_set_id = grade_set_id
        self.labelled = labelled
        self.unlabelled = unlabelled
        self.episodes = episodes
        self.complete = complete  # episodes whose judged items were all labelled (scored)


def _read_sheet(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise GradeError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GradeError(f"{path}: cannot read as UTF-8 text: {e}") from None
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    except csv.Error as e:
        raise GradeError(f"{path}: not a readable CSV file: {e}") from None
    return fields, rows


def _check_rows(
    path: Path, rows: list[dict[str, str]], sources: dict[str, dict[str, EpisodeGrade]]
) -> tuple[list[str], list[tuple[EpisodeGrade, GradedItem, str, str]], int]:
    """Problems, the labelled rows as (source grade, source item, label text, note), unlabelled count."""
    problems: list[str] = []
    labelled: list[tuple[EpisodeGrade, GradedItem, str, str]] = []
    seen: dict[tuple[str, str, str], int] = {}
    unlabelled = 0
    for n, row in enumerate(rows, start=2):

        def bad(col: str, msg: str, n: int = n) -> None:
            problems.append(f"{path}: row {n}, column {col}: {msg}")

        if None in row:  # more cells than header columns
            bad("(extra)", f"{len(row[None])} cell(s) beyond the header's {len(row) - 1} columns")  # type: ignore[index]
            continue
        label = (row.get("label") or "").strip()
        if not label:
            unlabelled += 1
            continue
        gid = (row.get("source_grade_set") or "").strip()
        eid = (row.get("episode_id") or "").strip()
        kind = (row.get("kind") or "").strip()
        item_id = (row.get("item_id") or "").strip()
        if gid not in sources:
            bad("source_grade_set", f"unknown grade set {gid!r}")
            continue
        grade = sources[gid].get(eid)
        if grade is None or grade.skipped:
            bad("episode_id", f"no graded episode {eid!r} in grade set {gid}")
            continue
        if kind not in ("criterion", "rating"):
            bad("kind", f"{kind!r} is not criterion or rating")
            continue
        item = next(
            (i for i in grade.items if i.id == item_id and (i.source == "rating") == (kind == "rating")
             and i.source != "action_check"),
            None,
        )  # fmt: skip
        if item is None:
            bad("item_id", f"episode {eid} has no {kind} {item_id!r}")
            continue
        key = (gid, eid, f"{item.source}:{item_id}")
        if key in seen:
            bad(
                "item_id", f"{kind} {item_id!r} of episode {eid} is labelled again (first on row {seen[key]})"
            )
            continue
        seen[key] = n
        if kind == "criterion" and label.lower() not in CRITERION_LABELS:
            bad("label", f"{label!r} is not met, partial or not_met")
            continue
        if kind == "rating" and label not in ("1", "2", "3", "4", "5"):
            bad("label", f"{label!r} is not a whole rating from 1 to 5")
            continue
        labelled.append((grade, item, label, (row.get("note") or "").strip()))
    return problems, labelled, unlabelled


def _human_item(item: GradedItem, label: str, note: str) -> GradedItem:
    out = item.model_copy(deep=True)
    out.cited_messages, out.cited_events = [], []
    out.reason = f"human label{': ' + note if note else ''}"
    if item.source == "rating":
        out.label, out.rating = None, int(label)
    else:
        out.label, out.rating = CRITERION_LABELS[label.lower()], None
    out.r = item_value(out)
    return out


def import_labels(run_dir: Path, path: Path) -> LabelImport:
    """Store a filled labelling sheet as a new grade set of kind ``human`` (module docstring).

    Raises :class:`GradeError` listing every located problem (nothing stored), or when the run or
    the sheet's source grade set cannot be read, or no row carries a label."""
    run_dir, path = Path(run_dir), Path(path)
    manifest = read_run_manifest(run_dir)
    fields, rows = _read_sheet(path)
    missing = [c for c in REQUIRED if c not in fields]
    if missing:
        raise GradeError(
            f"{path}: row 1: missing column(s) {', '.join(missing)} "
            "(expected the columns of callbench labels export)"
        )
    sources: dict[str, dict[str, EpisodeGrade]] = {}
    source_sets: dict[str, GradeSetManifest] = {}
    for gid in sorted({(r.get("source_grade_set") or "").strip() for r in rows} - {""}):
        try:
            source_sets[gid] = load_grade_set(run_dir, gid)
            sources[gid] = {g.episode_id: g for g in load_episode_grades(run_dir, gid)}
        except GradeError:
            continue  # reported per row as an unknown grade set
    problems, labelled, unlabelled = _check_rows(path, rows, sources)
    if problems:
        shown = problems[:MAX_SHOWN_PROBLEMS]
        more = f"\n... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise GradeError(
            f"{len(problems)} problem(s) in {path}; nothing was imported:\n" + "\n".join(shown) + more
        )
    if not labelled:
        raise GradeError(f"{path}: no row has a label ({unlabelled} empty); nothing was imported")
    if len({g.grade_set_id for g, _, _, _ in labelled}) > 1:
        raise GradeError(
            f"{path}: rows come from more than one source grade set; export and label one at a time"
        )
    src = source_sets[labelled[0][0].grade_set_id]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    human = RoleInfo(spec=f"human:{digest}")
    gs = create_grade_set(
        run_dir, human, human, cutoff=src.cutoff, rubric=_rubric(src), run_id=manifest.run_id,
        bundle_hash=manifest.bundle_hash, register=False, pass_rule=src.pass_rule,
    )  # fmt: skip
    gs.kind = "human"
    gs.source_grade_set = src.grade_set_id
    gs.labels_file = str(path)
    save_grade_set(run_dir, gs)
    by_episode: dict[str, list[tuple[EpisodeGrade, GradedItem, str, str]]] = {}
    for entry in labelled:
        by_episode.setdefault(entry[0].episode_id, []).append(entry)
    complete = 0
    for _eid, entries in sorted(by_episode.items()):
        source = entries[0][0]
        items = [i.model_copy(deep=True) for i in source.items if i.source == "action_check"]
        items += [_human_item(item, label, note) for _, item, label, note in entries]
        done: set[tuple[str, str]] = {(str(i.source), i.id) for _, i, _, _ in entries}
        grade = source.model_copy(deep=True)
        grade.grade_set_id = gs.grade_set_id
        grade.items = items
        grade.usage, grade.judge_attempts, grade.judge_errors = {}, {}, 0
        grade.judge_reasks = {}
        if _all_labelled(done, source):
            complete += 1
            task, conv, diags = score_items(items)
            grade.task, grade.conversation, grade.diagnostics = task, conv, diags
            grade.task_score, grade.conversation_score = task.score, conv.score
            grade.overall = overall_score(task.score, conv.score)
            # action checks (the critical items) are copied, so the outcome stands as graded
            grade.passed = grade_verdict(grade)
        else:
            _clear_scores(grade)
        save_episode_grade(run_dir, grade)
    finalize_grade_set(run_dir, gs.grade_set_id, register=False)
    return LabelImport(gs.grade_set_id, len(labelled), unlabelled, len(by_episode), complete)


def _all_labelled(done: set[tuple[str, str]], source: EpisodeGrade) -> bool:
    """Every judged item of the source episode that could be labelled (not a rating the rubric made
    not applicable) carries a human label."""
    needed = {
        (i.source, i.id)
        for i in source.items
        if i.source != "action_check" and not (i.source == "rating" and i.label == Label.NOT_APPLICABLE)
    }
    return needed <= done


def _clear_scores(grade: EpisodeGrade) -> None:
    grade.task, grade.conversation, grade.diagnostics = PointTotals(), PointTotals(), {}
    grade.task_score = grade.conversation_score = grade.overall = None
    grade.passed = None


def summary_lines(result: LabelImport) -> Iterable[str]:
    """What an import stored, for the CLI."""
    yield result.grade_set_id
    yield (
        f"{result.labelled} label(s) over {result.episodes} episode(s) stored as human grade set "
        f"{result.grade_set_id} ({result.unlabelled} row(s) without a label skipped; {result.complete} "
        "episode(s) fully labelled and scored)"
    )
