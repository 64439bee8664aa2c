"""The stateful backend's engine as kinds: declarative reads, field updates with
preconditions, typed errors with rollback, the reviewed built-ins (and the kept source quirk), and
the record of every change."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from callbench.bundle.state.engine import StateStore
from callbench.bundle.state.models import StateSpec
from callbench.bundle.state.store import diff_values, tables_sha256


def tables() -> dict[str, Any]:
    return {
        "users": {
            "ann_1": {
                "user_id": "ann_1",
                "name": {"first_name": "Ann", "last_name": "Lee"},
                "address": {"address1": "1 Main St", "city": "Austin", "zip": "73301"},
                "email": "ann@example.com",
                "payment_methods": {
                    "gift_card_1": {"id": "gift_card_1", "source": "gift_card", "balance": 100.0},
                    "credit_card_1": {"id": "credit_card_1", "source": "credit_card"},
                },
            },
            "bob_2": {
                "user_id": "bob_2",
                "name": {"first_name": "Bob", "last_name": "Lee"},
                "address": {"address1": "2 Oak St", "city": "Austin", "zip": "73301"},
                "email": "bob@example.com",
                "payment_methods": {},
            },
        },
        "products": {
            "p1": {
                "name": "Lamp",
                "product_id": "p1",
                "variants": {
                    "i1": {"item_id": "i1", "options": {"color": "red"}, "available": True, "price": 10.0},
                    "i2": {"item_id": "i2", "options": {"color": "blue"}, "available": True, "price": 15.0},
                    "i3": {"item_id": "i3", "options": {"color": "green"}, "available": False, "price": 12.0},
                },
            },
            "p2": {
                "name": "Desk",
                "product_id": "p2",
                "variants": {
                    "i4": {"item_id": "i4", "options": {"size": "S"}, "available": True, "price": 100.0},
                    "i5": {"item_id": "i5", "options": {"size": "L"}, "available": True, "price": 180.0},
                },
            },
        },
        "orders": {
            "#W1": {
                "order_id": "#W1",
                "user_id": "ann_1",
                "status": "pending",
                "address": {"address1": "1 Main St", "city": "Austin", "zip": "73301"},
                "items": [
                    {
                        "name": "Lamp",
                        "product_id": "p1",
                        "item_id": "i1",
                        "price": 10.0,
                        "options": {"color": "red"},
                    },
                    {
                        "name": "Desk",
                        "product_id": "p2",
                        "item_id": "i4",
                        "price": 100.0,
                        "options": {"size": "S"},
                    },
                ],
                "payment_history": [
                    {"transaction_type": "payment", "amount": 110.0, "payment_method_id": "gift_card_1"}
                ],
            },
            "#W2": {
                "order_id": "#W2",
                "user_id": "ann_1",
                "status": "delivered",
                "items": [
                    {
                        "name": "Lamp",
                        "product_id": "p1",
                        "item_id": "i1",
                        "price": 10.0,
                        "options": {"color": "red"},
                    }
                ],
                "payment_history": [
                    {"transaction_type": "payment", "amount": 10.0, "payment_method_id": "credit_card_1"}
                ],
            },
        },
    }


SPEC = StateSpec.model_validate(
    {
        "tables": {"users": "u.json", "products": "p.json", "orders": "o.json"},
        "tools": {
            "get_order": {"op": "get", "table": "orders", "key": "order_id", "not_found": "Order not found"},
            "find_user": {
                "op": "find",
                "table": "users",
                "where": {"name.last_name": "last", "address.zip": "zip"},
            },
            "find_user_record": {
                "op": "find",
                "table": "users",
                "where": {"email": "email"},
                "returns": "record",
            },
            "get_item": {"op": "get_nested", "table": "products", "field": "variants", "key": "item_id"},
            "list_products": {
                "op": "index",
                "table": "products",
                "key_field": "name",
                "value_field": "product_id",
            },
            "move_order": {
                "op": "update",
                "table": "orders",
                "key": "order_id",
                "require": [
                    {
                        "field": "status",
                        "matcher": {"regex": ".*pending.*"},
                        "message": "Non-pending order cannot be modified",
                    }
                ],
                "set": {"address.city": "city", "address.zip": "zip", "note": "=moved"},
            },
            "transfer": {"op": "constant", "result": {"status": "transferred"}},
            "calculate": {"op": "builtin", "name": "calculate"},
            "cancel": {"op": "builtin", "name": "retail.cancel_pending_order"},
            "modify_items": {"op": "builtin", "name": "retail.modify_pending_order_items"},
            "exchange": {"op": "builtin", "name": "retail.exchange_delivered_order_items"},
            "return_items": {"op": "builtin", "name": "retail.return_delivered_order_items"},
            "modify_payment": {"op": "builtin", "name": "retail.modify_pending_order_payment"},
        },
    }
)


@pytest.fixture
def store() -> StateStore:
    return StateStore(tables(), SPEC)


def test_reads_by_key_fields_nested_and_index(store: StateStore) -> None:
    assert store.call("get_order", {"order_id": "#W2"}).result["status"] == "delivered"
    # first match in file order: two users share the last name and zip
    assert store.call("find_user", {"last": "Lee", "zip": "73301"}).result == "ann_1"
    assert store.call("find_user_record", {"email": "bob@example.com"}).result["user_id"] == "bob_2"
    assert store.call("get_item", {"item_id": "i5"}).result["price"] == 180.0
    assert store.call("list_products", {}).result == {"Desk": "p2", "Lamp": "p1"}
    assert store.call("transfer", {"summary": "x"}).result == {"status": "transferred"}
    assert store.touched == {}


def test_read_errors_are_typed_and_change_nothing(store: StateStore) -> None:
    ans = store.call("get_order", {"order_id": "#W9"})
    assert ans.error and ans.result == {"error": "not_found", "message": "Order not found"}
    assert store.call("find_user", {"last": "Lee"}).result == {
        "error": "invalid_arguments",
        "message": "missing argument 'zip'",
    }
    assert store.call("get_order", {"order_id": 7}).result["error"] == "invalid_arguments"
    assert store.call("get_order", None).result["error"] == "invalid_arguments"


def test_update_sets_fields_records_changes_and_is_seen_by_later_reads(store: StateStore) -> None:
    ans = store.call("move_order", {"order_id": "#W1", "city": "Dallas", "zip": "75001"})
    assert not ans.error
    assert [(c.path, c.before, c.after) for c in ans.changes] == [
        ("address.city", "Austin", "Dallas"),
        ("address.zip", "73301", "75001"),
        ("note", None, "moved"),
    ]
    assert store.call("get_order", {"order_id": "#W1"}).result["address"]["city"] == "Dallas"
    assert store.base["orders"]["#W1"]["address"]["city"] == "Austin"  # the shared tables are untouched
    assert set(store.record().final["orders"]) == {"#W1"}


def test_update_precondition_refuses_and_leaves_no_trace(store: StateStore) -> None:
    ans = store.call("move_order", {"order_id": "#W2", "city": "Dallas", "zip": "75001"})
    assert ans.result == {"error": "refused", "message": "Non-pending order cannot be modified"}
    assert ans.changes == [] and store.touched == {}


def test_calculate_walks_arithmetic_only(store: StateStore) -> None:
    assert store.call("calculate", {"expression": "(54.04 + 41.64) * 2"}).result == "191.36"
    assert store.call("calculate", {"expression": "-3 / 4"}).result == "-0.75"
    for bad in ("__import__('os')", "2 ** 10", "1/0", "2 +", "9" * 600):
        assert store.call("calculate", {"expression": bad}).result["error"] == "invalid_arguments", bad


def test_cancel_refunds_a_gift_card_at_once(store: StateStore) -> None:
    ans = store.call("cancel", {"order_id": "#W1", "reason": "no longer needed"})
    assert ans.result["status"] == "cancelled" and ans.result["cancel_reason"] == "no longer needed"
    assert ans.result["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 110.0,
        "payment_method_id": "gift_card_1",
    }
    assert store.get("users", "ann_1")["payment_methods"]["gift_card_1"]["balance"] == 210.0
    assert {(c.table, c.path) for c in ans.changes} >= {
        ("orders", "status"),
        ("users", "payment_methods.gift_card_1.balance"),
    }
    again = store.call("cancel", {"order_id": "#W1", "reason": "no longer needed"})
    assert again.result["message"] == "Non-pending order cannot be cancelled"
    assert store.call("cancel", {"order_id": "#W2", "reason": "x"}).result["message"] == (
        "Non-pending order cannot be cancelled"
    )


def test_cancel_reason_is_checked(store: StateStore) -> None:
    assert store.call("cancel", {"order_id": "#W1", "reason": "changed my mind"}).result == {
        "error": "invalid_arguments",
        "message": "Invalid reason",
    }


def test_modify_items_keeps_the_source_quirk(store: StateStore) -> None:
    """Two items changed at once both take the *last* new variant's price and options (tau2
    tasks 20, 21, 36, 37, 100 encode this), while the charge is the true price difference."""
    ans = store.call(
        "modify_items",
        {
            "order_id": "#W1",
            "item_ids": ["i1", "i4"],
            "new_item_ids": ["i2", "i5"],
            "payment_method_id": "gift_card_1",
        },
    )
    items = ans.result["items"]
    assert [i["item_id"] for i in items] == ["i2", "i5"]
    assert [i["price"] for i in items] == [180.0, 180.0]
    assert items[0]["options"] == {"size": "L"}
    assert ans.result["payment_history"][-1]["amount"] == pytest.approx(85.0)
    assert ans.result["status"] == "pending (item modified)"
    assert store.get("users", "ann_1")["payment_methods"]["gift_card_1"]["balance"] == 15.0


def test_modify_items_errors_roll_back(store: StateStore) -> None:
    cases = [
        ("i1", "i3", "New item i3 not found or available"),
        ("i9", "i2", "i9 not found"),
        ("i1", "i1", "The new item id should be different from the old item id"),
        ("i1", "i5", "Variant not found"),
    ]
    for old, new, message in cases:
        ans = store.call(
            "modify_items",
            {"order_id": "#W1", "item_ids": [old], "new_item_ids": [new], "payment_method_id": "gift_card_1"},
        )
        assert ans.error and ans.result["message"] == message
    poor = copy.deepcopy(tables())
    poor["users"]["ann_1"]["payment_methods"]["gift_card_1"]["balance"] = 1.0
    s = StateStore(poor, SPEC)
    ans = s.call(
        "modify_items",
        {"order_id": "#W1", "item_ids": ["i4"], "new_item_ids": ["i5"], "payment_method_id": "gift_card_1"},
    )
    assert ans.result == {
        "error": "insufficient_balance",
        "message": "Insufficient gift card balance to pay for the new item",
    }
    assert store.touched == {} and s.touched == {}


def test_exchange_and_return_on_delivered_orders(store: StateStore) -> None:
    assert store.call(
        "exchange",
        {"order_id": "#W1", "item_ids": ["i1"], "new_item_ids": ["i2"], "payment_method_id": "credit_card_1"},
    ).result["message"] == ("Non-delivered order cannot be exchanged")
    ans = store.call(
        "exchange",
        {"order_id": "#W2", "item_ids": ["i1"], "new_item_ids": ["i2"], "payment_method_id": "credit_card_1"},
    )
    assert ans.result["status"] == "exchange requested" and ans.result["exchange_price_difference"] == 5.0
    other = StateStore(tables(), SPEC)
    bad = other.call(
        "return_items", {"order_id": "#W2", "item_ids": ["i1"], "payment_method_id": "gift_card_9"}
    )
    assert bad.result["message"] == "Payment method not found"
    ok = other.call(
        "return_items", {"order_id": "#W2", "item_ids": ["i1"], "payment_method_id": "gift_card_1"}
    )
    assert ok.result["status"] == "return requested" and ok.result["return_items"] == ["i1"]


def test_modify_payment_moves_the_single_payment(store: StateStore) -> None:
    ans = store.call("modify_payment", {"order_id": "#W1", "payment_method_id": "credit_card_1"})
    assert [p["transaction_type"] for p in ans.result["payment_history"]] == ["payment", "payment", "refund"]
    assert store.get("users", "ann_1")["payment_methods"]["gift_card_1"]["balance"] == 210.0
    assert (
        store.call("modify_payment", {"order_id": "#W1", "payment_method_id": "gift_card_1"}).result[
            "message"
        ]
        == "There should be exactly one payment for a pending order"
    )


def test_diff_values_and_hash() -> None:
    assert diff_values({"a": 1, "b": {"c": [1]}}, {"a": 1.0, "b": {"c": [2]}, "d": None}) == [
        ("b.c", [1], [2])
    ]
    assert tables_sha256({"t": {"k": {"x": 1}}}) == tables_sha256({"t": {"k": {"x": 1}}})
    assert tables_sha256({"t": {"k": {"x": 1}}}) != tables_sha256({"t": {"k": {"x": 2}}})
