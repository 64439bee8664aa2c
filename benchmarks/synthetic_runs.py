"""Synthetic run folders of any size, for scale benchmarks and tests.

:func:`make_synthetic_run` writes a run folder that ``callbench report``, ``callbench grade`` and a
resume accept: ``manifest.json``, one trace per episode, one fault ledger per episode, the SQLite
index and one finished grade set (scripted judges) with an episode grade per trace.

Shapes are real: the traces, ledgers and grades are those of a scripted run of the starter bundle
(``scripted:reference`` candidate, ``scripted:plan`` caller, ``scripted:met`` judges), made once
per process in a temporary folder (about 3 s for the starter's 100 scenarios). Each synthetic
episode copies one scenario's trace (about 75 KB of messages, caller turns, tool events) and
changes what differs between episodes of a real run: episode id, candidate (``candidates`` copies
of ``scripted:reference`` with different ``seed`` settings, so different slugs), repeat, seeds and
token usage; about 1 in 100 episodes is skipped (a candidate provider error). Grades differ by
candidate (candidate ``i`` has each judged or checked item's label lowered with probability
``0.12 * i`` times a factor drawn per grade between 0 and 2.5; lowered to not met or one step),
so scores, pass rates and comparisons are not degenerate. Everything is
deterministic from ``seed``.

Episodes are spread evenly over candidates and scenarios: repeat ``r`` of every scenario for
every candidate comes before repeat ``r + 1``; ``episodes`` need not be a multiple of
``candidates * scenarios`` (the manifest's plan lists exactly the episodes written, and
``repeats`` is the highest repeat count). Traces and grades are written in the run folder's
current file format (:mod:`callbench.runfolder.episode_files`: gzip JSON) without the fsync a real run
does per file (a generator needs no crash safety): 10,000 episodes took 54 s of CPU (88 s wall
at load 5 on 2 shared cores), about half of it gzip; before traces were compressed, 18 s of CPU.

Use from a test by path (the file needs only callbench)::

    spec = importlib.util.spec_from_file_location("synthetic_runs", ROOT / "benchmarks" / "synthetic_runs.py")

Run: ``python benchmarks/synthetic_runs.py OUT_DIR EPISODES [--seed N] [--candidates N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from callbench.grade.models import EpisodeGrade, GradedItem, GradeSetManifest, Label
from callbench.grade.scoring import overall_score, score_items
from callbench.grade.store import GRADE_SET_FILE, episode_path, grade_set_id_for, read_episode_grade
from callbench.models.base import ModelSettings, Usage
from callbench.runfolder import episode_files
from callbench.runfolder.manifest import FAULTS, MANIFEST, EpisodeKey, RunManifest
from callbench.runfolder.store import RunStore, text_sha256
from callbench.runs.plan import ScenarioFilters, candidate_slug
from callbench.trace import RoleInfo

STARTER = Path(str(files("callbench") / "examples" / "starter"))
STARTED = "2026-01-01T00:00:00+00:00"
ENDED = "2026-01-01T06:00:00+00:00"
SKIP_SHARE = 0.01
LOWER_PER_CANDIDATE = 0.12
VARIANTS = 4  # grade variants per (scenario, candidate)
SKIP_REASON = "provider_error: candidate: HTTP 503 after 6 attempts (synthetic)"

SEED_NAMES = ("backend", "caller", "candidate", "channel", "episode")
_PLACEHOLDERS = ("episode_id", "candidate", "repeat", "seeds", "usage", "end_reason", "skip_reason")


@dataclass
class _Template:
    """One scenario's real trace, fault ledger and grade, ready for substitution."""

    scenario_id: str
    agent_id: str
    trace_text: str  # canonical JSON with "@@<field>@@" strings in place of _PLACEHOLDERS
    content_text: str  # the same without the timings: what Trace.sha256 (and so a grade) hashes
    end_reason: str
    usage: dict[str, dict[str, Any]]
    ledger_text: str
    grade: EpisodeGrade


_CACHE: dict[int, tuple[dict[str, Any], list[_Template]]] = {}


def _fill(template: str, fills: list[tuple[str, str]]) -> str:
    """``template`` with each placeholder replaced once by its value."""
    for old, new in fills:
        template = template.replace(old, new, 1)
    return template


def _canonical(value: Any) -> str:
    """The canonical JSON of a value, as ``Trace.canonical_json`` writes it."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _scripted_run(limit: int) -> tuple[dict[str, Any], list[_Template]]:
    """A real scripted run of the first ``limit`` starter scenarios, read back as templates."""
    if limit in _CACHE:
        return _CACHE[limit]
    from callbench.bundle.validate.audits import load_bundle
    from callbench.runs.executor import RoleSpec, RunConfig
    from callbench.runs.session import run_and_grade

    bundle = load_bundle(STARTER)
    tmp = Path(tempfile.mkdtemp(prefix="callbench-synthetic-"))
    try:
        out = tmp / "run"
        config = RunConfig(
            bundle_path=STARTER, out=out, candidates=[RoleSpec(spec="scripted:reference")],
            caller=RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
            conversation_judge=RoleSpec(spec="scripted:met"), repeats=1, grade=True, concurrency=8,
            filters=ScenarioFilters(limit=min(limit, 100_000)), preflight=False,
        )
        asyncio.run(run_and_grade(config, bundle=bundle))
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        gid = manifest["grade_sets"][-1]
        store = RunStore(out)
        templates = []
        for key in manifest["planned"]:
            eid = key["episode_id"]
            trace = json.loads(store.load_trace(eid).canonical_json())
            if trace["end_reason"] == "skipped":
                continue
            usage = trace["usage"]
            end_reason = trace["end_reason"]
            for name in _PLACEHOLDERS:
                trace[name] = f"@@{name}@@"
            grade = read_episode_grade(episode_path(out, gid, eid))
            templates.append(_Template(
                scenario_id=key["scenario_id"], agent_id=key["agent_id"], trace_text=_canonical(trace),
                content_text=_canonical({k: v for k, v in trace.items() if k != "latency"}),
                end_reason=end_reason, usage=usage,
                ledger_text=store.faults_path(eid).read_text(encoding="utf-8"), grade=grade,
            ))
        store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _CACHE[limit] = (manifest, templates)
    return manifest, templates


def _lowered(grade: EpisodeGrade, share: float, rng: random.Random) -> EpisodeGrade:
    """``grade`` with each labelled item lowered (to not met, or one step: met -> partial) with
    probability ``share``, each rating by 2 points, and its scores recomputed (grade/scoring.py)."""
    steps = {Label.MET: Label.PARTIAL, Label.PARTIAL: Label.NOT_MET}
    items: list[GradedItem] = []
    for it in grade.items:
        if it.label in steps and rng.random() < share:
            lower = steps[it.label] if rng.random() < 0.5 else Label.NOT_MET
            it = it.model_copy(update={"label": lower, "r": {Label.PARTIAL: 0.5, Label.NOT_MET: 0.0}[lower],
                                       "reason": f"{it.reason} (synthetic: lowered)"})
        elif it.rating is not None and rng.random() < share:
            rating = max(1, it.rating - 2)
            it = it.model_copy(update={"rating": rating, "r": (rating - 1) / 4})
        items.append(it)
    task, conv, diags = score_items(items)
    overall = overall_score(task.score, conv.score)
    return grade.model_copy(update={
        "items": items, "task": task, "conversation": conv, "task_score": task.score,
        "conversation_score": conv.score, "overall": overall,
        "passed": None if overall is None else overall >= grade.cutoff, "diagnostics": diags,
    })


def _usage(template: dict[str, dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """Token usage of a real model of the same conversation: about 1,500 prompt tokens and 60
    output tokens per call, priced at USD 0.15 / 0.60 per million tokens."""
    out = {}
    for role, u in sorted(template.items()):
        calls = int(u.get("calls", 0)) or 1
        inp = calls * rng.randint(1_000, 2_500)
        outp = calls * rng.randint(20, 120)
        out[role] = Usage(input_tokens=inp, output_tokens=outp, cached_input_tokens=inp // 2, calls=calls,
                          latency_s=round(calls * rng.uniform(0.4, 1.2), 3),
                          cost_usd=round(inp * 0.15e-6 + outp * 0.6e-6, 8)).model_dump(mode="json")
    return out


def _write(path: Path, text: str) -> None:
    """Plain write (no fsync: see the module docstring); the folder is created on demand."""
    try:
        path.write_text(text, encoding="utf-8")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def make_synthetic_run(run_dir: Path, episodes: int, *, seed: int = 0, candidates: int = 3) -> Path:
    """Write a synthetic run folder of ``episodes`` episodes at ``run_dir`` and return it.

    ``run_dir`` must not exist yet or be empty; ``episodes >= 1``, ``candidates >= 1``. The
    same arguments always give the same files (except ``index.sqlite``'s modification times).
    Raises ``ValueError`` for bad arguments or a non-empty ``run_dir``."""
    run_dir = Path(run_dir)
    if episodes < 1 or candidates < 1:
        raise ValueError(f"episodes and candidates must be >= 1 (got {episodes}, {candidates})")
    if run_dir.exists() and any(run_dir.iterdir()):
        raise ValueError(f"{run_dir}: not empty; a synthetic run needs a new folder")
    base, templates = _scripted_run(100 if episodes >= 100 else episodes)
    rng = random.Random(seed)
    roles = [RoleInfo(spec="scripted:reference",
                      settings=ModelSettings(seed=None if i == 0 else i)) for i in range(candidates)]
    slugs = [candidate_slug(r.spec, r.settings) for r in roles]
    roles_json = [_canonical(r.model_dump(mode="json")) for r in roles]
    gs_base = json.loads(json.dumps(base))  # copied below into the grade set manifest
    task_judge = RoleInfo.model_validate(gs_base["task_judge"])
    conv_judge = RoleInfo.model_validate(gs_base["conversation_judge"])
    first = templates[0].grade
    gid = grade_set_id_for(task_judge, conv_judge, first.cutoff, _rubric(), 1)

    variants: dict[tuple[int, int], list[str]] = {}
    for t_i, t in enumerate(templates):
        for c in range(candidates):
            vs = []
            for _ in range(VARIANTS):
                share = LOWER_PER_CANDIDATE * c * rng.uniform(0.0, 2.5)
                g = _lowered(t.grade, share, rng).model_copy(update={
                    "grade_set_id": gid, "episode_id": "@@episode_id@@", "trace_sha256": "@@sha@@",
                    "candidate": "@@candidate@@", "repeat": 987654321})
                vs.append(g.model_dump_json() + "\n")
            variants[(t_i, c)] = vs

    per_round = candidates * len(templates)
    repeats = math.ceil(episodes / per_round)
    store = RunStore(run_dir)
    traces_dir = store.traces
    traces_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / FAULTS).mkdir(parents=True, exist_ok=True)
    gdir = episode_path(run_dir, gid, "x").parent
    gdir.mkdir(parents=True, exist_ok=True)
    planned: list[dict[str, Any]] = []
    rows: list[tuple[Any, ...]] = []
    skipped = judge_errors = 0
    n = 0
    for r in range(repeats):
        for t_i, t in enumerate(templates):
            for c in range(candidates):
                if n == episodes:
                    break
                n += 1
                eid = f"{slugs[c]}--{t.scenario_id}--r{r}"
                skip = rng.random() < SKIP_SHARE
                usage = _usage(t.usage, rng)
                seeds = {k: rng.getrandbits(63) for k in SEED_NAMES}
                seeds["run"] = seed
                end = "skipped" if skip else t.end_reason
                fills = [('"@@episode_id@@"', _canonical(eid)), ('"@@candidate@@"', roles_json[c]),
                         ('"@@repeat@@"', str(r)), ('"@@seeds@@"', _canonical(seeds)),
                         ('"@@usage@@"', _canonical(usage)), ('"@@end_reason@@"', _canonical(end)),
                         ('"@@skip_reason@@"', _canonical(SKIP_REASON if skip else None))]
                text = _fill(t.trace_text, fills)
                sha = text_sha256(text)  # the index keeps the file's text hash and its content hash
                same = t.content_text == t.trace_text
                content_sha = sha if same else text_sha256(_fill(t.content_text, fills))
                episode_files.write_text(traces_dir, eid, text + "\n", sync=False)
                _write(store.faults_path(eid), t.ledger_text)
                if skip:
                    skipped += 1
                    gtext = _skipped_grade_text(t, gid)
                else:
                    gtext = rng.choice(variants[(t_i, c)])
                gtext = (gtext.replace('"@@episode_id@@"', json.dumps(eid), 1)
                         .replace('"@@sha@@"', json.dumps(content_sha), 1)
                         .replace('"@@candidate@@"', json.dumps(roles[c].spec), 1)
                         .replace("987654321", str(r), 1))
                episode_files.write_text(gdir, eid, gtext, sync=False)
                planned.append(EpisodeKey(episode_id=eid, candidate=slugs[c], agent_id=t.agent_id,
                                          scenario_id=t.scenario_id, repeat=r).model_dump(mode="json"))
                inp = sum(u["input_tokens"] for u in usage.values())
                outp = sum(u["output_tokens"] for u in usage.values())
                cost = sum(u["cost_usd"] for u in usage.values())
                rows.append((eid, roles[c].spec, t.agent_id, t.scenario_id, t.grade.language,
                             t.grade.difficulty, r, end, SKIP_REASON if skip else None, sha, inp, outp, cost,
                             content_sha))
    gs = GradeSetManifest.model_validate({
        "grade_set_id": gid, "created": STARTED, "task_judge": task_judge, "conversation_judge": conv_judge,
        "cutoff": first.cutoff, "code_version": base["callbench_version"], "episodes": n, "skipped": skipped,
        "judge_errors": judge_errors, "run_id": run_dir.name, "bundle_hash": base["bundle_hash"],
        "prompt_version": _prompt_version(), "rubric": _rubric().model_dump(mode="json", by_alias=True),
        "finished": ENDED,
    })
    _write(gdir.parent / GRADE_SET_FILE, gs.model_dump_json(indent=1) + "\n")
    manifest = RunManifest.model_validate({
        **base, "run_id": run_dir.name, "candidates": [r.model_dump(mode="json") for r in roles],
        "seed": seed, "repeats": repeats, "planned": planned, "started": STARTED, "ended": ENDED,
        "completed": n, "skipped": skipped,
        "skips_by_reason": {"provider_error": skipped} if skipped else {},
        "grade_sets": [gid], "cost_usd": None, "official": False,
    })
    _write(run_dir / MANIFEST, manifest.model_dump_json(indent=1) + "\n")
    _write_index(store, rows)
    store.close()
    return run_dir


def _skipped_grade_text(t: _Template, gid: str) -> str:
    g = t.grade.model_copy(update={
        "grade_set_id": gid, "episode_id": "@@episode_id@@", "trace_sha256": "@@sha@@",
        "candidate": "@@candidate@@", "repeat": 987654321, "skipped": True, "skip_reason": SKIP_REASON,
        "end_reason": "skipped", "items": [], "task_score": None, "conversation_score": None,
        "overall": None, "passed": None, "diagnostics": {}, "usage": {}, "judge_attempts": {}})
    return g.model_dump_json() + "\n"


def _rubric() -> Any:
    from callbench.grade.rubric import DEFAULT_RUBRIC

    return DEFAULT_RUBRIC


def _prompt_version() -> str:
    from callbench.grade.prompts import PROMPT_VERSION

    return PROMPT_VERSION


def _write_index(store: RunStore, rows: list[tuple[Any, ...]]) -> None:
    """The episodes table as a run would leave it (hashes of each trace file's text and content,
    its size and time)."""
    full = []
    for row in rows:
        st = store.trace_path(row[0]).stat()
        full.append((*row[:-1], st.st_size, st.st_mtime_ns, row[-1]))
    with store._lock:  # the generator writes the index in one transaction
        db: sqlite3.Connection = store._db()
        with db:
            db.executemany(
                "INSERT OR REPLACE INTO episodes (episode_id, candidate, agent_id, scenario_id, language,"
                " difficulty, repeat, end_reason, skip_reason, trace_sha256, input_tokens, output_tokens,"
                " cost_usd, trace_size, trace_mtime_ns, content_sha256)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", full)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("episodes", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--candidates", type=int, default=3)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        make_synthetic_run(a.out, a.episodes, seed=a.seed, candidates=a.candidates)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in a.out.rglob("*") if p.is_file())
    print(f"{a.out}: {a.episodes} episodes in {time.perf_counter() - t0:.1f} s, "
          f"{size / a.episodes / 1000:.1f} KB per episode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
