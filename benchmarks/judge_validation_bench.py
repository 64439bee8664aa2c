"""Measure the embedded model's validation as both judges on the starter bundle,
and ship the result with the package so the demo's report states it.

    python benchmarks/judge_validation_bench.py [--model local:0.5b] [--scenarios N | --ids A,B]
        [--out src/callbench/audit/validations/embedded-0.5b.json]

Runs ``callbench audit --judges`` on the starter with the task and conversation judges exactly as
``callbench demo`` builds them (same spec and settings: :func:`callbench.runs.demo.demo_config`),
on the demo's own scenarios by default (:func:`callbench.runs.demo.choose_demo_scenarios`; the
first ``--scenarios`` of them), so the saved validation matches the demo's grade sets: same bundle
hash, judge spec, settings and judge prompt version. Writes the :class:`JudgeAudit` JSON to
``--out`` (package data: ``callbench/audit/validations/``) with a note saying which scenarios it
covers and which it does not, and prints each judge's balanced accuracy, recall per class, the
null-trace share called met, the gate, and the wall time. Needs the ``[local]`` extra; run it
niced on a shared machine. The saved file no longer matches once the starter's content hash or
the judge prompts change: rerun it then.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from callbench.audit.core import audit_bundle
from callbench.audit.judges import AuditJudges
from callbench.audit.store import save_judge_audit
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.grader import make_judge_client
from callbench.runs.demo import choose_demo_scenarios, demo_config, starter_path

DEFAULT_OUT = Path(__file__).parents[1] / "src" / "callbench" / "audit" / "validations" / "embedded-0.5b.json"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="local:0.5b")
    ap.add_argument("--scenarios", type=int, default=3, help="the first N of the demo's scenarios")
    ap.add_argument("--ids", default="", help="comma-separated scenario ids instead of the demo's")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    bundle = load_bundle(starter_path())
    ids = [x for x in args.ids.split(",") if x]
    if not ids:
        ids = [s.id for s in choose_demo_scenarios(bundle)][: args.scenarios]
    config = demo_config(None, model=args.model, bundle=bundle)
    task = make_judge_client(config.task_judge.spec, config.task_judge.settings, "task_judge")
    conv = make_judge_client(config.conversation_judge.spec, config.conversation_judge.settings,
                             "conversation_judge")
    start = time.perf_counter()
    try:
        report = await audit_bundle(bundle, scenario_ids=ids, judges=AuditJudges(task, conv, concurrency=1),
                                    static_problems=[])
    finally:
        await task.aclose()
        await conv.aclose()
    seconds = time.perf_counter() - start
    audit = report.judges
    assert audit is not None
    total = len(bundle.scenarios())
    audit.note = (
        f"Measured by benchmarks/judge_validation_bench.py in {seconds:.0f} s on {len(ids)} of the "
        f"starter's {total} scenarios ({', '.join(ids)}), each graded on its reference replay, its "
        f"null-floor traces and its contrastive traces. It does not cover the other "
        f"{total - len(ids)} scenarios, their agents and languages, nor any other judge settings."
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    written = save_judge_audit(audit, args.out)
    print(f"wrote {written} ({seconds:.0f} s, {audit.episodes} traces, scenarios {', '.join(ids)})")
    for role, acc in audit.judges.items():
        c = acc.classes
        ba = "—" if acc.balanced_accuracy is None else f"{acc.balanced_accuracy:.2f}"
        print(f"{role} {acc.judge.spec}: balanced accuracy {ba}; recall met "
              f"{c.recall_met.k}/{c.recall_met.n}, not met {c.recall_not_met.k}/{c.recall_not_met.n}; "
              f"null-trace met {acc.null_met.k}/{acc.null_met.n}; judge errors {acc.judge_errors}; gate "
              f"{'passed' if acc.gate.passed else 'FAILED: ' + '; '.join(acc.gate.reasons)}")
    for spec, fs in audit.floor_scores.items():
        print(f"floor agent {spec}: overall {fs.overall} over {fs.episodes} traces with these judges")


if __name__ == "__main__":
    asyncio.run(main())
