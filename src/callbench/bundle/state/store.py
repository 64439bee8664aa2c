"""The records of one call's state, and what the engine and the built-in operations share: the
failure of an operation, the tables' hash, field-level differences, typed arguments.

Split from :mod:`callbench.bundle.state.engine` so that the built-in operations
(:mod:`callbench.bundle.state.builtin_ops`) and the engine that dispatches to them import this
module, not each other. Deterministic: no clock, no randomness; records are read in file order.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from callbench.bundle.matchers import values_equal

Tables = Mapping[str, Mapping[str, Any]]


class StateFailure(Exception):
    """An operation refused a call: ``code`` and a one-line ``message`` for the tool result."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def tables_sha256(tables: Tables) -> str:
    """SHA-256 (hex) of the tables as canonical JSON (sorted keys, compact, UTF-8)."""
    text = json.dumps(tables, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def diff_values(before: Any, after: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Field-level differences between two JSON values: (dotted path, before, after) for each
    changed leaf; objects are compared key by key, anything else (lists too) as a whole. A key
    absent on one side has the value None there."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[tuple[str, Any, Any]] = []
        for k in [*before, *(k for k in after if k not in before)]:
            sub = f"{path}.{k}" if path else str(k)
            out += diff_values(before.get(k), after.get(k), sub)
        return out
    if type(before) is type(after) and before == after:
        return []
    if (
        before is not None
        and after is not None
        and values_equal(before, after)
        and not isinstance(before, list | dict)
    ):
        return []
    return [(path, before, after)]


class Records:
    """Record access for operations: the initial ``tables`` (shared, never mutated) plus the records
    this call changed (``touched``, copied on first write) and the pre-call copies of the records
    the current call wrote (``_pending``, for roll-back)."""

    def __init__(self, tables: Tables) -> None:
        self.base = tables
        self.touched: dict[str, dict[str, Any]] = {}
        self._pending: dict[tuple[str, str], Any] = {}

    def keys(self, table: str) -> list[str]:
        """The record keys of ``table`` in file order; raises ``StateFailure`` for an unknown table."""
        if table not in self.base:
            raise StateFailure("not_found", f"no table {table!r}")
        return list(self.base[table])

    def get(self, table: str, key: str) -> Any | None:
        """The current record (do not mutate it; use :meth:`writable`), or None."""
        if table in self.touched and key in self.touched[table]:
            return self.touched[table][key]
        return self.base.get(table, {}).get(key)

    def writable(self, table: str, key: str) -> Any:
        """The record, copied into this call's state so it may be changed in place; raises
        ``StateFailure`` when absent (no operation creates records)."""
        rec = self.get(table, key)
        if rec is None:
            raise StateFailure("not_found", f"no record {key!r} in {table!r}")
        if (table, key) not in self._pending:
            self._pending[(table, key)] = copy.deepcopy(rec)
        if key not in self.touched.get(table, {}):
            self.touched.setdefault(table, {})[key] = copy.deepcopy(rec)
        return self.touched[table][key]


def argument(args: dict[str, Any], name: str, kind: type | tuple[type, ...] = str) -> Any:
    """Argument ``name`` of type ``kind``; raises ``StateFailure`` (``invalid_arguments``)."""
    if name not in args:
        raise StateFailure("invalid_arguments", f"missing argument {name!r}")
    v = args[name]
    if not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool):
        raise StateFailure("invalid_arguments", f"argument {name!r} has the wrong type")
    return v
