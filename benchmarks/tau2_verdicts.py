"""callbench's verdicts against tau2-bench's own evaluator on perturbed gold trajectories.

Every imported retail task's gold path is replayed in callbench as is and under seven
perturbations (:mod:`callbench.importers.tau2.perturb`: drop the last write, change an argument, an
extra write, two independent writes swapped, an extra read, a repeated write, a reordered item
list), graded with judges that give full marks. When tau2-bench is importable (install it in its
own environment, as its README says, and run this script there with callbench installed too),
each trajectory's executed calls are replayed in tau2's retail environment and scored with its DB
check; otherwise callbench's database comparison stands in and the table says so.

Printed per kind: trajectories, DB wrong (tau2's verdict), and the confusion of callbench's
outcome and pass with it. Targets: the outcome agrees with tau2's DB reward on every trajectory,
and pass never passes a trajectory tau2 fails. docs/peers.md records the table with the commit.

Run: ``python benchmarks/tau2_verdicts.py --data TAU2_BENCH`` (a tau2-bench clone, its data
folder, or the retail folder; ``$CALLBENCH_TAU2_DATA``; default: the ten-task test fixture).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from tau2_side_by_side import DEFAULT_DATA, tau2_db_pass

from callbench.bundle.loader import load_bundle
from callbench.bundle.models import Scenario
from callbench.importers.tau2 import Tau2ImportError, import_tau2
from callbench.importers.tau2.perturb import KINDS, verdicts
from callbench.trace import Trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    tau2: Any = None
    if importlib.util.find_spec("tau2") is not None:
        import tau2.domains.retail.environment as tau2  # type: ignore[import-not-found,no-redef]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            import_tau2(args.data, Path(tmp) / "retail")
        except Tau2ImportError as e:
            sys.exit(f"error: {e}")
        bundle = load_bundle(Path(tmp) / "retail")
    tau2_ok: dict[str, bool] = {}

    def on_trace(trace: Trace, scen: Scenario) -> None:
        if tau2 is None:
            return
        calls = [(e.name, {k: v for k, v in (e.arguments or {}).items() if k != "concluding_message"})
                 for e in trace.tool_events if e.executed and e.known_tool]
        gold = [(c.name, c.arguments) for t in scen.reference_path or [] for c in t.tool_calls]
        tau2_ok[trace.episode_id] = tau2_db_pass(tau2, gold, calls)

    table = asyncio.run(verdicts(bundle, on_trace=on_trace))
    judge = "tau2 DB check" if tau2 is not None else "callbench DB comparison (tau2-bench not installed)"
    print(f"data: {args.data}; reference verdict: {judge}; {len(table)} trajectories")
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for v in table:
        ref = tau2_ok.get(f"perturb-{v.scenario_id}-{v.kind}", v.db_ok)
        r = rows[v.kind]
        r["n"] += 1
        r["ref_fail"] += not ref
        r["db_agree"] += v.db_ok == ref
        r["outcome_agree"] += bool(v.outcome_met) == ref
        r["pass_on_fail"] += bool(v.passed) and not ref
        r["paper_pass_on_fail"] += bool(v.passed_overall_rule) and not ref
    head = f"{'kind':25} {'n':>4} {'ref fails':>9} {'DB agree':>8} {'outcome agree':>13} " \
           f"{'pass on fail':>12} {'overall-rule pass on fail':>25}"
    print(head)
    for kind in KINDS:
        r = rows.get(kind)
        if r:
            print(f"{kind:25} {r['n']:>4} {r['ref_fail']:>9} {r['db_agree']:>8} {r['outcome_agree']:>13} "
                  f"{r['pass_on_fail']:>12} {r['paper_pass_on_fail']:>25}")


if __name__ == "__main__":
    main()
