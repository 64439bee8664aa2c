"""A run with one hostile candidate completes: that candidate's episodes are scored (its bad
output charged to it) and every other candidate's episodes are exactly what they are without it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from callbench.bundle.validate.audits import load_bundle
from callbench.grade.grader import load_episode_grades
from callbench.runfolder.store import RunStore
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters
from callbench.runs.session import run_and_grade

STARTER = Path(__file__).resolve().parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIO = "bank_unblock_sons_card_refusal"
DEEP = "[" * 5000 + "]" * 5000


def _hostile(tmp: Path) -> Path:
    """Replies a hostile model might send: arguments nested 5,000 deep, a lone surrogate, a
    schema-breaking call, then a goodbye."""
    path = tmp / "hostile.yaml"
    surrogate = json.loads('"\\ud800 hello"')
    path.write_text(yaml.safe_dump({"candidate": [
        {"content": "Hello."},
        {"tool_calls": [{"name": "verify_customer", "arguments": '{"identifier": ' + DEEP + "}"}]},
        {"content": surrogate, "tool_calls": [
            {"name": "verify_customer", "arguments": {"identifier_type": "passport", "extra": [1]}}]},
        {"content": "Goodbye."},
    ]}, allow_unicode=True), encoding="utf-8")
    return path


def _run(out: Path, candidates: list[str]) -> dict[str, dict[str, object]]:
    config = RunConfig(
        bundle_path=STARTER, out=out, candidates=[RoleSpec(spec=c) for c in candidates],
        caller=RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"), repeats=1, seed=11, concurrency=2,
        filters=ScenarioFilters(scenarios=[SCENARIO]), preflight=False,
    )
    manifest, gid = asyncio.run(run_and_grade(config, bundle=load_bundle(STARTER)))
    store = RunStore(out)
    grades = {g.episode_id: g for g in load_episode_grades(out, gid or "")}
    out_: dict[str, dict[str, object]] = {}
    for key in manifest.planned:
        trace = store.load_trace(key.episode_id)
        g = grades[key.episode_id]
        out_[key.candidate] = {"content": trace.canonical_json(content_only=True).replace(
            out.name, "RUN"), "overall": g.overall, "skipped": g.skipped, "trace": trace}
    store.close()
    return out_


def test_one_hostile_candidate_leaves_the_others_untouched(tmp_path: Path) -> None:
    hostile = f"scripted:file:{_hostile(tmp_path)}"
    alone = _run(tmp_path / "alone", ["scripted:reference"])
    both = _run(tmp_path / "both", ["scripted:reference", hostile])
    (ref,) = [k for k in both if k.startswith("scripted_reference")]
    (hkey,) = [k for k in both if k != ref]
    # the hostile candidate's episode completed, was scored, and its output was charged to it
    h = both[hkey]
    assert h["skipped"] is False and isinstance(h["overall"], float)
    trace = h["trace"]
    events = trace.tool_events  # type: ignore[attr-defined]
    assert any(e.parse_error for e in events)  # the deep arguments: a located parse error
    assert any(e.outcome == "schema_error" and not e.executed for e in events)
    assert any("\\ud800" in (m.content or "") for m in trace.messages)  # type: ignore[attr-defined]
    # the reference's episode is the same with or without the hostile candidate beside it
    assert both[ref]["content"] == alone[ref]["content"]
    assert both[ref]["overall"] == alone[ref]["overall"]
