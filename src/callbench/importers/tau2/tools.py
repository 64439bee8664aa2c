"""The tau2-bench retail tool set as a callbench agent: tool descriptions (written here), JSON
Schemas (from ``retail/tools.json``: names, parameter names and types) and the state operation
answering each tool (declarative where possible, else a reviewed built-in).

Behaviour follows tau2-bench's retail tools (sierra-research/tau2-bench a2c0247,
``src/tau2/domains/retail/tools.py``, MIT): see :mod:`callbench.bundle.state.builtin_ops`.
"""

from __future__ import annotations

from typing import Any

ORDER_ID = "The order id: '#W' followed by seven digits, e.g. '#W0000000' (the '#' is part of the id)."
NEW_IDS = "For each item id, in the same position, the item id of the new variant (same product)."
ITEM_IDS = "Item ids of the order's items (duplicates allowed when the order holds the item twice)."
PAYMENT = "A payment method id of the user, e.g. 'gift_card_0000000' or 'credit_card_0000000'."
ADDRESS = {
    "address1": "First address line, e.g. '123 Main St'.",
    "address2": "Second address line, e.g. 'Apt 1', or an empty string.",
    "city": "City.",
    "state": "State, e.g. 'CA'.",
    "country": "Country, e.g. 'USA'.",
    "zip": "Zip code, five digits.",
}

DESCRIPTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "calculate": (
        "Work out an arithmetic expression (numbers, + - * /, parentheses) and return the result "
        "rounded to two decimals, e.g. for a refund total.",
        {"expression": "The expression, e.g. '(54.04 + 41.64) * 2'."},
    ),
    "cancel_pending_order": (
        "Cancel a pending order after the caller has confirmed it. Refunds every payment: at once to a "
        "gift card, in 5-7 business days to other methods. Fails for an order that is not pending. "
        "Returns the order.",
        {"order_id": ORDER_ID, "reason": "Either 'no longer needed' or 'ordered by mistake'."},
    ),
    "exchange_delivered_order_items": (
        "Request an exchange of items of a delivered order for other variants of the same products, "
        "after the caller has confirmed it; possible once per order. The price difference is charged "
        "or refunded on the payment method. Returns the order.",
        {"order_id": ORDER_ID, "item_ids": ITEM_IDS, "new_item_ids": NEW_IDS, "payment_method_id": PAYMENT},
    ),
    "find_user_id_by_name_zip": (
        "Find a customer's user id from first name, last name and zip code. Use it when the caller "
        "cannot give their email address.",
        {
            "first_name": "First name, e.g. 'John'.",
            "last_name": "Last name, e.g. 'Doe'.",
            "zip": "Zip code, five digits.",
        },
    ),
    "find_user_id_by_email": (
        "Find a customer's user id from their email address.",
        {"email": "Email address, e.g. 'name@example.com'."},
    ),
    "get_order_details": (
        "Status, items, address, fulfilments and payments of one order.",
        {"order_id": ORDER_ID},
    ),
    "get_product_details": (
        "One product type with all its variants (item ids, options, availability, price). A product id "
        "is not an item id.",
        {"product_id": "The product id, ten digits."},
    ),
    "get_item_details": (
        "One variant by item id: options, availability and price.",
        {"item_id": "The item id, ten digits."},
    ),
    "get_user_details": (
        "A customer's profile: name, address, email, payment methods (gift card balances) and order ids.",
        {"user_id": "The user id, e.g. 'jane_doe_1234'."},
    ),
    "list_all_product_types": ("Every product type of the store: its name and product id.", {}),
    "modify_pending_order_address": (
        "Change the shipping address of a pending order, after the caller has confirmed it. "
        "Returns the order.",
        {"order_id": ORDER_ID, **ADDRESS},
    ),
    "modify_pending_order_items": (
        "Swap items of a pending order for other variants of the same products, after the caller has "
        "confirmed it; possible once per order, so collect every change first. The price difference "
        "is charged or refunded on the payment method. Returns the order.",
        {"order_id": ORDER_ID, "item_ids": ITEM_IDS, "new_item_ids": NEW_IDS, "payment_method_id": PAYMENT},
    ),
    "modify_pending_order_payment": (
        "Pay a pending order with another payment method of the user, after the caller has confirmed "
        "it. Returns the order.",
        {"order_id": ORDER_ID, "payment_method_id": PAYMENT},
    ),
    "modify_user_address": (
        "Change a customer's default address, after the caller has confirmed it. Returns the profile.",
        {"user_id": "The user id.", **ADDRESS},
    ),
    "return_delivered_order_items": (
        "Request a return of items of a delivered order, after the caller has confirmed it; possible "
        "once per order. The refund goes to the original payment method or a gift card. Returns the order.",
        {
            "order_id": ORDER_ID,
            "item_ids": ITEM_IDS,
            "payment_method_id": "The original payment method of the order, or a gift card of the user.",
        },
    ),
    "transfer_to_human_agents": (
        "Transfer the caller to a human agent with a summary of the issue; this ends your part of the "
        "call. Only when the caller asks for a person or the request cannot be handled under the policy.",
        {"summary": "A short summary of the caller's issue."},
    ),
}

_ADDRESS_SET: dict[str, str] = {f"address.{k}": k for k in ADDRESS}
TRANSFERRED = {"status": "transferred", "message": "Transfer successful"}

STATE_OPS: dict[str, dict[str, Any]] = {
    "calculate": {"op": "builtin", "name": "calculate"},
    "cancel_pending_order": {"op": "builtin", "name": "retail.cancel_pending_order"},
    "exchange_delivered_order_items": {"op": "builtin", "name": "retail.exchange_delivered_order_items"},
    "find_user_id_by_name_zip": {
        "op": "find",
        "table": "users",
        "returns": "key",
        "not_found": "User not found",
        "where": {"name.first_name": "first_name", "name.last_name": "last_name", "address.zip": "zip"},
    },
    "find_user_id_by_email": {
        "op": "find",
        "table": "users",
        "where": {"email": "email"},
        "returns": "key",
        "not_found": "User not found",
    },
    "get_order_details": {"op": "get", "table": "orders", "key": "order_id", "not_found": "Order not found"},
    "get_product_details": {
        "op": "get",
        "table": "products",
        "key": "product_id",
        "not_found": "Product not found",
    },
    "get_item_details": {
        "op": "get_nested",
        "table": "products",
        "field": "variants",
        "key": "item_id",
        "not_found": "Item not found",
    },
    "get_user_details": {"op": "get", "table": "users", "key": "user_id", "not_found": "User not found"},
    "list_all_product_types": {
        "op": "index",
        "table": "products",
        "key_field": "name",
        "value_field": "product_id",
    },
    "modify_pending_order_address": {
        "op": "update",
        "table": "orders",
        "key": "order_id",
        "not_found": "Order not found",
        "require": [
            {
                "field": "status",
                "matcher": {"regex": ".*pending.*"},
                "message": "Non-pending order cannot be modified",
            }
        ],
        "set": dict(_ADDRESS_SET),
    },
    "modify_pending_order_items": {"op": "builtin", "name": "retail.modify_pending_order_items"},
    "modify_pending_order_payment": {"op": "builtin", "name": "retail.modify_pending_order_payment"},
    "modify_user_address": {
        "op": "update",
        "table": "users",
        "key": "user_id",
        "not_found": "User not found",
        "set": dict(_ADDRESS_SET),
    },
    "return_delivered_order_items": {"op": "builtin", "name": "retail.return_delivered_order_items"},
    "transfer_to_human_agents": {"op": "constant", "result": TRANSFERRED},
}

_TYPES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "List[str]": {"type": "array", "items": {"type": "string"}},
}


def tool_specs(facts: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """The agent's tools (``agent.yaml`` ``tools``) from the tool facts of ``retail/tools.json``.
    Raises ``ValueError`` naming ``where`` for a tool or a parameter type this importer does not
    know (the tool set changed upstream)."""
    out = []
    for i, fact in enumerate(facts):
        name = fact.get("name")
        if name not in DESCRIPTIONS:
            raise ValueError(f"{where}: tools.{i}: tool {name!r} has no description or operation here")
        desc, params = DESCRIPTIONS[name]
        props: dict[str, Any] = {}
        for k, p in enumerate(fact.get("parameters", [])):
            if p.get("type") not in _TYPES or p.get("name") not in params:
                raise ValueError(
                    f"{where}: tools.{i}.parameters.{k}: unknown parameter {p.get('name')!r} "
                    f"of type {p.get('type')!r}"
                )
            props[p["name"]] = {**_TYPES[p["type"]], "description": params[p["name"]]}
        out.append(
            {
                "name": name,
                "description": desc,
                "parameters": {
                    "type": "object",
                    "properties": props,
                    "required": list(props),
                    "additionalProperties": False,
                },
            }
        )
    return out


WRITE_TOOLS = frozenset(
    {
        "cancel_pending_order",
        "exchange_delivered_order_items",
        "modify_pending_order_address",
        "modify_pending_order_items",
        "modify_pending_order_payment",
        "modify_user_address",
        "return_delivered_order_items",
    }
)
"""Tools that change the state (``kind: write`` in tools.json)."""
