"""Completing tau2 gold actions into causal reference paths (importers/tau2/paths.py),
on a small retail-shaped state: the lookups a gold write needs are inserted before it with
arguments only from known values, values the user's instructions give are told, unknowable ones
are reported, and the gold calls keep their arguments and order. No data folder needed."""

from __future__ import annotations

import copy
from typing import Any

from callbench.bundle.state.engine import StateStore
from callbench.bundle.state.models import StateSpec
from callbench.importers.tau2.paths import (
    PathNotes,
    causal_order,
    complete_path,
    identify_by_email,
)
from callbench.importers.tau2.tools import STATE_OPS

ADDRESS = {"address1": "763 Broadway", "address2": "Suite 135", "city": "Philadelphia", "country": "USA",
           "state": "PA", "zip": "19122"}
TABLES: dict[str, dict[str, Any]] = {
    "users": {
        "yusuf_rossi_9620": {
            "user_id": "yusuf_rossi_9620",
            "name": {"first_name": "Yusuf", "last_name": "Rossi"},
            "address": ADDRESS,
            "email": "yusuf.rossi7301@example.com",
            "payment_methods": {
                "credit_card_9513926": {"source": "credit_card", "id": "credit_card_9513926"},
                "gift_card_1111111": {"source": "gift_card", "id": "gift_card_1111111", "balance": 500.0},
            },
            "orders": ["#W6247578", "#W2378156"],
        },
        "mei_ahmed_4909": {
            "user_id": "mei_ahmed_4909",
            "name": {"first_name": "Mei", "last_name": "Ahmed"},
            "address": {**ADDRESS, "zip": "78705"},
            "email": "mei.ahmed4901@example.com",
            "payment_methods": {},
            "orders": [],
        },
    },
    "orders": {
        "#W2378156": {
            "order_id": "#W2378156",
            "user_id": "yusuf_rossi_9620",
            "address": ADDRESS,
            "items": [
                {"name": "Mechanical Keyboard", "product_id": "1656367028", "item_id": "1151293680",
                 "price": 272.33, "options": {"size": "full size"}},
            ],
            "status": "delivered",
            "payment_history": [
                {"transaction_type": "payment", "amount": 272.33, "payment_method_id": "credit_card_9513926"}
            ],
        },
        "#W6247578": {
            "order_id": "#W6247578",
            "user_id": "yusuf_rossi_9620",
            "address": {**ADDRESS, "address1": "565 Maple Drive", "address2": "Suite 501"},
            "items": [],
            "status": "pending",
            "payment_history": [],
        },
    },
    "products": {
        "1656367028": {
            "name": "Mechanical Keyboard",
            "product_id": "1656367028",
            "variants": {
                "1151293680": {"item_id": "1151293680", "options": {"size": "full size"},
                               "available": True, "price": 272.33},
                "7706410293": {"item_id": "7706410293", "options": {"size": "80%"},
                               "available": True, "price": 269.16},
            },
        }
    },
}
SPEC = StateSpec.model_validate({"tables": {t: f"state/{t}.json" for t in TABLES}, "tools": STATE_OPS})
FIND = {
    "name": "find_user_id_by_name_zip",
    "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"},
}
KNOWN = ["what_you_know You are Yusuf Rossi in zip code 19122."]


def store() -> StateStore:
    return StateStore(copy.deepcopy(TABLES), SPEC)


def names(calls: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["arguments"]) for c in calls]


def test_a_write_gets_the_lookups_that_reveal_its_ids_in_order() -> None:
    """tau2 task 0's shape: the gold list authenticates, then returns an item of an order no
    gold action looked up, refunding to a payment method nothing revealed."""
    write = {"name": "return_delivered_order_items",
             "arguments": {"order_id": "#W2378156", "item_ids": ["1151293680"],
                           "payment_method_id": "credit_card_9513926"}}
    done = complete_path([FIND, write], store(), KNOWN, "You want to return your keyboard.")
    assert names(done.calls) == [
        names([FIND])[0],
        ("get_user_details", {"user_id": "yusuf_rossi_9620"}),  # reveals the order id
        ("get_order_details", {"order_id": "#W2378156"}),  # the item and the payment method
        names([write])[0],
    ]
    assert (done.inserted, done.told, done.unresolved) == (2, [], [])
    assert done.calls[-1] is write  # the gold call itself, arguments untouched


def test_a_chain_reaches_a_value_two_lookups_away() -> None:
    """A new item id only the product's variants hold: user -> order -> product."""
    write = {"name": "exchange_delivered_order_items",
             "arguments": {"order_id": "#W2378156", "item_ids": ["1151293680"],
                           "new_item_ids": ["7706410293"], "payment_method_id": "credit_card_9513926"}}
    known = [*KNOWN, 'details_in_your_instructions ["#W2378156"]']
    done = complete_path([FIND, write], store(), known, "")
    assert [c["name"] for c in done.calls] == [
        "find_user_id_by_name_zip",
        "get_order_details",
        "get_product_details",
        "exchange_delivered_order_items",
    ]
    assert done.calls[2]["arguments"] == {"product_id": "1656367028"}  # from the order's item, not a guess


def test_a_value_the_instructions_give_is_told_not_looked_up() -> None:
    """The new address is the user's to say (tau2 gives it in the instructions): it becomes a
    known fact; the order id still needs the account lookup."""
    write = {"name": "modify_pending_order_address",
             "arguments": {"order_id": "#W6247578", "address1": "101 Highway", "address2": "",
                           "city": "New York", "country": "USA", "state": "NY", "zip": "10001"}}
    said = "You want your pending order shipped to 101 Highway, New York, NY 10001."
    done = complete_path([FIND, write], store(), KNOWN, said)
    assert done.told == ["101 Highway", "10001"]
    # written only inside a longer token, a value is not one the caller is told
    inside = complete_path([FIND, write], store(), KNOWN, "Ship it to 9101 Highway, zip 100012.")
    assert inside.told == [] and len(inside.unresolved) == 2
    assert [c["name"] for c in done.calls] == [
        "find_user_id_by_name_zip", "get_user_details", "modify_pending_order_address",
    ]


def test_an_address_held_by_another_order_is_looked_up_there() -> None:
    write = {"name": "modify_user_address",
             "arguments": {"user_id": "yusuf_rossi_9620", "address1": "565 Maple Drive",
                           "address2": "Suite 501", "city": "Philadelphia", "country": "USA",
                           "state": "PA", "zip": "19122"}}
    done = complete_path([FIND, write], store(), KNOWN, "")
    assert names(done.calls)[1:3] == [
        ("get_user_details", {"user_id": "yusuf_rossi_9620"}),
        ("get_order_details", {"order_id": "#W6247578"}),
    ]
    assert done.unresolved == []


def test_unknowable_values_are_reported_and_the_gold_call_kept() -> None:
    """tau2 tasks 2-4 look up a product id no record has (the gold read fails on purpose)."""
    guess = {"name": "get_product_details", "arguments": {"product_id": "6086499569"}}
    calc = {"name": "calculate", "arguments": {"expression": "272.33 - 269.16"}}
    done = complete_path([FIND, guess, calc], store(), KNOWN, "How many keyboards are there?")
    assert done.calls == [FIND, guess, calc] and done.inserted == 0
    assert [(u.call, u.tool, u.path, u.value) for u in done.unresolved] == [
        (1, "get_product_details", "product_id", "6086499569")
    ]  # the calculate expression is composed by the agent: never looked for
    notes = PathNotes()
    path = [{"speech": "hi"}, {"tool_calls": [FIND, guess]}, {"tool_calls": [calc]}]
    notes.add("tau2_retail_002", done, path)
    assert notes.unresolved == [
        "tau2_retail_002: reference_path.1.tool_calls.1.arguments.product_id = '6086499569' "
        "(get_product_details)"
    ]


def test_lookups_after_a_write_see_the_changed_state() -> None:
    """A value a write creates (the order's new status) is not looked for; but a lookup placed
    after a write answers from the changed state, so a later write's ids still resolve."""
    cancel = {
        "name": "cancel_pending_order",
        "arguments": {"order_id": "#W6247578", "reason": "no longer needed"},
    }
    ret = {"name": "return_delivered_order_items",
           "arguments": {"order_id": "#W2378156", "item_ids": ["1151293680"],
                         "payment_method_id": "gift_card_1111111"}}
    done = complete_path([FIND, cancel, ret], store(), KNOWN, "")
    assert [c["name"] for c in done.calls] == [
        "find_user_id_by_name_zip", "get_user_details", "cancel_pending_order",
        "get_order_details", "return_delivered_order_items",
    ]  # the gift card id came with the account lookup before the cancel: not looked up twice
    assert done.unresolved == []


def test_identify_by_email_needs_exactly_one_user() -> None:
    s = store()
    assert identify_by_email(s, "You name is Mei Ahmed and your email is Mei.Ahmed4901@example.com.") == {
        "name": "find_user_id_by_email", "arguments": {"email": "mei.ahmed4901@example.com"}
    }
    assert identify_by_email(s, "You are Mei Ahmed in zip code 78705.") is None
    assert identify_by_email(s, "your email is nobody@example.com") is None


def test_causal_order_moves_a_read_after_the_one_that_reveals_its_argument() -> None:
    """tau2 task 2's shape: a product looked up before the order that names it."""
    actions = [FIND, {"name": "get_product_details", "arguments": {"product_id": "1656367028"}},
               {"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}]
    s = store()
    results = [s.call(a["name"], a["arguments"]).result for a in actions]
    assert causal_order(actions, results, "yusuf rossi 19122 #w2378156") == [0, 2, 1]
