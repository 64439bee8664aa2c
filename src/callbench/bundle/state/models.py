"""Declarations of a stateful backend and of state checks.

The paper's backend answers each tool from an authored queue of fixtures; a queue cannot express a
write that changes what a later read returns. An agent may therefore declare a *state*: tables of
records loaded from data files of the bundle, and for each stateful tool one operation that reads
or changes those records. Operations are declarative where they can be (look a record up by key,
find one by field values, update fields after preconditions), and otherwise name one of a small,
reviewed set of built-in operations (:mod:`callbench.bundle.state.builtin_ops`). No code from a
bundle is ever executed.

On disk, in ``agent.yaml``::

    state:
      tables: {orders: state/orders.json, users: state/users.json}   # table -> file (agent folder)
      tools:
        get_order_details: {op: get, table: orders, key: order_id, not_found: Order not found}
        cancel_pending_order: {op: builtin, name: retail.cancel_pending_order}

A table file is a JSON/YAML object mapping each record's key to the record. A scenario's
``state_checks`` compare the final state of a call with the state its reference path produces.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from callbench.bundle.matchers import Matcher


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


TABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
BUILTINS = (
    "calculate",
    "retail.cancel_pending_order",
    "retail.exchange_delivered_order_items",
    "retail.modify_pending_order_items",
    "retail.modify_pending_order_payment",
    "retail.return_delivered_order_items",
)
"""The reviewed built-in operations (:mod:`callbench.bundle.state.builtin_ops` documents each)."""


class GetOp(_Strict):
    """Return the record of ``table`` whose key is the value of argument ``key``; error
    ``not_found`` with message ``not_found`` when there is none."""

    op: Literal["get"]
    table: str = Field(pattern=TABLE_PATTERN)
    key: str = Field(min_length=1, description="Name of the argument holding the record key.")
    not_found: str = Field(default="Record not found", max_length=500)


class FindOp(_Strict):
    """Return the key (``returns: key``) or the record of the first record of ``table`` (in file
    order) whose fields equal the arguments: ``where`` maps a dotted field path of the record to an
    argument name. Strings compare exactly (after Unicode NFC)."""

    op: Literal["find"]
    table: str = Field(pattern=TABLE_PATTERN)
    where: dict[str, str] = Field(min_length=1)
    returns: Literal["key", "record"] = "key"
    not_found: str = Field(default="Record not found", max_length=500)


class GetNestedOp(_Strict):
    """Return the entry ``record[field][<argument key>]`` of the first record of ``table`` that has
    one (e.g. a product variant by item id, whichever product holds it)."""

    op: Literal["get_nested"]
    table: str = Field(pattern=TABLE_PATTERN)
    field: str = Field(min_length=1)
    key: str = Field(min_length=1)
    not_found: str = Field(default="Record not found", max_length=500)


class IndexOp(_Strict):
    """Return an object mapping ``record[key_field]`` to ``record[value_field]`` over every record
    of ``table``, keys sorted (e.g. product name -> product id)."""

    op: Literal["index"]
    table: str = Field(pattern=TABLE_PATTERN)
    key_field: str = Field(min_length=1)
    value_field: str = Field(min_length=1)


class Precondition(_Strict):
    """A record field that must satisfy ``matcher`` before an update; else error ``refused`` with
    ``message``."""

    field: str = Field(min_length=1)
    matcher: Matcher
    message: str = Field(min_length=1, max_length=500)


class UpdateOp(_Strict):
    """Field updates of one record found by key: each ``set`` entry maps a dotted field path to the
    name of the argument whose value it takes (``=literal`` sets the literal string instead). Every
    ``require`` precondition is checked first, in order. Returns the updated record."""

    op: Literal["update"]
    table: str = Field(pattern=TABLE_PATTERN)
    key: str = Field(min_length=1)
    require: list[Precondition] = Field(default_factory=list, max_length=20)
    set: dict[str, str] = Field(min_length=1)
    not_found: str = Field(default="Record not found", max_length=500)


class ConstantOp(_Strict):
    """Return ``result`` unchanged (a tool that only acknowledges, e.g. a transfer)."""

    op: Literal["constant"]
    result: Any


class BuiltinOp(_Strict):
    """One of the reviewed built-in operations (:data:`BUILTINS`)."""

    op: Literal["builtin"]
    name: Literal[BUILTINS]  # type: ignore[valid-type]


StateOp = Annotated[
    GetOp | FindOp | GetNestedOp | IndexOp | UpdateOp | ConstantOp | BuiltinOp, Field(discriminator="op")
]


class StateSpec(_Strict):
    """``agent.yaml`` ``state``: the tables (name -> data file, relative to the agent folder) and
    the operation answering each stateful tool. Tools not listed here answer from fixtures."""

    tables: dict[str, str] = Field(min_length=1, max_length=50)
    tools: dict[str, StateOp] = Field(min_length=1, max_length=64)


class StateChange(BaseModel):
    """One field changed by a tool call: ``table``, record ``key``, dotted field ``path`` (empty for
    the whole record), the value ``before`` and ``after`` (None when absent)."""

    table: str
    key: str
    path: str
    before: Any = None
    after: Any = None


class StateRecord(BaseModel):
    """The state saved with a trace: the SHA-256 of the initial tables (canonical JSON) and the
    final version of every record the call touched (``final[table][key]``); with the bundle's
    tables this is the whole final state."""

    initial_sha256: str
    final: dict[str, dict[str, Any]] = Field(default_factory=dict)
