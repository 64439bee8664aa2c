"""Causal reference paths: a reference tool call may use only values known before
it.

Known before a call made in assistant message m of the reference replay: the operating
instructions as rendered for the scenario (its own variables, the call's date and time), the tool
schemas offered to the candidate, the caller's brief facts (``known_facts``, which the caller gives
when asked; the audit does not try to tell which plan step says which fact), what the candidate
observed of the caller before m, and the results of tool calls made in messages before m. A value
of a reference argument that is none of these is *non-causal* when the result of another call
sent in message m holds it (and is not an echo of that call's own arguments: the reference takes
it from an answer it has not received yet), or when it identifies something
(:func:`~callbench.audit.leaks.identifying`) that a later result or only the hidden state or the
fixtures hold. Values are compared in normalised forms
(:mod:`callbench.audit.normal`). Free text the reference composes (a summary, a note) is in no
source and is not flagged; neither is a hidden date or date-time no result returns (the agent
derives dates from the caller's words and the call's date, and a derived one cannot be told from
a hidden one).

Each non-causal value is an ``audit.reference_noncausal`` problem located at the scenario file and
``reference_path.<turn>.tool_calls.<i>.arguments.<path>``. The fix is to send the dependent call
in a later message (``after_results: true`` on the call, docs/authoring.md).
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from callbench.audit.leaks import identifying
from callbench.audit.normal import Seen, amount_of, fold
from callbench.bundle.loader import Problem
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.references import ReferenceError_, resolve
from callbench.sim.episode import episode_constants
from callbench.trace import Trace

_REF_ID = re.compile(r"^ref_([0-9]+)_([0-9]+)$")
DATE = re.compile(r"^[0-9]{4}-[0-9]{2}(-[0-9]{2}([T ][0-9:]+([+-][0-9:]+|Z)?)?)?$")
"""A date, month or date-time: the agent derives these from the caller's words and the call's date,
so a hidden one that no result returns is not flagged (it cannot be told from a derived one)."""


def leaves(v: Any, where: str = "") -> list[tuple[str, Any]]:
    """Every scalar of a JSON value with its dotted path (``"items.0.id"``), depth first."""
    if isinstance(v, dict):
        return [x for k, y in v.items() for x in leaves(y, f"{where}.{k}".lstrip("."))]
    if isinstance(v, list):
        return [x for i, y in enumerate(v) for x in leaves(y, f"{where}.{i}".lstrip("."))]
    return [(where, v)]


class _Values:
    """A set of values in normalised forms: folded texts and amounts."""

    def __init__(self) -> None:
        self.folded: set[str] = set()
        self.numbers: set[Decimal] = set()

    def add(self, v: Any) -> None:
        for _, leaf in leaves(v):
            if leaf is None or isinstance(leaf, bool):
                continue
            if (f := fold(str(leaf))):
                self.folded.add(f)
            if (a := amount_of(leaf)) is not None:
                self.numbers.add(a)

    def has(self, v: Any) -> bool:
        a = amount_of(v)
        return fold(str(v)) in self.folded or (a is not None and a in self.numbers)


@dataclass(frozen=True)
class NonCausal:
    """One reference argument value not known before its call: reference ``turn``, the call's
    ``call`` index in the turn's ``tool_calls``, its ``tool``, the argument ``path`` (dotted), the
    ``value``, and ``source``: the tool whose result in the same or a later message holds it, or
    ``""`` when only the hidden state or the fixtures do."""

    turn: int
    call: int
    tool: str
    path: str
    value: Any
    source: str


def _backend_values(agent: LoadedAgent, scen: Scenario) -> _Values:
    """Every value the scenario's backend holds: hidden state, fixtures (references resolved) and
    the tools' default answers."""
    out = _Values()
    out.add(scen.hidden_state)
    out.add([t.default_response for t in agent.config.tools])
    with contextlib.suppress(ReferenceError_, ValueError, KeyError):  # unresolved: validate reports it
        out.add(resolve(scen.model_dump(mode="json")["fixtures"], scen.brief.known_facts, scen.hidden_state))
    return out


def noncausal_values(agent: LoadedAgent, scen: Scenario, trace: Trace) -> list[NonCausal]:
    """Every :class:`NonCausal` argument value of the reference replay ``trace`` of ``scen`` (module
    docstring). Calls are found by the scripted reference's tool-call ids ``ref_<turn>_<i>``."""
    const = episode_constants(agent, scen)
    base = Seen()
    base.add(const.instructions)
    base.add(json.dumps([t.model_dump(mode="json") for t in const.tools], ensure_ascii=False))
    for k, v in scen.brief.known_facts.items():
        base.add(f"{k} {v if not isinstance(v, (dict, list)) else json.dumps(v, ensure_ascii=False)}")
    for k, v in scen.variables.items():
        base.add(f"{k} {v}")
    backend = _backend_values(agent, scen)
    results = {e.index: e for e in trace.tool_events}
    out: list[NonCausal] = []
    for ev in sorted(trace.tool_events, key=lambda e: e.index):
        m = _REF_ID.match(ev.original_tool_call_id or ev.tool_call_id)
        if m is None or ev.arguments is None:
            continue
        seen = Seen(base.folded, set(base.numbers))
        for msg in trace.messages:
            if msg.index < ev.message_index and msg.role in ("user", "tool") and msg.content:
                seen.add(msg.content)
        pending = [  # results not returned before this call, of other calls
            e for e in results.values() if e.message_index >= ev.message_index and e.executed and e is not ev
        ]
        for path, v in leaves(ev.arguments):
            if v is None or isinstance(v, bool) or seen.holds(v):
                continue
            source = ""
            strong = identifying(v) is not None and not DATE.match(str(v))
            for e in pending:
                if e.message_index > ev.message_index and not strong:
                    continue  # a later result holding a derived value (a date) is no source of it
                sent, got = _Values(), _Values()
                sent.add(e.arguments)
                got.add(e.result)
                if got.has(v) and not sent.has(v):  # a result that is not an echo of what was sent
                    source = e.name
                    break
            if source or (strong and backend.has(v)):
                out.append(NonCausal(int(m.group(1)), int(m.group(2)), ev.name, path, v, source))
    return out


def find_noncausal(agent: LoadedAgent, scen: Scenario, trace: Trace, file: str) -> list[Problem]:
    """Located ``audit.reference_noncausal`` problems for :func:`noncausal_values` (``file``: the
    scenario's bundle-relative file)."""
    out = []
    for nc in noncausal_values(agent, scen, trace):
        where = (
            f"the result of {nc.source} in the same or a later message" if nc.source
            else "only the scenario's hidden state or fixtures"
        )
        out.append(
            Problem(
                file=file,
                path=f"reference_path.{nc.turn}.tool_calls.{nc.call}.arguments.{nc.path}",
                code="audit.reference_noncausal",
                message=f"reference turn {nc.turn}: {nc.tool} sends {nc.path} = {nc.value!r}, which is "
                f"not known before the call (prompt, call context, caller's brief, earlier results); "
                f"{where} holds it: send the call after that result (after_results: true)"[:400],
            )
        )
    return out
