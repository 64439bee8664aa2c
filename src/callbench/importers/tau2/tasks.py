"""One tau2-bench task as one callbench scenario.

A task's user scenario becomes the caller's brief; its gold actions become the reference path
(the candidate side of a correct call, with the lookups the gold list leaves out inserted:
:mod:`callbench.importers.tau2.paths`), action checks (the gold *write* actions that succeed, with
their arguments, in order) and one state check (the final state equals the reference path's);
``communicate_info`` and ``nl_assertions`` become judged task criteria. The decisions are recorded
in docs/decisions.md ("tau2 import").

The call shape (plan steps and reference turns) is :mod:`callbench.importers.tau2.calls`.
"""

from __future__ import annotations

import json
from typing import Any

from callbench.bundle.state.engine import StateStore
from callbench.importers.tau2.calls import TRANSFER, conversation
from callbench.importers.tau2.paths import PathNotes, causal_order, complete_path, identify_by_email
from callbench.importers.tau2.tools import WRITE_TOOLS

QUIRK_TASKS = frozenset({"20", "21", "36", "37", "100"})
"""Tasks whose gold state depends on the item-modification price quirk (README of the data)."""
CALL_DATETIME = "2024-05-15T15:00:00-04:00"
"""Retail has no clock; every call gets this fixed local time (the airline domain's fixed clock)."""


class TaskError(ValueError):
    """A task that cannot be converted; the message names the task and the field."""


def _words(tool: str, args: dict[str, Any]) -> str:
    order = args.get("order_id", "")
    if tool == "cancel_pending_order":
        return f"cancels order {order} (reason: {args.get('reason')})"
    if tool == "exchange_delivered_order_items":
        return (
            f"exchanges items {', '.join(args.get('item_ids', []))} of order {order} for "
            f"{', '.join(args.get('new_item_ids', []))}, difference on {args.get('payment_method_id')}"
        )
    if tool == "modify_pending_order_items":
        return (
            f"changes items {', '.join(args.get('item_ids', []))} of order {order} to "
            f"{', '.join(args.get('new_item_ids', []))}, difference on {args.get('payment_method_id')}"
        )
    if tool == "return_delivered_order_items":
        return (
            f"returns items {', '.join(args.get('item_ids', []))} of order {order}, refund to "
            f"{args.get('payment_method_id')}"
        )
    if tool == "modify_pending_order_address":
        return f"changes the shipping address of order {order} to {args.get('address1')}, {args.get('city')}"
    if tool == "modify_pending_order_payment":
        return f"moves the payment of order {order} to {args.get('payment_method_id')}"
    if tool == "modify_user_address":
        return (
            f"changes the default address of {args.get('user_id')} to {args.get('address1')}, "
            f"{args.get('city')}"
        )
    return f"calls {tool}"


ORDER_FREE_LISTS: dict[str, frozenset[str]] = {
    "return_delivered_order_items": frozenset({"item_ids"}),
    "exchange_delivered_order_items": frozenset({"item_ids", "new_item_ids"}),
}
"""Arguments that tau2-bench's tools sort before storing them (its retail ``tools.py``: a return's
and an exchange's item lists), so their order carries nothing: matched as the same items in any
order. ``modify_pending_order_items`` pairs ``item_ids[i]`` with ``new_item_ids[i]``, so its lists
keep ``eq`` (the state check judges a consistent reordering of both lists as tau2 does)."""


def _arg_matchers(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in args.items():
        if k in ORDER_FREE_LISTS.get(tool, ()) and isinstance(v, list):
            out[k] = {"contains": v, "exactly": True}
        else:
            out[k] = {"eq": v}
    return out


def _record(action: dict[str, Any]) -> str:
    """The record a write changes: its order (``order_id``) or, for a user's address, the user.
    Gold writes are ordered (``after``) only within one record: tau2's policy requires no order
    between changes to different orders, and its DB check cannot see one."""
    args = action["arguments"]
    if "order_id" in args:
        return f"order:{args['order_id']}"
    return f"user:{args.get('user_id')}"


def _user_of(store: StateStore, actions: list[dict[str, Any]], results: list[Any]) -> str | None:
    for a, r in zip(actions, results, strict=True):
        if a["name"].startswith("find_user_id") and isinstance(r, str):
            return r
        if "user_id" in a["arguments"]:
            return str(a["arguments"]["user_id"])
    for a in actions:
        order = store.get("orders", str(a["arguments"].get("order_id", "")))
        if order is not None:
            return str(order["user_id"])
    return None


def _identify(store: StateStore, known_info: str) -> dict[str, Any] | None:
    """The name-and-zip lookup of the one user whose zip code and name (or user id) the caller's
    known facts state, as a gold action; None unless exactly one user fits."""
    text = known_info.casefold()
    fits = []
    for uid in store.keys("users"):
        u = store.get("users", uid) or {}
        name, zip_code = u.get("name", {}), str(u.get("address", {}).get("zip", ""))
        named = (
            str(name.get("first_name", "")).casefold() in text
            and str(name.get("last_name", "")).casefold() in text
        )
        if zip_code and zip_code in text and (named or uid.casefold() in text):
            fits.append(u)
    if len(fits) != 1:
        return None
    u = fits[0]
    return {
        "name": "find_user_id_by_name_zip",
        "arguments": {
            "first_name": u["name"]["first_name"],
            "last_name": u["name"]["last_name"],
            "zip": u["address"]["zip"],
        },
    }


def convert_task(
    task: dict[str, Any],
    store: StateStore,
    *,
    agent_id: str,
    splits: list[str],
    source: str,
    notes: PathNotes | None = None,
) -> dict[str, Any]:
    """The scenario (``agents/<agent>/scenarios/<id>.yaml`` data) of one tau2 ``task``. ``store``
    is a fresh state of the domain (the gold actions are replayed on it to find the caller's user
    record and which gold writes succeed). The reference path is the gold actions in causal order
    with the lookups they leave out inserted (:mod:`callbench.importers.tau2.paths`); ``notes``, when
    given, collects how many were inserted and the values no lookup reveals. Raises
    :class:`TaskError` naming the task and field."""
    tid = str(task.get("id", "?"))
    where = f"{source}: task {tid}"
    try:
        ins = task["user_scenario"]["instructions"]
        crit = task["evaluation_criteria"]
        actions = [{"name": a["name"], "arguments": dict(a.get("arguments") or {})} for a in crit["actions"]]
    except (KeyError, TypeError) as e:
        raise TaskError(f"{where}: missing field {e}") from None
    for i, a in enumerate(actions):
        if not store.handles(a["name"]):
            raise TaskError(f"{where}: evaluation_criteria.actions.{i}: unknown tool {a['name']!r}")
    if TRANSFER in [a["name"] for a in actions[:-1]]:
        raise TaskError(f"{where}: a gold {TRANSFER} before the last action is not supported")
    offset = 0  # gold action i of the source is actions[i + offset]
    if not any(a["name"].startswith("find_user_id") for a in actions):
        found = _identify(store, str(ins.get("known_info") or ""))
        if found is not None:  # the reference path authenticates as the policy requires (a read)
            actions.insert(0, found)
            offset = 1
    ends = bool(actions) and actions[-1]["name"] == TRANSFER
    results: list[Any] = []
    checks: list[dict[str, Any]] = []
    writes_ok: list[str] = []
    writes_failed: list[str] = []
    failed_any = False
    for i, a in enumerate(actions):
        ans = store.call(a["name"], a["arguments"])
        results.append(ans.result)
        failed_any = failed_any or ans.error
        if a["name"] in WRITE_TOOLS:
            if ans.error:
                writes_failed.append(f"{a['name']} ({ans.result['message']})")
                continue
            writes_ok.append(_words(a["name"], a["arguments"]))
            checks.append(
                {
                    "id": f"gold_{i - offset}_{a['name']}",
                    "description": f"Gold write action {i - offset} of tau2 task {tid}: "
                    f"the agent {writes_ok[-1]}.",
                    "tool": a["name"],
                    "args": _arg_matchers(a["name"], a["arguments"]),
                    **({"after": [same[-1]]} if (same := [c["id"] for c in checks
                                                          if c.get("record") == _record(a)]) else {}),
                    "record": _record(a),
                    "importance": 3,
                    "diagnostic": "argument_accuracy",
                }
            )
    for c in checks:  # the record key only decided the order above; it is no check field
        c.pop("record", None)
    # Guard (docs/decisions.md "tau2 import"): with no successful gold write, the state check (and a
    # gold transfer, which the do-nothing audit candidate also makes) would be met by a call that
    # does nothing; they then apply only once the caller is authenticated as the gold path does, or,
    # when the gold path has no lookup, as the caller's known facts identify them.
    auth = next((a for a in actions if a["name"].startswith("find_user_id")), None)
    guard: list[str] = []
    if (not writes_ok or ends) and auth is not None:
        checks.insert(
            0,
            {
                "id": "authenticates",
                "tool": auth["name"],
                "args": _arg_matchers(auth["name"], auth["arguments"]),
                "importance": 2,
                "diagnostic": "policy_compliance",
                "description": "The agent authenticates the caller (the policy's first step).",
            },
        )
        guard = ["authenticates"]
    if ends:
        checks.append(
            {
                "id": "gold_transfer",
                "tool": TRANSFER,
                "importance": 3,
                "diagnostic": "tool_choice",
                "description": f"The gold path of tau2 task {tid} ends with a transfer to a human agent.",
                **({"applies_after": guard} if guard else {}),
                **({"after": [checks[-1]["id"]]} if writes_ok else {}),
            }
        )
    if writes_ok:
        guard = []
    user_id = _user_of(store, actions, results)
    hidden: dict[str, Any] = {}
    if user_id is not None and store.base["users"].get(user_id) is not None:
        user = store.base["users"][user_id]
        hidden = {
            "user": user,
            "orders": {
                o: store.base["orders"][o] for o in user.get("orders", []) if o in store.base["orders"]
            },
        }
    known = json.dumps(ins, ensure_ascii=False)
    ordered = [actions[k] for k in causal_order(actions, results, known)]
    email = None
    if not any(a["name"].startswith("find_user_id") for a in ordered):
        # the caller gives an email: the reference path authenticates with it first (a read that
        # reveals the user id the lookups need; no check is added: the gold list has no lookup)
        email = identify_by_email(store, str(ins.get("known_info") or ""))
        ordered = ([email] if email is not None else []) + ordered
    steps, path = conversation(ordered, ends)  # provisional: the lookups need the known facts
    goal = "The agent authenticates the caller (email, or name and zip code) and "
    goal += (
        ("then " + "; then ".join(writes_ok) + ".")
        if writes_ok
        else "makes no change to any order or account."
    )
    if writes_failed:
        goal += (
            " The source's gold path also tries "
            + "; ".join(writes_failed)
            + ", which fails; nothing changes."
        )
    if ends:
        goal += " The call ends with a transfer to a human agent."
    purpose = (task.get("description") or {}).get("purpose")
    if purpose:
        goal += f" Source purpose: {purpose}"
    n_writes = len(writes_ok) + len(writes_failed)
    hard = n_writes >= 2 or bool(writes_failed) or tid in QUIRK_TASKS or len(actions) > 8
    criteria = []
    for k, info in enumerate(crit.get("communicate_info") or []):
        criteria.append(
            {
                "id": f"communicate_{k}",
                "pillar": "task",
                "importance": 2,
                "diagnostic": "grounding",
                "statement": f"The agent tells the caller this value from its tools: {info}.",
                "anchors": {
                    "met": f"The caller hears {info} (said in words or digits), correctly.",
                    "partial": "The agent gives the value only in part or with a correction the caller "
                    "must work out.",
                    "not_met": "The value is never said, or a different value is given.",
                },
            }
        )
    for k, stmt in enumerate(crit.get("nl_assertions") or []):
        criteria.append(
            {
                "id": f"assertion_{k}",
                "pillar": "task",
                "importance": 2,
                "diagnostic": "outcome_reached",
                "statement": stmt,
                "anchors": {
                    "met": "The call clearly shows the statement holds.",
                    "partial": "The statement holds only in part.",
                    "not_met": "The statement does not hold.",
                },
            }
        )
    brief: dict[str, Any] = {
        "context": "You are a customer calling an online store's customer service line by phone. "
        + str(ins.get("task_instructions") or "").strip(),
        "reason": str(ins.get("reason_for_call") or "").strip() or "(none given)",
        "known_facts": {"what_you_know": str(ins.get("known_info") or "").strip() or "(nothing)"},
        "unknown_facts": [str(ins["unknown_info"]).strip()] if ins.get("unknown_info") else [],
        "plan": steps,
        "language": "en-US",
        "script": "Latin",
        "datetime": CALL_DATETIME,
        "persona": str(ins.get("task_instructions") or "").strip(),
    }
    scenario = {
        "id": f"tau2_retail_{int(tid):03d}" if tid.isdigit() else f"tau2_retail_{tid}",
        "agent": agent_id,
        "title": f"tau2-bench retail task {tid}",
        "goal": goal[:4000],
        "language": "en-US",
        "difficulty": "hard" if hard else "medium",
        "tags": sorted(
            {
                "tau2",
                "retail",
                *(f"split_{s}" for s in splits),
                *(["tau2_quirk_item_price"] if tid in QUIRK_TASKS else []),
                *(["gold_write_fails"] if writes_failed else []),
                *(["gold_action_fails"] if failed_any else []),
            }
        ),
        "brief": brief,
        "hidden_state": hidden,
        "channel": {"seeded_noise": True},
        "action_checks": checks,
        "state_checks": [
            {
                "id": "final_state",
                "description": "The final database state equals the one the gold actions produce "
                "(tau2's DB check).",
                "importance": 3,
                "diagnostic": "outcome_reached",
                **({"applies_after": guard} if guard else {}),
            }
        ],
        "criteria": criteria,
        "reference_path": path,
    }
    named = _named_in_brief(scenario)
    if named:  # values of the caller's own records that its instructions name: facts it knows
        brief["known_facts"]["details_in_your_instructions"] = named
    # the lookups tau2's gold list leaves out, so that every reference value is known before its
    # call (paths.complete_path; the gold writes and the checks above are unchanged)
    facts = [f"{k} {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
             for k, v in brief["known_facts"].items()]
    done = complete_path(ordered, StateStore(store.base, store.spec), facts, _said(ins))
    done.inserted += email is not None  # the email lookup is one the gold list leaves out too
    if done.told:  # values tau2's instructions give the user that no record of theirs holds
        brief["known_facts"]["details_in_your_instructions"] = named + [
            v for v in done.told if v not in named
        ]
    brief["plan"], path = conversation(done.calls, ends)
    scenario["reference_path"] = path
    if notes is not None:
        notes.add(str(scenario["id"]), done, path)
    return scenario


def _said(ins: dict[str, Any]) -> str:
    """The tau2 user's instructions as one text (what the caller is told)."""
    return "\n".join(str(ins.get(k) or "") for k in ("reason_for_call", "known_info", "task_instructions"))


def _named_in_brief(scenario: dict[str, Any]) -> list[Any]:
    """Hidden-state values that the brief names (an order id, an item, a city), found by the
    validator's own isolation audit; tau2's user is told them, so they are known facts. Only those
    values are protected from the channel's seeded noise, not every word of the request."""
    from callbench.bundle.models import Scenario
    from callbench.bundle.validate.content import audit_isolation

    paths: list[str] = []
    audit_isolation(Scenario.model_validate(scenario), lambda path, code, message: paths.append(path))
    values: list[Any] = []
    for path in paths:
        node: Any = scenario
        for part in path.split("."):
            node = (
                node[int(part)]
                if isinstance(node, list)
                else node.get(part)
                if isinstance(node, dict)
                else None
            )
        if node is not None and node not in values:
            values.append(node)
    return values
