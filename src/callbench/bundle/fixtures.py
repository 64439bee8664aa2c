"""Fixture queue semantics shared by the simulation backend and the validator's replay.

Paper, backend: "The j-th call to a tool is matched against the j-th entry ... Matching arguments
get the authored response. A mismatch or an unparseable call gets that entry's mismatch response,
and a call beyond the queue gets the tool's default."
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from callbench.bundle.matchers import FieldsResult, Matcher, match_fields
from callbench.bundle.models import AgentConfig, FixtureEntry, Scenario, ToolFixtures
from callbench.bundle.references import resolve

NO_DATA: dict[str, Any] = {"error": "no_data", "message": "The system has no record for this request."}
_MATCHER = TypeAdapter(Matcher)


class FixtureAnswer(BaseModel):
    """The backend's answer to one call: which rule applied, the per-field matcher results, the
    returned object."""

    outcome: Literal["authored", "mismatch", "default"]
    queue_position: int
    fields: FieldsResult | None = None
    result: Any


def resolve_matchers(
    matchers: dict[str, Any], facts: dict[str, Any], state: dict[str, Any], where: str = ""
) -> dict[str, Any]:
    """Resolve ``${...}`` references inside matchers and re-parse them into typed matchers."""
    return {
        k: _MATCHER.validate_python(resolve(m, facts, state, f"{where}.{k}".strip(".")))
        for k, m in matchers.items()
    }


class ResolvedFixtures:
    """A scenario's fixtures with references resolved (raises ``ReferenceError_`` when one does not).

    ``answer(tool, args, j)`` gives the response to the j-th (0-based) call of ``tool``; ``args`` is
    None for unparseable arguments.
    """

    def __init__(self, agent: AgentConfig, scenario: Scenario) -> None:
        facts, state = scenario.brief.known_facts, scenario.hidden_state
        self._defaults: dict[str, Any] = {}
        self._queues: dict[str, list[FixtureEntry]] = {}
        for t in agent.tools:
            self._defaults[t.name] = (
                resolve(t.default_response, facts, state) if t.default_response is not None else NO_DATA
            )
        for name, fx in scenario.fixtures.items():
            where = f"fixtures.{name}"
            self._queues[name] = [
                FixtureEntry(
                    args=resolve_matchers(e.args, facts, state, f"{where}.queue.{i}.args"),
                    response=resolve(e.response, facts, state, f"{where}.queue.{i}.response"),
                    mismatch_response=resolve(
                        e.mismatch_response, facts, state, f"{where}.queue.{i}.mismatch_response"
                    ),
                )
                for i, e in enumerate(fx.queue)
            ]
            if fx.default is not None:
                self._defaults[name] = resolve(fx.default, facts, state, f"{where}.default")

    def queue_length(self, tool: str) -> int:
        """How many authored queue entries ``tool`` has in this scenario (0 without fixtures)."""
        return len(self._queues.get(tool, []))

    def answer(self, tool: str, args: dict[str, Any] | None, j: int) -> FixtureAnswer:
        queue = self._queues.get(tool, [])
        if j >= len(queue):
            return FixtureAnswer(
                outcome="default", queue_position=j, result=self._defaults.get(tool, NO_DATA)
            )
        entry = queue[j]
        if args is None:
            return FixtureAnswer(outcome="mismatch", queue_position=j, result=entry.mismatch_response)
        fields = match_fields(entry.args, args)
        return FixtureAnswer(
            outcome="authored" if fields.ok else "mismatch",
            queue_position=j,
            fields=fields,
            result=entry.response if fields.ok else entry.mismatch_response,
        )


def fixtures_for(scenario: Scenario, tool: str) -> ToolFixtures | None:
    return scenario.fixtures.get(tool)
