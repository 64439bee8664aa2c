"""The stateful backend's engine: one call's tables, copy-on-write, every change recorded.

Shared by the simulation backend (:mod:`callbench.sim.backend`), the grader's state check and the
validator's reference replay, so all three give the same answers. Deterministic: no clock, no
randomness; records are read in file order. Errors come back as ``{"error": code, "message": ...}``
(codes ``invalid_arguments``, ``not_found``, ``refused``, ``insufficient_balance``) and change
nothing: a failed operation is rolled back whole.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from callbench.bundle.matchers import lookup_path, values_equal
from callbench.bundle.state.builtin_ops import BUILTIN_FUNCTIONS
from callbench.bundle.state.models import (
    BuiltinOp,
    ConstantOp,
    FindOp,
    GetNestedOp,
    GetOp,
    IndexOp,
    StateChange,
    StateRecord,
    StateSpec,
    UpdateOp,
)
from callbench.bundle.state.store import Records, StateFailure, Tables, argument, diff_values, tables_sha256


@dataclass
class StateAnswer:
    """The answer to one stateful call: the ``result`` sent back, whether it is an error, and the
    ``changes`` it made (empty for reads and errors)."""

    result: Any
    error: bool
    changes: list[StateChange] = field(default_factory=list)


class StateStore(Records):
    """The state of one call: the initial ``tables`` (shared, never mutated) plus the records this
    call changed (copied on first write; record access in :class:`~callbench.bundle.state.store.Records`).
    ``spec`` maps tools to operations."""

    def __init__(self, tables: Tables, spec: StateSpec, initial_sha256: str = "") -> None:
        super().__init__(tables)
        self.spec = spec
        self.initial_sha256 = initial_sha256 or tables_sha256(tables)

    # ------------------------------------------------------------ calls

    def handles(self, tool: str) -> bool:
        """Whether ``tool`` is answered by this state (it has an operation in the spec)."""
        return tool in self.spec.tools

    def call(self, tool: str, args: dict[str, Any] | None) -> StateAnswer:
        """Run ``tool``'s operation on ``args`` (None: unparseable arguments). Never raises for a
        refused call: the error is the result and the state is unchanged."""
        op = self.spec.tools[tool]
        self._pending = {}
        try:
            if args is None:
                raise StateFailure("invalid_arguments", "arguments are not a JSON object")
            result = _run(self, op, args)
        except StateFailure as e:
            for (t, k), before in self._pending.items():
                self.touched[t][k] = before
            self._drop_unchanged()
            return StateAnswer({"error": e.code, "message": e.message}, True)
        changes = [
            StateChange(table=t, key=k, path=p, before=b, after=a)
            for (t, k), before in self._pending.items()
            for p, b, a in diff_values(before, self.touched[t][k])
        ]
        self._drop_unchanged()
        return StateAnswer(copy.deepcopy(result), False, changes)

    def _drop_unchanged(self) -> None:
        for t in list(self.touched):
            for k in list(self.touched[t]):
                if not diff_values(self.base[t].get(k), self.touched[t][k]):
                    del self.touched[t][k]
            if not self.touched[t]:
                del self.touched[t]
        self._pending = {}

    def record(self) -> StateRecord:
        """The state to save with the trace: initial hash and every changed record's final version."""
        return StateRecord(initial_sha256=self.initial_sha256, final=copy.deepcopy(self.touched))


def _field_equals(rec: Any, path: str, value: Any) -> bool:
    present, found = lookup_path(rec, path)
    return present and values_equal(found, value)


def _set_path(rec: dict[str, Any], path: str, value: Any) -> None:
    *head, last = path.split(".")
    cur = rec
    for part in head:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    cur[last] = value


def _run(store: StateStore, op: Any, args: dict[str, Any]) -> Any:
    if isinstance(op, ConstantOp):
        return op.result
    if isinstance(op, GetOp):
        rec = store.get(op.table, argument(args, op.key))
        if rec is None:
            raise StateFailure("not_found", op.not_found)
        return rec
    if isinstance(op, FindOp):
        wanted = {path: argument(args, a) for path, a in op.where.items()}
        for k in store.keys(op.table):
            rec = store.get(op.table, k)
            if all(_field_equals(rec, path, v) for path, v in wanted.items()):
                return k if op.returns == "key" else rec
        raise StateFailure("not_found", op.not_found)
    if isinstance(op, GetNestedOp):
        key = argument(args, op.key)
        for k in store.keys(op.table):
            inner = (store.get(op.table, k) or {}).get(op.field)
            if isinstance(inner, dict) and key in inner:
                return inner[key]
        raise StateFailure("not_found", op.not_found)
    if isinstance(op, IndexOp):
        pairs = {}
        for k in store.keys(op.table):
            rec = store.get(op.table, k) or {}
            if op.key_field in rec and op.value_field in rec:
                pairs[str(rec[op.key_field])] = rec[op.value_field]
        return dict(sorted(pairs.items()))
    if isinstance(op, UpdateOp):
        key = argument(args, op.key)
        if store.get(op.table, key) is None:
            raise StateFailure("not_found", op.not_found)
        rec = store.writable(op.table, key)
        for pre in op.require:
            present, value = lookup_path(rec, pre.field)
            if not pre.matcher.evaluate(value, present).ok:
                raise StateFailure("refused", pre.message)
        for path, source in op.set.items():
            _set_path(rec, path, source[1:] if source.startswith("=") else argument(args, source))
        return rec
    if isinstance(op, BuiltinOp):
        return BUILTIN_FUNCTIONS[op.name](store, args)
    raise StateFailure("invalid_arguments", f"unknown operation {type(op).__name__}")
