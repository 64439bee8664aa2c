"""Causal reference paths from tau2-bench gold actions.

tau2's gold action lists are the calls its DB check needs, not a path an agent could follow: a
read can come before the read whose result names its argument (task 2 looks up a product before
the order that holds it), and a write often names an order, item, payment method or address that
no earlier gold action revealed (the gold list skips the lookups). callbench's causal audit
(:mod:`callbench.audit.causal`) rejects such a reference path: a reference call may
use only values from the operating instructions, the tool schemas, the caller's known facts, what
the caller said, and the results of earlier calls.

Two passes make the path causal without touching the gold writes (their arguments, order and
effect on the state stay tau2's; only the reference path gains reads, which change no state):

- :func:`causal_order` reorders each run of gold reads between two writes so that a read follows
  the one that reveals its argument values.
- :func:`complete_path` walks the ordered calls and, for each argument value the audit would flag
  (an identifying value, :func:`callbench.audit.leaks.identifying`, that is not a date) and that
  nothing before reveals, either finds it in the tau2 user's own instructions (the caller is told
  it, so it becomes one of the caller's known facts) or inserts the shortest chain of lookups
  (``get`` reads by key and the no-argument index read of :data:`~callbench.importers.tau2.tools.STATE_OPS`)
  whose arguments are already known and whose last result holds it. A value that neither
  reveals is returned as unresolved, with its location, for the importer to report.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from callbench.audit.causal import DATE, leaves
from callbench.audit.leaks import identifying
from callbench.audit.normal import Seen, fold
from callbench.bundle.state.engine import StateStore
from callbench.importers.tau2.tools import STATE_OPS, WRITE_TOOLS

MAX_CHAIN = 3
"""Lookups inserted for one value at the most (user -> order -> product is the longest needed)."""
COMPOSED = frozenset({"calculate"})
"""Tools whose arguments the agent composes (an arithmetic expression over amounts it has seen):
no lookup reveals them, and the causal audit flags no such value."""
_TOKEN = re.compile(r"[#\w]+")
_TABLE_RANK = {"users": 0, "orders": 1, "products": 2}
"""Which lookup an agent tries first when several could reveal a value: the caller's account, then
an order, then a product (after any record the call itself names)."""


def _arg_leaves(v: Any) -> list[str]:
    if isinstance(v, dict):
        return [x for y in v.values() for x in _arg_leaves(y)]
    if isinstance(v, list):
        return [x for y in v for x in _arg_leaves(y)]
    return [] if v is None or isinstance(v, bool) else [str(v).lower()]


def causal_order(actions: list[dict[str, Any]], results: list[Any], known: str) -> list[int]:
    """Indices of ``actions`` in an order where each read uses only values known before it.

    Within each run of reads between two writes, a read whose argument values are not yet in
    ``known`` (the caller's facts, lower-cased) or in an earlier result waits until a read placed
    before it reveals them (when no read of the run is ready, the first one left goes next). Writes
    keep their positions, so the state they change and the order of the action checks are the
    source's. ``results``: each action's result in the source order (reads change no state, so a
    moved read's values are the same)."""
    seen = known.lower()
    order: list[int] = []
    i = 0
    while i < len(actions):
        if actions[i]["name"] in WRITE_TOOLS:
            order.append(i)
            seen += " " + json.dumps(results[i], ensure_ascii=False).lower()
            i += 1
            continue
        j = i
        while j < len(actions) and actions[j]["name"] not in WRITE_TOOLS:
            j += 1
        pending = list(range(i, j))
        while pending:
            ready = next((k for k in pending
                          if all(v in seen for v in _arg_leaves(actions[k]["arguments"]))), pending[0])
            pending.remove(ready)
            order.append(ready)
            seen += " " + json.dumps(results[ready], ensure_ascii=False).lower()
        i = j
    return order


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def identify_by_email(store: StateStore, text: str) -> dict[str, Any] | None:
    """The ``find_user_id_by_email`` lookup of the one user whose email ``text`` (the caller's
    known facts) states, as a call (name and arguments); None unless exactly one user has it. The
    policy's authentication step (email, or name and zip code) when the gold list has none."""
    said = {m.casefold() for m in _EMAIL.findall(text)}
    fits = [
        str(u["email"]) for uid in store.keys("users")
        if isinstance(u := store.get("users", uid), dict) and str(u.get("email", "")).casefold() in said
    ]
    return {"name": "find_user_id_by_email", "arguments": {"email": fits[0]}} if len(fits) == 1 else None


def needs_source(v: Any) -> bool:
    """Whether a reference argument value must come from somewhere the candidate saw: the values
    the causal audit checks against later results and the hidden state (identifying, not a date;
    :mod:`callbench.audit.causal`). Free text and small numbers an agent composes are not."""
    return identifying(v) is not None and not DATE.match(str(v))


def _written_in(tokens: list[str], v: Any) -> bool:
    """Whether ``v`` is written in a text whose folded tokens are ``tokens``, as whole tokens (so
    ``10001`` is not found inside ``100012``)."""
    want = [f for t in _TOKEN.findall(str(v)) if (f := fold(t))]
    n = len(want)
    return n > 0 and any(tokens[i : i + n] == want for i in range(len(tokens) - n + 1))


@dataclass
class Unresolved:
    """An argument value no known fact, instruction or lookup reveals: the ``call`` index in the
    completed path, its ``tool``, the argument ``path`` (dotted) and the ``value``."""

    call: int
    tool: str
    path: str
    value: Any


@dataclass
class Completion:
    """What :func:`complete_path` made: the path's ``calls`` (name and arguments, lookups
    inserted), how many lookups it ``inserted``, the values the caller's instructions give that it
    ``told`` the caller (new known facts), and the values left ``unresolved``."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    inserted: int = 0
    told: list[Any] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)


class _Known:
    """What the candidate has seen so far, in the audit's normalised form plus the folded tokens
    (for finding the record keys it could look up)."""

    def __init__(self) -> None:
        self.seen = Seen()
        self.tokens: dict[str, None] = {}  # folded tokens, in the order they were seen

    def add(self, text: str) -> None:
        self.seen.add(text)
        for t in _TOKEN.findall(text):
            if (f := fold(t)):
                self.tokens.setdefault(f)


def _lookups() -> list[tuple[str, str, str | None]]:
    """(tool, table, key parameter or None) of every lookup read: ``get`` by key and ``index``."""
    out: list[tuple[str, str, str | None]] = []
    for tool, op in STATE_OPS.items():
        if op["op"] == "get":
            out.append((tool, op["table"], op["key"]))
        elif op["op"] == "index":
            out.append((tool, op["table"], None))
    return out


class _Lookup:
    """Finds the shortest chain of lookups that reveals a value, over one store's tables (results
    cached until the next write)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.reads = _lookups()
        self.keys: dict[str, list[tuple[str, str]]] = {}  # folded key -> (table, key)
        self.cache: dict[str, _Known | None] = {}
        for _, table, key in self.reads:
            if key is not None:
                for k in store.keys(table):
                    self.keys.setdefault(fold(k), []).append((table, k))

    def candidates(self, tokens: dict[str, None], prefer: set[str], first: bool) -> list[dict[str, Any]]:
        """Lookups whose argument is a record key among ``tokens`` (and, when ``first``, the
        no-argument ones), the records the current call names first, then by table and position."""
        found: list[tuple[int, int, int, dict[str, Any]]] = []
        for pos, tok in enumerate(tokens):
            for table, key in self.keys.get(tok, []):
                for tool, t, param in self.reads:
                    if t == table and param is not None:
                        call = {"name": tool, "arguments": {param: key}}
                        found.append((0 if tok in prefer else 1, _TABLE_RANK.get(table, 9), pos, call))
        calls = [c for *_, c in sorted(found, key=lambda x: x[:3])]
        if first:
            calls += [{"name": tool, "arguments": {}} for tool, _, param in self.reads if param is None]
        return calls

    def answer(self, call: dict[str, Any]) -> _Known | None:
        """What a lookup's result shows (None for an error), from the state as it is now."""
        k = json.dumps(call, sort_keys=True)
        if k not in self.cache:
            ans = self.store.call(call["name"], call["arguments"])
            got = None
            if not ans.error:
                got = _Known()
                got.add(json.dumps(ans.result, ensure_ascii=False))
            self.cache[k] = got
        return self.cache[k]

    def chain(
        self, value: Any, known: _Known, done: set[str], prefer: set[str]
    ) -> list[dict[str, Any]] | None:
        """The shortest list of lookups (at most :data:`MAX_CHAIN`), each using only values known
        before it (``known``, or the result of the lookup before it in the list), whose last result
        holds ``value``; None when there is none. ``done``: lookups already made (their JSON)."""
        parent: dict[str, tuple[dict[str, Any], str | None]] = {}
        level: list[str] = []
        for c in self.candidates(known.tokens, prefer, True):
            k = json.dumps(c, sort_keys=True)
            if k not in done and k not in parent:
                parent[k] = (c, None)
                level.append(k)
        for _ in range(MAX_CHAIN):
            nxt: list[str] = []
            for k in level:
                got = self.answer(parent[k][0])
                if got is None:
                    continue
                if got.seen.holds(value):
                    out: list[dict[str, Any]] = []
                    at: str | None = k
                    while at is not None:
                        out.insert(0, parent[at][0])
                        at = parent[at][1]
                    return out
                for c in self.candidates(got.tokens, prefer, False):
                    k2 = json.dumps(c, sort_keys=True)
                    if k2 not in done and k2 not in parent:
                        parent[k2] = (c, k)
                        nxt.append(k2)
            level = nxt
        return None


def complete_path(
    calls: list[dict[str, Any]], store: StateStore, known: list[str], instructions: str
) -> Completion:
    """The reference path's ``calls`` (gold actions in causal order: name and arguments) with the
    lookups they need inserted before them (module docstring). ``store``: a fresh state of the
    domain (the calls are replayed on it: inserted lookups see the state as it is at their place).
    ``known``: texts the candidate knows before the first call (the caller's known facts, as the
    audit adds them). ``instructions``: the tau2 user's instructions as text; a value written there
    is one the caller is told (returned in ``told``, for the importer to add to the known facts).
    Gold calls keep their arguments and relative order."""
    out = Completion()
    seen = _Known()
    for text in known:
        seen.add(text)
    said = [f for t in _TOKEN.findall(instructions) if (f := fold(t))]
    lookup = _Lookup(store)
    done: set[str] = set()

    def run(call: dict[str, Any]) -> None:
        ans = store.call(call["name"], call["arguments"])
        out.calls.append(call)
        if call["name"] in WRITE_TOOLS:
            lookup.cache.clear()  # the state changed: later lookups answer anew
        else:
            done.add(json.dumps(call, sort_keys=True))
        seen.add(json.dumps(ans.result, ensure_ascii=False))

    for call in calls:
        prefer = {fold(str(v)) for _, v in leaves(call["arguments"])}
        for path, v in leaves(call["arguments"]):
            if call["name"] in COMPOSED or not needs_source(v) or seen.seen.holds(v):
                continue
            if _written_in(said, v):
                out.told.append(v)
                seen.add(str(v))
                continue
            chain = lookup.chain(v, seen, done, prefer)
            if chain is None:
                out.unresolved.append(Unresolved(len(out.calls), call["name"], path, v))
                continue
            for c in chain:
                run(c)
            out.inserted += len(chain)
        run(call)
    return out


@dataclass
class PathNotes:
    """Figures of the reference paths an import completed (accumulated over its tasks): lookups
    ``inserted``, values the caller was ``told`` from its instructions, and ``unresolved`` values,
    each located as ``<scenario id>: reference_path.<turn>.tool_calls.<i>.arguments.<path> = <value>``."""

    inserted: int = 0
    told: int = 0
    unresolved: list[str] = field(default_factory=list)

    def add(self, scenario_id: str, done: Completion, path: list[dict[str, Any]]) -> None:
        """Count ``done`` (one task's completion) and locate its unresolved values in ``path``
        (the scenario's reference path, built from ``done.calls`` in order)."""
        self.inserted += done.inserted
        self.told += len(done.told)
        where: list[tuple[int, int]] = [
            (t, i) for t, turn in enumerate(path) for i, _ in enumerate(turn.get("tool_calls") or [])
        ]
        for u in done.unresolved:
            t, i = where[u.call]
            self.unresolved.append(
                f"{scenario_id}: reference_path.{t}.tool_calls.{i}.arguments.{u.path} = {u.value!r} "
                f"({u.tool})"
            )
