"""The reviewed built-in state operations: what a declarative ``get`` / ``find`` / ``update`` cannot
say (arithmetic, refunds over a payment history, item swaps with price differences).

Each is written here, reviewed, and named from a bundle (``{op: builtin, name: ...}``); a bundle
never supplies code. The ``retail.*`` operations reproduce the behaviour of tau2-bench's retail
tools (sierra-research/tau2-bench, commit a2c0247, ``src/tau2/domains/retail/tools.py``, MIT;
written anew from its documented behaviour) on tables ``orders``, ``users`` and ``products`` with
tau2's record shapes, including the error messages, so that a state reached here can be compared
with one reached there. One source quirk is kept on purpose (docs/peers.md):
``retail.modify_pending_order_items`` gives every changed item the price and options of the *last*
new item of the call, as the source does (tasks 20, 21, 36, 37 and 100 encode it).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from callbench.bundle.state.store import Records, StateFailure, argument

_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_ALLOWED = set("0123456789+-*/(). ")


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    value = getattr(node, "value", None)
    if isinstance(node, ast.Constant) and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_arith(node.left), _arith(node.right)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        v = _arith(node.operand)
        return v if isinstance(node.op, ast.UAdd) else -v
    raise StateFailure("invalid_arguments", "Invalid expression")


def calculate(store: Records, args: dict[str, Any]) -> str:
    """``calculate``: evaluate ``expression`` (numbers, + - * /, parentheses, spaces) by walking
    its syntax tree (never ``eval``); returns the value rounded to 2 decimals as text, e.g. "4.0".
    Errors: ``invalid_arguments`` for other characters, bad syntax or division by zero."""
    expr = argument(args, "expression")
    if not all(c in _ALLOWED for c in expr) or len(expr) > 500:
        raise StateFailure("invalid_arguments", "Invalid characters in expression")
    try:
        tree = ast.parse(expr, mode="eval")
        return str(round(_arith(tree), 2))
    except (SyntaxError, ZeroDivisionError, OverflowError, RecursionError):
        raise StateFailure("invalid_arguments", "Invalid expression") from None


# ---------------------------------------------------------------- retail helpers


def _order(store: Records, order_id: str) -> dict[str, Any]:
    rec = store.get("orders", order_id)
    if rec is None:
        raise StateFailure("not_found", "Order not found")
    return rec


def _method(store: Records, user_id: str, method_id: str, *, write: bool = False) -> dict[str, Any]:
    user = store.get("users", user_id)
    if user is None:
        raise StateFailure("not_found", "User not found")
    if method_id not in user.get("payment_methods", {}):
        raise StateFailure("not_found", "Payment method not found")
    if write:
        user = store.writable("users", user_id)
    return user["payment_methods"][method_id]


def _is_gift_card(method: dict[str, Any]) -> bool:
    return method.get("source") == "gift_card"


def _variant(store: Records, product_id: str, item_id: str) -> dict[str, Any]:
    product = store.get("products", product_id)
    if product is None:
        raise StateFailure("not_found", "Product not found")
    variant = product.get("variants", {}).get(item_id)
    if variant is None:
        raise StateFailure("not_found", "Variant not found")
    return variant


def _items_exist(order: dict[str, Any], item_ids: list[str], message: Callable[[str], str]) -> None:
    have = [it["item_id"] for it in order["items"]]
    for i in item_ids:
        if item_ids.count(i) > have.count(i):
            raise StateFailure("not_found", message(i))


def _price_difference(
    store: Records, order: dict[str, Any], item_ids: list[str], new_ids: list[str], *, same_allowed: bool
) -> tuple[float, dict[str, Any]]:
    diff = 0.0
    variant: dict[str, Any] = {}
    for old, new in zip(item_ids, new_ids, strict=True):
        if not same_allowed and old == new:
            raise StateFailure(
                "invalid_arguments", "The new item id should be different from the old item id"
            )
        item = next((it for it in order["items"] if it["item_id"] == old), None)
        if item is None:
            raise StateFailure("not_found", f"Item {old} not found")
        variant = _variant(store, item["product_id"], new)
        if not variant.get("available"):
            raise StateFailure("refused", f"New item {new} not found or available")
        diff += variant["price"] - item["price"]
    return diff, variant


def _str_list(args: dict[str, Any], name: str) -> list[str]:
    v = argument(args, name, list)
    if not all(isinstance(x, str) for x in v):
        raise StateFailure("invalid_arguments", f"argument {name!r} must be a list of strings")
    return list(v)


# ---------------------------------------------------------------- retail writes


def cancel_pending_order(store: Records, args: dict[str, Any]) -> Any:
    """Cancel a ``pending`` order for reason "no longer needed" or "ordered by mistake": status
    ``cancelled``, ``cancel_reason`` set, one refund per payment appended to ``payment_history``;
    a gift card is credited at once. Errors: not found; "Non-pending order cannot be cancelled";
    "Invalid reason"."""
    order_id, reason = argument(args, "order_id"), argument(args, "reason")
    if _order(store, order_id)["status"] != "pending":
        raise StateFailure("refused", "Non-pending order cannot be cancelled")
    if reason not in {"no longer needed", "ordered by mistake"}:
        raise StateFailure("invalid_arguments", "Invalid reason")
    order = store.writable("orders", order_id)
    refunds = []
    for pay in order["payment_history"]:
        refunds.append(
            {
                "transaction_type": "refund",
                "amount": pay["amount"],
                "payment_method_id": pay["payment_method_id"],
            }
        )
        method = _method(store, order["user_id"], pay["payment_method_id"])
        if _is_gift_card(method):
            method = _method(store, order["user_id"], pay["payment_method_id"], write=True)
            method["balance"] = round(method["balance"] + pay["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return order


def exchange_delivered_order_items(store: Records, args: dict[str, Any]) -> Any:
    """Request an exchange on a ``delivered`` order: each of ``item_ids`` (duplicates allowed) for
    the same position of ``new_item_ids`` (an available variant of the same product); status
    ``exchange requested`` with the sorted id lists, payment method and price difference (rounded
    to cents). Errors: not delivered, items missing, lengths differ, variant missing or
    unavailable, payment method unknown, gift card balance below the difference."""
    order_id = argument(args, "order_id")
    item_ids, new_ids = _str_list(args, "item_ids"), _str_list(args, "new_item_ids")
    method_id = argument(args, "payment_method_id")
    order = _order(store, order_id)
    if order["status"] != "delivered":
        raise StateFailure("refused", "Non-delivered order cannot be exchanged")
    _items_exist(order, item_ids, lambda i: f"Number of {i} not found.")
    if len(item_ids) != len(new_ids):
        raise StateFailure("invalid_arguments", "The number of items to be exchanged should match.")
    diff, _ = _price_difference(store, order, item_ids, new_ids, same_allowed=True)
    diff = round(diff, 2)
    method = _method(store, order["user_id"], method_id)
    if _is_gift_card(method) and method["balance"] < diff:
        raise StateFailure(
            "insufficient_balance", "Insufficient gift card balance to pay for the price difference"
        )
    order = store.writable("orders", order_id)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_ids)
    order["exchange_payment_method_id"] = method_id
    order["exchange_price_difference"] = diff
    return order


def modify_pending_order_items(store: Records, args: dict[str, Any]) -> Any:
    """Swap items of a ``pending`` order for other available variants of the same products, once:
    a payment (or refund) of the summed price difference on ``payment_method_id`` (a gift card is
    charged or credited at once, and must cover a positive difference), each item's id replaced,
    status ``pending (item modified)``. Source quirk kept: every changed item takes the price and
    options of the *last* new variant of the call. Errors as for an exchange, plus "The new item id
    should be different from the old item id"."""
    order_id = argument(args, "order_id")
    item_ids, new_ids = _str_list(args, "item_ids"), _str_list(args, "new_item_ids")
    method_id = argument(args, "payment_method_id")
    order = _order(store, order_id)
    if order["status"] != "pending":
        raise StateFailure("refused", "Non-pending order cannot be modified")
    _items_exist(order, item_ids, lambda i: f"{i} not found")
    if len(item_ids) != len(new_ids):
        raise StateFailure("invalid_arguments", "The number of items to be exchanged should match")
    diff, last = _price_difference(store, order, item_ids, new_ids, same_allowed=False)
    method = _method(store, order["user_id"], method_id)
    if _is_gift_card(method) and method["balance"] < diff:
        raise StateFailure("insufficient_balance", "Insufficient gift card balance to pay for the new item")
    order = store.writable("orders", order_id)
    order["payment_history"].append(
        {
            "transaction_type": "payment" if diff > 0 else "refund",
            "amount": abs(diff),
            "payment_method_id": method_id,
        }
    )
    if _is_gift_card(method):
        method = _method(store, order["user_id"], method_id, write=True)
        method["balance"] = round(method["balance"] - diff, 2)
    for old, new in zip(item_ids, new_ids, strict=True):
        item = next(it for it in order["items"] if it["item_id"] == old)
        item["item_id"] = new
        item["price"] = last["price"]  # the source quirk: the last new variant's price and options
        item["options"] = dict(last["options"])
    order["status"] = "pending (item modified)"
    return order


def modify_pending_order_payment(store: Records, args: dict[str, Any]) -> Any:
    """Move a pending order's single payment to another method of the same user: a payment on the
    new method and a refund on the old one are appended; gift cards are charged / credited at once.
    Errors: not pending, method unknown, not exactly one payment, same method, gift card balance
    below the amount."""
    order_id, method_id = argument(args, "order_id"), argument(args, "payment_method_id")
    order = _order(store, order_id)
    if "pending" not in order["status"]:
        raise StateFailure("refused", "Non-pending order cannot be modified")
    method = _method(store, order["user_id"], method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise StateFailure("refused", "There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == method_id:
        raise StateFailure(
            "invalid_arguments", "The new payment method should be different from the current one"
        )
    amount = history[0]["amount"]
    if _is_gift_card(method) and method["balance"] < amount:
        raise StateFailure("insufficient_balance", "Insufficient gift card balance to pay for the order")
    order = store.writable("orders", order_id)
    order["payment_history"].extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id},
        ]
    )
    if _is_gift_card(method):
        m = _method(store, order["user_id"], method_id, write=True)
        m["balance"] = round(m["balance"] - amount, 2)
    if _is_gift_card(_method(store, order["user_id"], old_id)):
        m = _method(store, order["user_id"], old_id, write=True)
        m["balance"] = round(m["balance"] + amount, 2)
    return order


def return_delivered_order_items(store: Records, args: dict[str, Any]) -> Any:
    """Request a return of items of a ``delivered`` order, refunded to the original payment method
    or a gift card: status ``return requested``, sorted ``return_items`` and the method. Errors: not
    delivered, method unknown or neither original nor a gift card, items missing."""
    order_id, method_id = argument(args, "order_id"), argument(args, "payment_method_id")
    item_ids = _str_list(args, "item_ids")
    order = _order(store, order_id)
    if order["status"] != "delivered":
        raise StateFailure("refused", "Non-delivered order cannot be returned")
    method = _method(store, order["user_id"], method_id)
    if not _is_gift_card(method) and method_id != order["payment_history"][0]["payment_method_id"]:
        raise StateFailure("refused", "Payment method should be the original payment method")
    _items_exist(order, item_ids, lambda i: "Some item not found")
    order = store.writable("orders", order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = method_id
    return order


BUILTIN_FUNCTIONS: dict[str, Callable[[Records, dict[str, Any]], Any]] = {
    "calculate": calculate,
    "retail.cancel_pending_order": cancel_pending_order,
    "retail.exchange_delivered_order_items": exchange_delivered_order_items,
    "retail.modify_pending_order_items": modify_pending_order_items,
    "retail.modify_pending_order_payment": modify_pending_order_payment,
    "retail.return_delivered_order_items": return_delivered_order_items,
}
BUILTIN_TABLES: dict[str, tuple[str, ...]] = {
    "calculate": (),
    **{name: ("orders", "users", "products") for name in BUILTIN_FUNCTIONS if name.startswith("retail.")},
}
"""Tables each built-in needs (checked by ``callbench validate``)."""
