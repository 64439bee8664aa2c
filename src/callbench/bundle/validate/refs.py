"""Validator audits of one scenario's structure and references: ids, tool names, ``after`` order,
plan steps, the channel program, ``${...}`` references, and its matchers against each tool's schema
(codes in :mod:`callbench.bundle.validate.audits`).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from callbench.bundle.matchers import Matcher
from callbench.bundle.models import AsrEvent, LoadedAgent, Scenario, VadSplit
from callbench.bundle.references import REF, ReferenceError_, find_references, resolve
from callbench.bundle.validate.matchers import SchemaView, audit_fields
from callbench.bundle.validate.tools import Report, arguments_schema, schema_usable

_MATCHER: TypeAdapter[Any] = TypeAdapter(Matcher)


def audit_structure(agent: LoadedAgent, s: Scenario, report: Report) -> None:
    """Ids, tool names, ``after`` order and ``applies_after`` guards, plan steps and the channel
    program of one scenario."""
    cfg = agent.config
    tools = {t.name for t in cfg.tools}
    if s.agent != cfg.id:
        report("agent", "ref.agent",
               f"agent {s.agent!r} is not {cfg.id!r}, the agent whose folder holds this scenario")
    ids: dict[str, str] = {}
    items = [(f"action_checks.{i}", c.id) for i, c in enumerate(s.action_checks)]
    items += [(f"criteria.{i}", c.id) for i, c in enumerate(s.criteria)]
    for where, item_id in items:
        if item_id in ids:
            report(f"{where}.id", "id.duplicate", f"id {item_id!r} is already used by {ids[item_id]}")
        else:
            ids[item_id] = where
    for name in s.fixtures:
        if name not in tools:
            report(f"fixtures.{name}", "ref.fixture_tool",
                   f"fixtures for {name!r}, which is not a tool of {cfg.id!r}")
    check_ids = {c.id for c in s.action_checks}
    for i, c in enumerate(s.action_checks):
        if c.tool not in tools:
            report(f"action_checks.{i}.tool", "ref.check_tool",
                   f"check {c.id!r} names tool {c.tool!r}, which is not a tool of {cfg.id!r}")
        for k, dep in enumerate(c.after):
            if dep not in check_ids:
                report(f"action_checks.{i}.after.{k}", "ref.after",
                       f"{dep!r} is not an action check of this scenario")
        for k, guard in enumerate(c.applies_after):
            if guard not in check_ids:
                report(f"action_checks.{i}.applies_after.{k}", "ref.applies_after",
                       f"guard {guard!r} is not an action check of this scenario")
        if c.count.max is not None and c.count.min > c.count.max:
            report(f"action_checks.{i}.count", "check.count_bounds",
                   f"count min {c.count.min} is greater than max {c.count.max}")
    for where, cycle in _after_cycles(s):
        report(where, "ref.after_cycle", "checks ordered in a cycle: " + " -> ".join(cycle))
    steps: set[str] = set()
    for i, st in enumerate(s.brief.plan):
        if st.id in steps:
            report(f"brief.plan.{i}.id", "plan.duplicate_step", f"plan step id {st.id!r} is used twice")
        steps.add(st.id)
    events: list[tuple[str, AsrEvent | VadSplit]] = [
        *((f"channel.asr_events.{i}", e) for i, e in enumerate(s.channel.asr_events)),
        *((f"channel.vad_splits.{i}", e) for i, e in enumerate(s.channel.vad_splits)),
    ]
    for where, ev in events:
        if (ev.turn is None) == (ev.step is None):
            report(where, "channel.turn_or_step",
                   "give exactly one of turn (1-based caller turn) or step (plan step id)")
        if ev.step is not None and ev.step not in steps:
            report(f"{where}.step", "channel.step", f"{ev.step!r} is not a plan step id ({sorted(steps)})")
    for i, asr in enumerate(s.channel.asr_events):
        if asr.kind == "substitute" and not asr.replacement:
            report(f"channel.asr_events.{i}.replacement", "channel.replacement",
                   "a substitute event needs a replacement")
        elif asr.kind != "substitute" and asr.replacement is not None:
            report(f"channel.asr_events.{i}.replacement", "channel.replacement",
                   f"a {asr.kind} event takes no replacement (only substitute does)")
    for i, sp in enumerate(s.channel.vad_splits):
        for k, anchor in enumerate(sp.after):
            if not anchor.strip():
                report(f"channel.vad_splits.{i}.after.{k}", "channel.anchor",
                       "an empty VAD anchor splits nothing")


def _after_cycles(s: Scenario) -> list[tuple[str, list[str]]]:
    """Each cycle through ``after`` and ``applies_after`` once (a guard is evaluated before the
    check it guards, as an ``after`` dependency is), as (path of the field holding the edge that
    closes the cycle, e.g. ``action_checks.2.applies_after``; ids around the cycle)."""
    deps = {c.id: [*((d, "after") for d in c.after), *((d, "applies_after") for d in c.applies_after)]
            for c in s.action_checks}
    index = {c.id: i for i, c in enumerate(s.action_checks)}
    state: dict[str, int] = {}
    cycles: list[tuple[str, list[str]]] = []
    for start in deps:
        if state.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        trail: list[str] = []
        while stack:
            node, k = stack.pop()
            if k == 0:
                state[node] = 1
                trail.append(node)
            nxt = deps.get(node, [])
            if k < len(nxt):
                stack.append((node, k + 1))
                dep, field = nxt[k]
                if state.get(dep) == 1:
                    cyc = [*trail[trail.index(dep):], dep]
                    cycles.append((f"action_checks.{index[node]}.{field}", cyc))
                elif not state.get(dep) and dep in deps:
                    stack.append((dep, 0))
            else:
                state[node] = 2
                trail.pop()
    return cycles


def audit_references(agent: LoadedAgent, s: Scenario, report: Report) -> None:
    """Code ``ref.unresolved`` for each ``${...}`` that does not resolve against the scenario's
    known facts and hidden state, in fixtures, check arguments and the agent's default responses.

    Fast path: every distinct reference in the JSON text is resolved once; only when one fails are
    the values walked to report each place it occurs.
    """
    facts, state = s.brief.known_facts, s.hidden_state
    places: list[tuple[str, Any]] = [(f"fixtures.{k}", v) for k, v in s.fixtures.items()]
    places += [(f"action_checks.{i}.args", c.args) for i, c in enumerate(s.action_checks)]
    texts = [_SCENARIO_PARTS.dump_json(v).decode("utf-8") for _, v in places]
    if not _all_resolve({m.group(0) for t in texts for m in REF.finditer(t)}, facts, state):
        for (where0, value), text in zip(places, texts, strict=True):
            if "${" not in text:
                continue
            dumped = _SCENARIO_PARTS.dump_python(value, by_alias=True)
            for where, ref in find_references(dumped, where0):
                try:
                    resolve(ref, facts, state)
                except ReferenceError_:
                    report(where, "ref.unresolved", _unresolved(ref, facts, state))
    for t in agent.config.tools:
        for where, ref in find_references(t.default_response, f"default_response of tool {t.name}"):
            try:
                resolve(ref, facts, state)
            except ReferenceError_:
                report("", "ref.unresolved", f"{where}: " + _unresolved(ref, facts, state))


_SCENARIO_PARTS: TypeAdapter[Any] = TypeAdapter(Any)


def _all_resolve(refs: set[str], facts: dict[str, Any], state: dict[str, Any]) -> bool:
    for ref in refs:
        try:
            resolve(ref, facts, state)
        except ReferenceError_:
            return False
    return True


def _unresolved(ref: str, facts: dict[str, Any], state: dict[str, Any]) -> str:
    src = "known facts" if ref.startswith("${caller.") else "hidden state"
    keys = sorted(facts if src == "known facts" else state)
    return f"{ref} does not resolve: no such path in the caller's {src} (top-level keys: {keys[:12]})"


def audit_scenario_matchers(agent: LoadedAgent, s: Scenario, report: Report) -> None:
    """Matchers of fixtures and action checks (references resolved) against each tool's schema;
    codes ``matcher.type``, ``matcher.enum``, ``matcher.param_unknown``."""
    tools = {t.name: t for t in agent.config.tools}
    facts, state = s.brief.known_facts, s.hidden_state
    groups: list[tuple[str, str, dict[str, Any]]] = []
    for name, fx in s.fixtures.items():
        groups += [(name, f"fixtures.{name}.queue.{i}.args", e.args) for i, e in enumerate(fx.queue)]
    groups += [(c.tool, f"action_checks.{i}.args", c.args) for i, c in enumerate(s.action_checks)]
    for tool_name, where, matchers in groups:
        tool = tools.get(tool_name)
        if tool is None:
            continue
        schema = _usable_schema(tool, agent.config)
        if schema is None:
            continue
        resolved: dict[str, Any] = {}
        for k, m in matchers.items():
            if not _mentions_ref(m):
                resolved[k] = m
                continue
            try:
                resolved[k] = _MATCHER.validate_python(resolve(m, facts, state))
            except (ReferenceError_, ValidationError):
                continue  # reported as ref.unresolved
        audit_fields(resolved, SchemaView(schema, schema), where, report)


def _mentions_ref(m: Any) -> bool:
    """Whether a typed matcher holds a ``${...}`` reference anywhere (a fast JSON dump in
    pydantic-core; much cheaper than resolving every matcher)."""
    return b"${" in _MATCHER.dump_json(m)


_SCHEMA_CACHE: dict[int, tuple[Any, Any, dict[str, Any] | None]] = {}


def _usable_schema(tool: Any, config: Any) -> dict[str, Any] | None:
    """The tool's arguments schema when usable (see ``schema_usable``), cached per tool object
    (checked by identity, so a reused ``id`` never returns a stale entry)."""
    hit = _SCHEMA_CACHE.get(id(tool))
    if hit is not None and hit[0] is tool and hit[1] is config:
        return hit[2]
    schema = arguments_schema(tool, config)
    result = schema if schema_usable(schema) else None
    if len(_SCHEMA_CACHE) > 4096:
        _SCHEMA_CACHE.clear()
    _SCHEMA_CACHE[id(tool)] = (tool, config, result)
    return result
