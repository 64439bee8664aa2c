"""The stateful backend through a whole call, and the state check: a
small shop bundle whose tools answer from a state; the trace records every change and saves the
final state; the state check compares it with the reference path's state, with a readable
difference, restricted to tables or fields, and guarded like an action check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle, validate_path
from callbench.grade.action_checks import GradeError, grade_action_checks
from callbench.grade.models import Label
from callbench.models.scripted.models import create_scripted
from callbench.models.scripted.script import ScriptedFileModel
from callbench.sim.episode import run_episode
from callbench.trace import Trace

ORDERS = {
    "#W1": {"order_id": "#W1", "status": "pending", "note": "", "city": "Austin"},
    "#W2": {"order_id": "#W2", "status": "delivered", "note": "", "city": "Austin"},
}
AGENT: dict[str, Any] = {
    "id": "shop",
    "name": "Shop line",
    "domain": "retail",
    "languages": ["en-US"],
    "direction": "inbound",
    "tools": [
        {
            "name": "get_order",
            "description": "Look up an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
        {
            "name": "cancel_order",
            "description": "Cancel a pending order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
        {
            "name": "add_note",
            "description": "Note on an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "note": {"type": "string"}},
                "required": ["order_id", "note"],
            },
        },
    ],
    "state": {
        "tables": {"orders": "state/orders.json"},
        "tools": {
            "get_order": {"op": "get", "table": "orders", "key": "order_id", "not_found": "Order not found"},
            "cancel_order": {
                "op": "update",
                "table": "orders",
                "key": "order_id",
                "require": [
                    {
                        "field": "status",
                        "matcher": {"eq": "pending"},
                        "message": "Only a pending order can be cancelled",
                    }
                ],
                "set": {"status": "=cancelled"},
            },
            "add_note": {"op": "update", "table": "orders", "key": "order_id", "set": {"note": "note"}},
        },
    },
}


def scenario(**over: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "id": "cancel_w1",
        "agent": "shop",
        "goal": "Cancel order W1 and note why.",
        "language": "en-US",
        "difficulty": "medium",
        "brief": {
            "context": "You call your shop.",
            "reason": "Cancel an order.",
            "language": "en-US",
            "script": "Latin",
            "datetime": "2026-01-05T10:00:00+00:00",
            "plan": [
                {"id": "ask", "trigger": "greeted", "meaning": "Please cancel my order."},
                {"id": "bye", "trigger": "done", "meaning": "Thanks, bye."},
            ],
        },
        "action_checks": [{"id": "cancels", "tool": "cancel_order", "args": {"order_id": "#W1"}}],
        "state_checks": [{"id": "final_state"}],
        "reference_path": [
            {"speech": "Hello, shop line."},
            {
                "before_tools": "One moment.",
                "tool_calls": [
                    {"name": "get_order", "arguments": {"order_id": "#W1"}},
                    {"name": "cancel_order", "arguments": {"order_id": "#W1"}},
                    {"name": "add_note", "arguments": {"order_id": "#W1", "note": "caller asked"}},
                ],
                "speech": "Done, it is cancelled.",
            },
            {"speech": "Goodbye."},
        ],
    }
    s.update(over)
    return s


def write_bundle(root: Path, agent: dict[str, Any] | None = None, scen: dict[str, Any] | None = None) -> Path:
    adir = root / "agents" / "shop"
    (adir / "scenarios").mkdir(parents=True)
    (adir / "state").mkdir()
    (root / "bundle.yaml").write_text(yaml.safe_dump({"name": "shop", "version": "1"}))
    (adir / "agent.yaml").write_text(yaml.safe_dump(agent or AGENT))
    (adir / "prompt.md").write_text("You help callers of the shop with their orders.\n")
    (adir / "state" / "orders.json").write_text(json.dumps(ORDERS))
    s = scen or scenario()
    (adir / "scenarios" / f"{s['id']}.yaml").write_text(yaml.safe_dump(s))
    return root


async def play(b: Bundle, candidate: Any) -> Trace:
    agent, scen = b.scenario("cancel_w1")
    cand = (
        create_scripted(candidate, None, b)
        if isinstance(candidate, str)
        else ScriptedFileModel.from_data(candidate)
    )
    return await run_episode(
        agent,
        scen,
        candidate=cand,
        caller=create_scripted("scripted:plan", None, b),
        bundle_name="shop",
        bundle_version="1",
        bundle_hash=b.content_hash,
        episode_id="e1",
        run_seed=0,
        repeat=0,
    )


def grade(b: Bundle, trace: Trace, **over: Any) -> dict[str, Any]:
    agent, scen = b.scenario("cancel_w1")
    if over:
        scen = scen.model_copy(update=over)
    return {i.id: i for i in grade_action_checks(trace, scen, agent)}


@pytest.fixture
def shop(tmp_path: Path) -> Bundle:
    return load_bundle(write_bundle(tmp_path / "b"))


async def test_reference_call_records_changes_and_meets_the_state_check(shop: Bundle) -> None:
    trace = await play(shop, "scripted:reference")
    events = {e.name: e for e in trace.tool_events}
    assert events["get_order"].outcome == "state" and events["get_order"].result["status"] == "pending"
    assert [(c.key, c.path, c.before, c.after) for c in events["cancel_order"].state_changes] == [
        ("#W1", "status", "pending", "cancelled")
    ]
    assert trace.state is not None and trace.state.final == {
        "orders": {"#W1": {**ORDERS["#W1"], "status": "cancelled", "note": "caller asked"}}
    }
    items = grade(shop, trace)
    assert items["final_state"].label == Label.MET and items["final_state"].source == "action_check"
    assert items["final_state"].cited_events == [events["cancel_order"].index, events["add_note"].index]
    # the saved trace round-trips with its state
    assert Trace.model_validate_json(trace.canonical_json()).state == trace.state


async def test_wrong_write_fails_with_a_readable_difference(shop: Bundle) -> None:
    script = [
        {"content": "Hello, shop line."},
        {
            "content": "One moment.",
            "tool_calls": [
                {"name": "cancel_order", "arguments": {"order_id": "#W2"}},
                {"name": "add_note", "arguments": {"order_id": "#W2", "note": "x"}},
            ],
        },
        {"content": "Sorry."},
        {"content": "Goodbye."},
    ]
    trace = await play(shop, script)
    cancel = next(e for e in trace.tool_events if e.name == "cancel_order")
    assert cancel.outcome == "state_error" and cancel.result == {
        "error": "refused",
        "message": "Only a pending order can be cancelled",
    }
    assert cancel.state_changes == []
    item = grade(shop, trace)["final_state"]
    assert item.label == Label.NOT_MET
    assert 'orders[#W1].status: expected "cancelled", got "pending"' in item.reason
    assert 'orders[#W2].note: expected "", got "x"' in item.reason
    assert item.reason.startswith("3 difference(s)")


async def test_restriction_to_fields_and_tables(shop: Bundle) -> None:
    from callbench.bundle.models import StateCheck

    script = [
        {"content": "Hi."},
        {"content": "Ok.", "tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "#W1"}}]},
        {"content": "Done."},
        {"content": "Bye."},
    ]
    trace = await play(shop, script)
    only_status = grade(shop, trace, state_checks=[StateCheck(id="st", fields=["orders.status"])])["st"]
    assert only_status.label == Label.MET
    notes = grade(shop, trace, state_checks=[StateCheck(id="st", fields=["orders.note"])])["st"]
    assert notes.label == Label.NOT_MET and "orders[#W1].note" in notes.reason
    other_table = grade(shop, trace, state_checks=[StateCheck(id="st", tables=["users"])])["st"]
    assert other_table.label == Label.MET


async def test_guarded_state_check_is_not_applicable_until_the_guard_is_met(shop: Bundle) -> None:
    from callbench.bundle.models import StateCheck

    trace = await play(
        shop, [{"content": "Hi."}, {"content": "Bye."}, {"content": "Bye."}, {"content": "Bye."}]
    )
    item = grade(shop, trace, state_checks=[StateCheck(id="st", applies_after=["cancels"])])["st"]
    assert item.label == Label.NOT_APPLICABLE and item.r is None and "cancels" in item.reason


async def test_trace_without_state_and_agent_without_state(shop: Bundle) -> None:
    trace = await play(shop, "scripted:reference")
    bare = trace.model_copy(update={"state": None})
    assert grade(shop, bare)["final_state"].reason == "the trace has no saved state"
    _, scen = shop.scenario("cancel_w1")
    with pytest.raises(GradeError, match="need the agent's state"):
        grade_action_checks(trace, scen, None)


def test_validate_reports_state_declaration_problems(tmp_path: Path) -> None:
    agent = json.loads(json.dumps(AGENT))
    agent["state"]["tools"]["refund"] = {"op": "get", "table": "orders", "key": "order_id"}
    agent["state"]["tools"]["get_order"]["table"] = "shipments"
    scen = scenario(
        fixtures={"get_order": {"default": {"x": 1}}},
        state_checks=[{"id": "final_state", "tables": ["users"], "applies_after": ["nope"]}],
    )
    _, problems = validate_path(write_bundle(tmp_path / "b", agent, scen))
    codes = {(p.code, p.path) for p in problems}
    assert ("state.unknown_tool", "state.tools.refund") in codes
    assert ("state.unknown_table", "state.tools.get_order.table") in codes
    assert ("state.fixture_ignored", "fixtures.get_order") in codes
    assert ("state.unknown_table", "state_checks.0.tables.0") in codes
    assert ("ref.applies_after", "state_checks.0.applies_after.0") in codes


def test_validate_reports_a_state_check_without_state_and_a_bad_table_file(tmp_path: Path) -> None:
    agent = {k: v for k, v in AGENT.items() if k != "state"}
    _, problems = validate_path(write_bundle(tmp_path / "a", agent))
    assert any(p.code == "state.no_state" and p.path == "state_checks.0" for p in problems)
    _, problems = validate_path(write_bundle(tmp_path / "d", None, scenario(reference_path=None)))
    assert any(p.code == "state.no_reference" and p.path == "state_checks.0" for p in problems)
    root = write_bundle(tmp_path / "c")
    (root / "agents/shop/state/orders.json").write_text('["not", "records"]')
    _, problems = validate_path(root)
    assert any(p.code == "state.table" and p.path == "state.tables.orders" for p in problems)


def test_state_data_is_part_of_the_content_hash(tmp_path: Path) -> None:
    a = load_bundle(write_bundle(tmp_path / "a"))
    root = write_bundle(tmp_path / "b")
    (root / "agents/shop/state/orders.json").write_text(json.dumps({**ORDERS, "#W3": {"status": "pending"}}))
    assert load_bundle(root).content_hash != a.content_hash


def test_backend_answers_state_tools_and_records_parse_errors(shop: Bundle) -> None:
    from callbench.sim.backend import Backend, CallSite
    from callbench.sim.episode import new_state_store

    agent, scen = shop.scenario("cancel_w1")
    backend = Backend(agent.config, scen, state=new_state_store(agent))

    def site(i: int, name: str, raw: str) -> CallSite:
        return CallSite(
            index=i,
            candidate_turn=1,
            message_index=2,
            result_message_index=3,
            tool_call_id=f"c{i}",
            original_tool_call_id=None,
            name=name,
            raw_arguments=raw,
        )

    bad = backend.dispatch(site(0, "cancel_order", '{"order_id": '))
    assert bad.outcome == "parse_error" and bad.result["error"] == "invalid_arguments"
    assert bad.state_changes == [] and bad.queue_position == 0
    ok = backend.dispatch(site(1, "cancel_order", '{"order_id": "#W1"}'))
    assert ok.outcome == "state" and ok.queue_position == 1 and ok.state_changes[0].after == "cancelled"
    unknown = backend.dispatch(site(2, "refund", "{}"))
    assert unknown.outcome == "unknown_tool" and unknown.state_changes == []


def test_validator_replays_state_answered_call_ending_tools(tmp_path: Path) -> None:
    agent = json.loads(json.dumps(AGENT))
    agent["tools"].append(
        {
            "name": "transfer",
            "description": "Transfer to a person.",
            "parameters": {"type": "object", "properties": {}},
        }
    )
    agent["state"]["tools"]["transfer"] = {"op": "constant", "result": {"status": "transferred"}}
    agent["call_ending_tools"] = [{"tool": "transfer", "success": {"status": "transferred"}}]
    s = scenario()
    s["reference_path"][1]["tool_calls"].insert(0, {"name": "transfer", "arguments": {}})
    _, problems = validate_path(write_bundle(tmp_path / "b", agent, s))
    assert any(
        p.code == "reference.after_end" and p.path == "reference_path.1.tool_calls.1" for p in problems
    )
