"""Side by side: the same scripted candidates over tau2-bench retail in callbench and in tau2-bench
(docs/peers.md explains how to read the numbers).

For each candidate, every imported retail task is played in callbench (``scripted:plan`` caller,
the paper's channel) and graded on its executable checks (action checks and the state check; the
judged criteria need judges and are left out). The same candidate's executed tool calls are then
replayed in tau2-bench's own retail environment, when tau2-bench is installed (``import tau2``),
and scored with tau2's DB check: the final database hash equals the hash after its gold actions.
Without tau2-bench that column is skipped; callbench's own DB comparison (the state check without
its guard) stands in as ``cb_db``.

Candidates (no model, no network): ``reference`` (the gold path), ``hangup`` (does nothing),
``sloppy`` (the gold path without its last write call on every second task).

Run: ``python benchmarks/tau2_side_by_side.py --data TAU2_BENCH [--limit N] [--per-task]``, where
TAU2_BENCH is a clone of https://github.com/sierra-research/tau2-bench (its
data/tau2/domains/retail/ is read), a data folder holding retail/, or the retail folder itself;
``$CALLBENCH_TAU2_DATA`` is the default. Without it, the ten-task test fixture
(tests/importers/data/tau2) is used, which checks the plumbing, not the whole domain's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from callbench.bundle.models import Bundle
from callbench.bundle.state.check import replay_reference, state_differences
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.action_checks import grade_action_checks
from callbench.grade.models import Label
from callbench.importers.tau2 import Tau2ImportError, import_tau2
from callbench.importers.tau2.tools import WRITE_TOOLS
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import Trace

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "importers" / "data" / "tau2"
DEFAULT_DATA = Path(os.environ.get("CALLBENCH_TAU2_DATA") or FIXTURE)


def sloppy_bundle(bundle: Bundle) -> Bundle:
    """A copy whose reference paths lose their last write call on every second task."""
    b = bundle.model_copy(deep=True)
    for agent in b.agents.values():
        for s in agent.scenarios:
            if s.reference_path is None or int(s.id.rsplit("_", 1)[-1]) % 2:
                continue
            for turn in reversed(s.reference_path):
                writes = [k for k, c in enumerate(turn.tool_calls) if c.name in WRITE_TOOLS]
                if writes:
                    del turn.tool_calls[writes[-1]]
                    break
    return b


async def play(bundle: Bundle, cand_bundle: Bundle, spec: str, sid: str) -> Trace:
    agent, scen = bundle.scenario(sid)
    return await run_episode(
        agent,
        scen,
        candidate=create_scripted(spec, None, cand_bundle),
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version,
        bundle_hash=bundle.content_hash,
        episode_id=f"sbs-{sid}",
        run_seed=0,
        repeat=0,
    )


def tau2_db_pass(
    tau2: Any, gold: list[tuple[str, dict[str, Any]]], calls: list[tuple[str, dict[str, Any]]]
) -> bool:
    """tau2-bench's DB check on a call sequence: hash after ``calls`` == hash after ``gold``."""

    def run(seq: list[tuple[str, dict[str, Any]]]) -> str:
        env = tau2.get_environment()
        for name, args in seq:
            with contextlib.suppress(Exception):  # a refused call changes nothing, as in tau2's own loop
                env.use_tool(name, **args)
        return str(env.get_db_hash())

    return run(calls) == run(gold)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--limit", type=int, default=0, help="Only the first N tasks.")
    ap.add_argument("--per-task", action="store_true", help="Print one row per task and candidate.")
    args = ap.parse_args()
    tau2 = None
    if importlib.util.find_spec("tau2") is not None:
        import tau2.domains.retail.environment as tau2  # type: ignore[no-redef]
    print(f"tau2-bench data: {args.data}")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            import_tau2(args.data, Path(tmp) / "retail")
        except Tau2ImportError as e:
            sys.exit(f"error: {e}")
        bundle = load_bundle(Path(tmp) / "retail")
    ids = [s.id for _, s in bundle.scenarios()][: args.limit or None]
    candidates = {
        "reference": ("scripted:reference", bundle),
        "hangup": ("scripted:hangup", bundle),
        "sloppy": ("scripted:reference", sloppy_bundle(bundle)),
    }
    print(f"tau2-bench: {'installed' if tau2 else 'not installed (tau2 column skipped)'}; {len(ids)} tasks")
    for name, (spec, cand_bundle) in candidates.items():
        rows = []
        for sid in ids:
            agent, scen = bundle.scenario(sid)
            trace = asyncio.run(play(bundle, cand_bundle, spec, sid))
            items = grade_action_checks(trace, scen, agent)
            applicable = [i for i in items if i.label != Label.NOT_APPLICABLE]
            cb_pass = bool(applicable) and all(i.label == Label.MET for i in applicable)
            expected = replay_reference(agent, scen).touched
            actual = trace.state.final if trace.state else {}
            cb_db = not state_differences(agent.state_tables or {}, expected, actual)
            t2 = None
            if tau2 is not None:
                calls = [  # callbench's own concluding_message argument is not a tau2 parameter
                    (e.name, {k: v for k, v in (e.arguments or {}).items() if k != "concluding_message"})
                    for e in trace.tool_events
                    if e.executed and e.known_tool
                ]
                gold = [(c.name, c.arguments) for t in scen.reference_path or [] for c in t.tool_calls]
                t2 = tau2_db_pass(tau2, gold, calls)
            rows.append((sid, cb_pass, cb_db, t2))
            if args.per_task:
                print(
                    f"  {name:9} {sid}: callbench {'pass' if cb_pass else 'fail'}, cb_db "
                    f"{'pass' if cb_db else 'fail'}, tau2 {'-' if t2 is None else 'pass' if t2 else 'fail'}"
                )
        n = len(rows)
        cb = sum(r[1] for r in rows)
        db = sum(r[2] for r in rows)
        other = [r[3] if r[3] is not None else r[2] for r in rows]
        agree = sum(r[1] == o for r, o in zip(rows, other, strict=True))
        label = "tau2 DB" if tau2 else "cb_db (stand-in)"
        line = (
            f"{name:9} callbench checks {cb}/{n} ({100 * cb / n:.1f}%)  cb_db {db}/{n} ({100 * db / n:.1f}%)"
        )
        if tau2:
            t2n = sum(bool(r[3]) for r in rows)
            line += f"  tau2 DB {t2n}/{n} ({100 * t2n / n:.1f}%)"
            line += f"  cb_db = tau2: {sum(r[2] == r[3] for r in rows)}/{n}"
        line += f"  agreement callbench vs {label}: {agree}/{n} ({100 * agree / n:.1f}%)"
        print(line)


if __name__ == "__main__":
    main()
