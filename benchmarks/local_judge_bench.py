"""Time the embedded model as both judges on the traces of a finished run (the demo's, say).

    python benchmarks/local_judge_bench.py RUN_DIR [--model local:0.5b] [--episodes N]

Grades each trace with the task and conversation judges on the local model, in the run's order,
and prints per request: prompt tokens, tokens read (not served from the prefix kept by llama.cpp),
tokens generated, seconds reading and generating; then the totals and a digest of the judges'
labels, so two settings (e.g. ``CALLBENCH_LOCAL_DRAFT=0`` and ``=8``) can be compared for speed
and for whether the labels changed. Needs the ``[local]`` extra; nothing is written to the run.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from pathlib import Path

from callbench.bundle.validate.audits import load_bundle
from callbench.grade.grader import grade_trace
from callbench.models.base import ModelSettings
from callbench.models.registry import create_client
from callbench.runfolder.store import RunStore


class Timed:
    """Wraps a local client; keeps each request's ``last_timings``."""

    def __init__(self, client: object, rows: list[dict[str, float | str]]) -> None:
        self.client = client
        self.rows = rows

    def __getattr__(self, name: str) -> object:
        return getattr(self.client, name)

    async def complete(self, request):  # type: ignore[no-untyped-def]
        resp = await self.client.complete(request)  # type: ignore[attr-defined]
        self.rows.append({"role": request.context.role, **self.client.last_timings})  # type: ignore[attr-defined]
        return resp


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--model", default="local:0.5b")
    ap.add_argument("--episodes", type=int, default=0, help="grade only the first N traces")
    args = ap.parse_args()
    store = RunStore(args.run_dir)
    manifest = store.load_manifest()
    if manifest is None:
        raise SystemExit(f"{args.run_dir}: not a run folder")
    bundle = load_bundle(Path(manifest.bundle_path))
    ids = [k.episode_id for k in manifest.planned if k.episode_id in store.finished_ids()]
    if args.episodes:
        ids = ids[: args.episodes]
    rows: list[dict[str, float | str]] = []
    settings = ModelSettings(temperature=0.0, seed=manifest.seed, max_tokens=1000)
    task = Timed(create_client(args.model, settings, bundle=bundle), rows)
    conv = Timed(create_client(args.model, settings, bundle=bundle), rows)
    digest = hashlib.sha256()
    t0 = time.perf_counter()
    for eid in ids:
        grade = await grade_trace(store.load_trace(eid), bundle, task, conv)  # type: ignore[arg-type]
        labels = [(i.id, str(i.label), i.rating, i.reason) for i in grade.items]
        digest.update(json.dumps(labels, sort_keys=True, default=str).encode())
        print(f"{eid}: overall {grade.overall}")
    wall = time.perf_counter() - t0
    for r in rows:
        print(f"  {r['role']:<19} prompt {r['prompt_tokens']:>5.0f} read {r['prompt_tokens_evaluated']:>5.0f}"
              f" gen {r['generated_tokens']:>4.0f} ({r['generation_tokens_per_second']:.1f} tok/s)"
              f" {r['seconds']:.1f} s")
    read = sum(float(r["prompt_tokens_evaluated"]) for r in rows)
    gen = sum(float(r["generated_tokens"]) for r in rows)
    secs = sum(float(r["seconds"]) for r in rows)
    print(f"{len(rows)} judge requests: {read:.0f} prompt tokens read, {gen:.0f} generated, "
          f"{secs:.1f} s in llama.cpp, {wall:.1f} s wall; labels digest {digest.hexdigest()[:12]}")


if __name__ == "__main__":
    asyncio.run(main())
