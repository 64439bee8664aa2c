"""Validator audits of stateful backends and state checks (docs/authoring.md).

Codes: ``state.unknown_tool`` (a state operation for a tool the agent lacks), ``state.unknown_table``
(an operation or a state check naming a table the state does not declare), ``state.builtin_tables``
(a built-in operation whose tables are not declared), ``state.no_state`` (a scenario with state
checks under an agent without a state), ``state.no_reference`` (a state check needs a reference
path to compare with), ``state.fixture_ignored`` (fixtures for a tool the state answers: they would
never be used).
"""

from __future__ import annotations

from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.state.builtin_ops import BUILTIN_TABLES
from callbench.bundle.state.models import BuiltinOp, ConstantOp
from callbench.bundle.validate.tools import Report


def audit_state_spec(agent: LoadedAgent, rep: Report) -> None:
    """Agent-level: every state operation names a tool of the agent and a declared table."""
    spec = agent.config.state
    if spec is None:
        return
    tools = {t.name for t in agent.config.tools}
    for name, op in spec.tools.items():
        where = f"state.tools.{name}"
        if name not in tools:
            rep(where, "state.unknown_tool", f"tool {name!r} is not one of agent {agent.config.id!r}'s tools")
        if isinstance(op, BuiltinOp):
            missing = [t for t in BUILTIN_TABLES[op.name] if t not in spec.tables]
            if missing:
                rep(
                    f"{where}.name",
                    "state.builtin_tables",
                    f"built-in {op.name!r} needs the tables {', '.join(missing)}",
                )
        elif not isinstance(op, ConstantOp) and op.table not in spec.tables:
            rep(f"{where}.table", "state.unknown_table", f"no table {op.table!r} in state.tables")


def audit_state_checks(agent: LoadedAgent, scen: Scenario, rep: Report) -> None:
    """Scenario-level: state checks need an agent state and a reference path, and name declared
    tables; fixtures of a state-answered tool are flagged (never used)."""
    spec = agent.config.state
    if spec is not None:
        for name in scen.fixtures:
            if name in spec.tools:
                rep(
                    f"fixtures.{name}",
                    "state.fixture_ignored",
                    f"tool {name!r} is answered by the agent's state; these fixtures are never used",
                )
    for i, c in enumerate(scen.state_checks):
        where = f"state_checks.{i}"
        if spec is None:
            rep(where, "state.no_state", f"agent {agent.config.id!r} declares no state to check")
            continue
        if scen.reference_path is None:
            rep(
                where, "state.no_reference", "a state check compares with the reference path's state; add one"
            )
        ids = {a.id for a in scen.action_checks}
        for k, g in enumerate(c.applies_after):
            if g not in ids:
                rep(
                    f"{where}.applies_after.{k}",
                    "ref.applies_after",
                    f"no action check {g!r} in this scenario",
                )
        for k, t in enumerate(c.tables):
            if t not in spec.tables:
                rep(f"{where}.tables.{k}", "state.unknown_table", f"no table {t!r} in the agent's state")
        for k, f in enumerate(c.fields):
            if f.split(".", 1)[0] not in spec.tables:
                rep(
                    f"{where}.fields.{k}",
                    "state.unknown_table",
                    f"{f!r} must start with a table of the agent's state",
                )
