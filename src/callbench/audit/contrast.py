"""Contrastive known-answer traces: from each scenario's reference path, derive
calls that differ from the correct one in a single known way, so that a judge who calls everything
``met`` (or everything ``not_met``) is caught on the criteria each difference must flip.

Every kind is *replayed* through the real episode loop (:func:`callbench.sim.episode.run_episode`)
with the plan-following caller and the scenario's own mock backend, never edited into a trace, so
the backend's answers are the ones it really gives:

- ``no_tools``: the reference path with every tool call removed and its words kept (a turn says its
  ``before_tools`` then its ``speech``): claims without grounding. Not derived when the reference
  makes no tool call.
- ``wrong_argument``: the reference path with one key argument of one tool call changed to a wrong
  value. The call is the *latest*, in path order, that is not a call-ending tool, whose reference
  answer was the authored fixture (``outcome == "authored"``), and for which a changed value of an
  argument its fixture matches makes the backend answer with the mismatch or default response
  instead: usually the call that makes the call's outcome (a booking, a registration, a log), so
  the words after it describe a record the backend never made. The rest of the path is unchanged.
  Wrong values tried, in order: arguments with free values before those with an ``enum`` in the
  tool schema; for an enum,
  its other options; else a string with its last digit moved on by one (so that it still fits the
  tool's schema, which the backend checks first), then reversed, then with ``"0"`` appended, then
  ``"unknown"``; a
  number plus 1, then ``10 x + 7``; a boolean negated. Not derived when no argument change
  reaches the mismatch or default answer.
- ``cut_short``: the reference replayed with the caller-turn limit set to 1, so the call is cut
  after the candidate's first answer to the caller (turn 0 is the greeting; a trace cut there is
  the null floor's). Not derived when the reference path has at most two turns.

Which criteria each kind flips is declared in the bundle (``bundle.yaml`` ``contrast`` per
diagnostic, a criterion's own ``contrast`` entry winning): :func:`contrast_expectation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from callbench.bundle.models import (
    CONTRAST_KINDS,
    Bundle,
    ContrastKind,
    Criterion,
    LoadedAgent,
    ReferenceToolCall,
    ReferenceTurn,
    Scenario,
)
from callbench.models.base import ModelRequest
from callbench.models.scripted.models import ReferenceCandidate, create_scripted
from callbench.sim.episode import LoopLimits, run_episode
from callbench.trace import Trace

CONTRAST_SPEC_PREFIX = "scripted:reference/"
"""Candidate spec of a contrastive trace: this prefix and the kind (``scripted:reference/no_tools``)."""

__all__ = [
    "CONTRAST_KINDS",
    "CONTRAST_SPEC_PREFIX",
    "ContrastTrace",
    "contrast_expectation",
    "contrast_kind",
    "derive_contrast_traces",
]


def contrast_kind(spec: str) -> ContrastKind | None:
    """The contrastive kind of a trace's candidate spec, or None for any other trace."""
    kind = spec.removeprefix(CONTRAST_SPEC_PREFIX)
    if spec.startswith(CONTRAST_SPEC_PREFIX) and kind in CONTRAST_KINDS:
        return kind
    return None


def contrast_expectation(bundle: Bundle, criterion: Criterion, kind: ContrastKind) -> str | None:
    """The known label of ``criterion`` on a ``kind`` trace: the criterion's own ``contrast`` entry,
    else (unless its ``null_floor`` is ``met``: a criterion a do-nothing call meets, such as "never
    reads out the card number", keeps no default) ``bundle.yaml``'s ``contrast`` entry for its
    diagnostic; ``None`` (not scored) for ``any`` or no entry."""
    label = criterion.contrast.get(kind)
    if label is None and criterion.null_floor != "met":
        label = bundle.meta.contrast.get(kind, {}).get(criterion.diagnostic)
    return None if label in (None, "any") else label


@dataclass
class ContrastTrace:
    """One derived trace, or why it could not be derived (``trace`` None, ``note`` says why);
    ``note`` also names the changed argument of a ``wrong_argument`` trace."""

    kind: ContrastKind
    trace: Trace | None
    note: str = ""


class _PathCandidate(ReferenceCandidate):
    """``scripted:reference`` replaying a given path instead of the scenario's own."""

    def __init__(self, kind: ContrastKind, bundle: Bundle, scenario: Scenario, path: list[ReferenceTurn]):
        super().__init__(CONTRAST_SPEC_PREFIX + kind, None, bundle)
        self._scen = scenario.model_copy(update={"reference_path": path})

    def _scenario(self, request: ModelRequest) -> tuple[LoadedAgent, Scenario]:
        agent, _ = super()._scenario(request)
        return agent, self._scen


def _wrong_values(value: Any, schema: dict[str, Any]) -> list[Any]:
    options = schema.get("enum")
    if isinstance(options, list):
        return [o for o in options if o != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int | float):
        return [value + 1, value * 10 + 7]
    if isinstance(value, str):
        out = [_one_digit_changed(value), value[::-1], value + "0", "unknown"]
        return [v for v in dict.fromkeys(out) if v and v != value]
    return []


def _one_digit_changed(value: str) -> str:
    """``value`` with its last digit moved on by one (9 -> 0): a wrong value that still fits the
    usual patterns of ids, dates and digit strings, which the backend's schema check requires
    (a value outside the schema is rejected before the fixtures, so it never reaches a mismatch)."""
    for i in range(len(value) - 1, -1, -1):
        if value[i] in "0123456789":
            return value[:i] + str((int(value[i]) + 1) % 10) + value[i + 1:]
    return ""


def _without_tools(path: list[ReferenceTurn]) -> list[ReferenceTurn]:
    out = []
    for t in path:
        words = " ".join(x for x in (t.before_tools, t.speech) if x) if t.tool_calls else t.speech
        out.append(ReferenceTurn(speech=words or None))
    return out


def _with_argument(
    path: list[ReferenceTurn], turn: int, call: int, field: str, value: Any
) -> list[ReferenceTurn]:
    copy = [t.model_copy(deep=True) for t in path]
    old = copy[turn].tool_calls[call]
    copy[turn].tool_calls[call] = ReferenceToolCall(name=old.name, arguments={**old.arguments, field: value})
    return copy


async def derive_contrast_traces(
    bundle: Bundle,
    agent: LoadedAgent,
    scen: Scenario,
    reference: Trace,
    *,
    caller: str,
    run_seed: int,
) -> list[ContrastTrace]:
    """The contrastive traces of ``scen`` (module docstring), one entry per kind of
    :data:`~callbench.bundle.models.CONTRAST_KINDS`, derived from its reference path and its
    reference replay ``reference`` (used to find the tool calls answered from authored fixtures).
    ``caller`` and ``run_seed`` are the audit's. Raises ``ValueError`` when ``scen`` has no
    reference path."""
    path = scen.reference_path
    if not path:
        raise ValueError(f"scenario {scen.id!r} has no reference path to derive contrastive traces from")

    async def replay(kind: ContrastKind, p: list[ReferenceTurn], limits: LoopLimits | None = None) -> Trace:
        return await run_episode(
            agent,
            scen,
            candidate=_PathCandidate(kind, bundle, scen, p),
            caller=create_scripted(caller, None, bundle),
            bundle_name=bundle.meta.name,
            bundle_version=bundle.meta.version,
            bundle_hash=bundle.content_hash,
            episode_id=f"audit-{scen.id}-{kind}",
            run_seed=run_seed,
            repeat=0,
            limits=limits,
        )

    out: list[ContrastTrace] = []
    if any(t.tool_calls for t in path):
        out.append(ContrastTrace("no_tools", await replay("no_tools", _without_tools(path))))
    else:
        out.append(ContrastTrace("no_tools", None, "the reference makes no tool call"))
    out.append(await _wrong_argument(agent, path, reference, replay))
    if len(path) > 2:
        cut = await replay("cut_short", path, LoopLimits(max_caller_turns=1))
        out.append(ContrastTrace("cut_short", cut))
    else:
        out.append(ContrastTrace("cut_short", None, "the reference path has at most two turns"))
    return out


def _properties(agent: LoadedAgent, tool: str) -> dict[str, dict[str, Any]]:
    for t in agent.config.tools:
        if t.name == tool:
            props = t.parameters.get("properties", {})
            return {k: v for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {}
    return {}


async def _wrong_argument(
    agent: LoadedAgent, path: list[ReferenceTurn], reference: Trace, replay: Any
) -> ContrastTrace:
    """The argument change, latest call first, that turns an authored answer into a mismatch or
    default one (module docstring)."""
    calls = [(k, i, call) for k, turn in enumerate(path) for i, call in enumerate(turn.tool_calls)]
    ending = {t.tool for t in agent.config.call_ending_tools}
    # tool events are numbered in path order: the n-th reference call is tool event n
    for n, (k, i, call) in reversed(list(enumerate(calls, start=1))):
        ev = reference.tool_events[n - 1] if n <= len(reference.tool_events) else None
        if ev is None or ev.outcome != "authored" or ev.name != call.name or call.name in ending:
            continue
        props = _properties(agent, call.name)
        fields = [m.field for m in ev.matcher_results if m.field in call.arguments]
        fields.sort(key=lambda f: "enum" in props.get(f, {}))  # free values first, then enums
        for field in fields:
            for wrong in _wrong_values(call.arguments[field], props.get(field, {})):
                trace = await replay("wrong_argument", _with_argument(path, k, i, field, wrong))
                got = trace.tool_events[n - 1] if len(trace.tool_events) >= n else None
                if got is not None and got.name == call.name and got.outcome in ("mismatch", "default"):
                    was = call.arguments[field]
                    note = f"turn {k}: {call.name}.{field} = {wrong!r} (reference {was!r})"
                    return ContrastTrace("wrong_argument", trace, note)
    return ContrastTrace("wrong_argument", None, "no argument change reaches the mismatch or default answer")
