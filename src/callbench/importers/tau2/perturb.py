"""Perturbed gold trajectories of imported tau2 tasks, and callbench's verdicts on them.

A standing cross-check of callbench's verdicts against tau2-bench's own evaluator
(``benchmarks/tau2_verdicts.py`` runs both; the tests run callbench's side on the shipped fixture
against verdicts written down from the database comparison). Each kind edits the scenario's
reference path, the candidate replays it (``scripted:reference``) against the plan caller, and the
episode is graded with judges that give full marks (``scripted:met``), so only the executable
checks and the outcome can fail a call:

==========================  =====================================================================
kind                        edit of the gold tool calls
==========================  =====================================================================
``gold``                    none
``drop_last_write``         the last write call is left out
``change_argument``         one string argument of the first write gets another value
``extra_write``             a ``cancel_pending_order`` of a pending order the task never touches
``swap_independent_writes`` two writes on different records change places
``extra_read``              one more read (``list_all_product_types``)
``repeated_write``          the last write is sent twice
``reordered_item_list``     the item lists of a return or exchange are reversed
==========================  =====================================================================

A kind that does not apply to a task (no write to drop, no second record, no item list) yields no
trajectory. The database verdict (``db_ok``) compares the final state with the state the gold path
produces (:func:`callbench.bundle.state.check.state_differences`), the comparison tau2-bench's DB
check makes (it agreed with tau2's own evaluator on 641 of 641 trajectories at a2c0247, docs/peers.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from callbench.bundle.models import Bundle, ReferenceTurn, Scenario
from callbench.bundle.state.check import replay_reference, state_differences
from callbench.grade.grader import grade_trace
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.trace import Trace

from .tools import WRITE_TOOLS

KINDS: tuple[str, ...] = (
    "gold", "drop_last_write", "change_argument", "extra_write", "swap_independent_writes",
    "extra_read", "repeated_write", "reordered_item_list",
)
ITEM_LISTS = {"return_delivered_order_items": ("item_ids",),
              "exchange_delivered_order_items": ("item_ids", "new_item_ids")}

Call = dict[str, Any]
Path_ = list[dict[str, Any]]


class Verdict(BaseModel):
    """callbench's verdicts on one perturbed trajectory: the database equals the gold one
    (``db_ok``), the outcome is met, the call passes (default rule) and passes under the paper's
    rule (overall alone); ``missed`` = action checks not met, ``not_reached`` = those failed only by
    a predecessor."""

    scenario_id: str
    kind: str
    db_ok: bool
    outcome_met: bool | None
    passed: bool | None
    passed_overall_rule: bool | None
    overall: float | None
    missed: list[str]
    not_reached: list[str]


def _record(call: Call) -> str:
    args = call.get("arguments", {})
    return f"order:{args['order_id']}" if "order_id" in args else f"user:{args.get('user_id')}"


def _writes(path: Path_) -> list[tuple[int, int]]:
    return [(t, k) for t, turn in enumerate(path) for k, c in enumerate(turn.get("tool_calls", []))
            if c["name"] in WRITE_TOOLS]


def _pending_order_elsewhere(scen: Scenario, path: Path_) -> str | None:
    touched = {c["arguments"].get("order_id") for turn in path for c in turn.get("tool_calls", [])}
    orders = scen.hidden_state.get("orders", {})
    return next((o for o, rec in sorted(orders.items())
                 if o not in touched and isinstance(rec, dict) and rec.get("status") == "pending"), None)


def perturb(kind: str, scen: Scenario, path: Path_) -> Path_ | None:
    """The reference path ``path`` (turns as dicts) edited by ``kind`` (module docstring), or None
    when the kind does not apply to this task. ``path`` is not changed. Raises ``ValueError`` for an
    unknown kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown perturbation {kind!r}; one of {', '.join(KINDS)}")
    out: Path_ = [{**t, "tool_calls": [dict(c, arguments=dict(c["arguments"]))
                                        for c in t.get("tool_calls", [])]} for t in path]
    writes = _writes(out)
    if kind == "gold":
        return out
    if kind == "extra_read":
        last = max((t for t, turn in enumerate(out) if turn["tool_calls"]), default=None)
        if last is None:
            return None
        out[last]["tool_calls"].append({"name": "list_all_product_types", "arguments": {}})
        return out
    if not writes:
        return None
    t, k = writes[-1]
    if kind == "drop_last_write":
        del out[t]["tool_calls"][k]
        return out
    if kind == "repeated_write":
        out[t]["tool_calls"].insert(k + 1, dict(out[t]["tool_calls"][k], after_results=True))
        return out
    if kind == "change_argument":
        t, k = writes[0]
        call = out[t]["tool_calls"][k]
        key = next((a for a, v in call["arguments"].items() if isinstance(v, str) and a != "order_id"), None)
        if key is None:
            return None
        call["arguments"][key] = call["arguments"][key] + "9"
        return out
    if kind == "extra_write":
        order = _pending_order_elsewhere(scen, out)
        if order is None:
            return None
        out[t]["tool_calls"].insert(k + 1, {"name": "cancel_pending_order", "after_results": True,
                                            "arguments": {"order_id": order, "reason": "no longer needed"}})
        return out
    if kind == "swap_independent_writes":
        rec = {(t, k): _record(out[t]["tool_calls"][k]) for t, k in writes}
        pair = next(((a, b) for i, a in enumerate(writes) for b in writes[i + 1:] if rec[a] != rec[b]), None)
        if pair is None:
            return None
        (ta, ka), (tb, kb) = pair
        ca, cb = out[ta]["tool_calls"][ka], out[tb]["tool_calls"][kb]
        out[ta]["tool_calls"][ka], out[tb]["tool_calls"][kb] = (
            dict(cb, after_results=ca.get("after_results", False)),
            dict(ca, after_results=cb.get("after_results", False)),
        )
        return out
    # reordered_item_list
    for t, k in writes:
        call = out[t]["tool_calls"][k]
        lists = [a for a in ITEM_LISTS.get(call["name"], ()) if len(call["arguments"].get(a, [])) > 1]
        if lists:
            for a in lists:
                call["arguments"][a] = list(reversed(call["arguments"][a]))
            return out
    return None


async def _play(bundle: Bundle, cand: Bundle, sid: str, kind: str) -> Trace:
    agent, scen = bundle.scenario(sid)
    return await run_episode(
        agent, scen, candidate=create_scripted("scripted:reference", None, cand),
        caller=create_scripted("scripted:plan", None, bundle), bundle_name=bundle.meta.name,
        bundle_version=bundle.meta.version, bundle_hash=bundle.content_hash,
        episode_id=f"perturb-{sid}-{kind}", run_seed=0, repeat=0,
    )


async def verdicts(bundle: Bundle, kinds: tuple[str, ...] = KINDS,
                   on_trace: Callable[[Trace, Scenario], None] | None = None) -> list[Verdict]:
    """callbench's :class:`Verdict` on every applicable (scenario, kind) of an imported tau2
    ``bundle``, in scenario then kind order. ``on_trace`` sees each trace (the benchmark replays its
    executed calls in tau2-bench)."""
    judge = create_scripted_judge("scripted:met")
    out: list[Verdict] = []
    for agent, scen in bundle.scenarios():
        path = [t.model_dump(mode="json", exclude_none=True) for t in scen.reference_path or []]
        expected = replay_reference(agent, scen).touched
        for kind in kinds:
            edited = perturb(kind, scen, path)
            if edited is None:
                continue
            cand = bundle.model_copy(deep=True)
            cand.scenario(scen.id)[1].reference_path = [ReferenceTurn.model_validate(t) for t in edited]
            trace = await _play(bundle, cand, scen.id, kind)
            if on_trace is not None:
                on_trace(trace, scen)
            actual = trace.state.final if trace.state else {}
            db_ok = not state_differences(agent.state_tables or {}, expected, actual)
            g = await grade_trace(trace, bundle, judge, judge)
            paper = await grade_trace(trace, bundle, judge, judge, pass_rule="overall")
            out.append(Verdict(
                scenario_id=scen.id, kind=kind, db_ok=db_ok, outcome_met=g.outcome_met, passed=g.passed,
                passed_overall_rule=paper.passed, overall=g.overall,
                missed=[i.id for i in g.items if i.source == "action_check" and i.label == "not_met"],
                not_reached=[i.id for i in g.items if i.not_reached],
            ))
    return out
