"""callbench's verdicts against tau2-bench's own evaluator on perturbed gold trajectories.

Every imported retail task's gold path is replayed in callbench as is and under seven
perturbations (:mod:`callbench.importers.tau2.perturb`: drop the last write, change an argument, an
extra write, two independent writes swapped, an extra read, a repeated write, a reordered item
list), graded with judges that give full marks. When tau2-bench is importable (install it in its
own environment, as its README says, and run this script there with callbench installed too),
each trajectory's executed calls, with callbench's answers, go to tau2's own
``EnvironmentEvaluator.calculate_reward`` against the gold actions of tau2's own task, and its DB
match is the reference verdict. The same calls are also replayed against callbench's imported gold
path by hash (``tau2_side_by_side.tau2_db_pass``), and each of callbench's tool answers is compared
with tau2's live one. Without tau2-bench, callbench's database comparison stands in and the output
says so.

Printed per kind: trajectories, DB wrong (tau2's verdict), and the confusion of callbench's
outcome and pass with it; then every trajectory where callbench's DB verdict, outcome or pass
disagrees with tau2's. Targets: the outcome agrees with tau2's DB reward on every trajectory,
and pass never passes a trajectory tau2 fails. docs/peers.md records the table with the commit.

Run: ``python benchmarks/tau2_verdicts.py --data TAU2_BENCH`` (a tau2-bench clone, its data
folder, or the retail folder; ``$CALLBENCH_TAU2_DATA``; default: the ten-task test fixture).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from tau2_side_by_side import DEFAULT_DATA, tau2_db_pass

from callbench.bundle.models import Scenario
from callbench.bundle.validate.audits import load_bundle
from callbench.importers.tau2 import Tau2ImportError, import_tau2
from callbench.importers.tau2.perturb import KINDS, verdicts
from callbench.trace import Trace


def _without_nulls(v: Any) -> Any:
    # tau2's pydantic records print unset optional fields as null; callbench's leave them out
    if isinstance(v, dict):
        return {k: _without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_without_nulls(x) for x in v]
    return v


def _answer(content: Any) -> Any:
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except json.JSONDecodeError:
            return content.removeprefix("Error: ")
    # callbench answers a refusal (and a transfer) as {"error" or "status": code, "message": text};
    # tau2 as the text alone
    if isinstance(content, dict) and "message" in content and set(content) <= {"error", "status", "message"}:
        return str(content["message"])
    return _without_nulls(content)


def tau2_evaluator_db(tau2: Any, task: Any, trace: Trace) -> tuple[bool, list[str]]:
    """tau2-bench's own ``EnvironmentEvaluator.calculate_reward`` on ``trace``'s executed calls,
    against the gold actions of tau2's ``task`` (its tasks.json, not callbench's import).

    The calls become tau2 messages (one assistant tool call and its tool message each, the content
    callbench's backend answered), replayed leniently (tau2's ``strict_replay=False``: a recorded
    answer that differs is logged, the state change is the same). Returns (DB match, the names of
    the calls whose callbench answer differs from tau2's own, null fields and the "Error: " prefix
    aside).
    """
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    msgs: list[Any] = []
    differ: list[str] = []
    live = tau2.get_environment()
    for e in trace.tool_events:
        if not (e.executed and e.known_tool):
            continue
        args = {k: v for k, v in (e.arguments or {}).items() if k != "concluding_message"}
        tc = ToolCall(id=e.tool_call_id, name=e.name, arguments=args)
        content = e.result if isinstance(e.result, str) else json.dumps(e.result)
        if _answer(live.get_response(tc).content) != _answer(e.result):
            differ.append(e.name)
        msgs.append(AssistantMessage(role="assistant", content=None, tool_calls=[tc]))
        msgs.append(ToolMessage(id=e.tool_call_id, role="tool", content=content))
    info = EnvironmentEvaluator.calculate_reward(tau2.get_environment, task, msgs, strict_replay=False)
    return bool(info.db_check and info.db_check.db_match), differ


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    tau2: Any = None
    if importlib.util.find_spec("tau2") is not None:
        import tau2.domains.retail.environment as tau2  # type: ignore[no-redef]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            import_tau2(args.data, Path(tmp) / "retail")
        except Tau2ImportError as e:
            sys.exit(f"error: {e}")
        bundle = load_bundle(Path(tmp) / "retail")
    tau2_ok: dict[str, bool] = {}
    hash_ok: dict[str, bool] = {}
    answers_differ: dict[str, list[str]] = {}
    tasks = {int(t.id): t for t in tau2.get_tasks(None)} if tau2 is not None else {}

    def on_trace(trace: Trace, scen: Scenario) -> None:
        if tau2 is None:
            return
        calls = [(e.name, {k: v for k, v in (e.arguments or {}).items() if k != "concluding_message"})
                 for e in trace.tool_events if e.executed and e.known_tool]
        gold = [(c.name, c.arguments) for t in scen.reference_path or [] for c in t.tool_calls]
        hash_ok[trace.episode_id] = tau2_db_pass(tau2, gold, calls)
        ok, differ = tau2_evaluator_db(tau2, tasks[int(scen.id.rsplit("_", 1)[-1])], trace)
        tau2_ok[trace.episode_id] = ok
        if differ:
            answers_differ[trace.episode_id] = differ

    table = asyncio.run(verdicts(bundle, on_trace=on_trace))
    judge = ("tau2 EnvironmentEvaluator DB check" if tau2 is not None
             else "callbench DB comparison (tau2-bench not installed)")
    print(f"data: {args.data}; reference verdict: {judge}; {len(table)} trajectories")
    if tau2 is not None:
        split = sorted(k for k in tau2_ok if tau2_ok[k] != hash_ok[k])
        print(f"tau2 evaluator vs tau2 hash replay of callbench's gold path: {len(tau2_ok) - len(split)} "
              f"of {len(tau2_ok)} agree{': ' + ', '.join(split) if split else ''}")
        n_calls = sum(len(d) for d in answers_differ.values())
        print(f"callbench's tool answers differ from tau2's live ones on {n_calls} calls in "
              f"{len(answers_differ)} trajectories")
        for ep, names in list(answers_differ.items())[:20]:
            print(f"  answer differs: {ep}: {', '.join(names)}")
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
        if kind in rows:
            r = rows[kind]
            print(f"{kind:25} {r['n']:>4} {r['ref_fail']:>9} {r['db_agree']:>8} {r['outcome_agree']:>13} "
                  f"{r['pass_on_fail']:>12} {r['paper_pass_on_fail']:>25}")
    for v in table:
        ref = tau2_ok.get(f"perturb-{v.scenario_id}-{v.kind}", v.db_ok)
        if v.db_ok != ref or bool(v.outcome_met) != ref or (v.passed and not ref):
            print(f"disagreement: {v.scenario_id} {v.kind}: tau2 DB {ref}, callbench DB {v.db_ok}, "
                  f"outcome {v.outcome_met}, pass {v.passed}")


if __name__ == "__main__":
    main()
