"""The audit's leak check: a scenario's hidden value written
where the candidate reads it, in any normalised form.

The candidate sees the rendered operating document and the tool schemas (DESIGN.md "Who sees
what"), never the hidden state or the fixtures. A hidden value that *identifies* something (a
reference, an account, a code, an amount) written in that text hands the candidate the answer the
scenario tests for, as measured on the starter: the bank prompt's pronunciation example
``DSP26031100418`` was a scenario's hidden dispute reference, and a dairy tool's ``e.g.
BMC-2417-02`` the hidden sub-centre code that is the trap of the paper's example scenario.

Searched values: every leaf of ``hidden_state`` and of the fixtures (``${caller...}`` /
``${state...}`` references resolved, so a fixture matching the caller's own number counts), that
is identifying (:func:`identifying`), plus every value the author lists in the scenario's
``secrets`` (whatever its form).

Searched text, and where each value is looked for:

- the agent-level text every candidate reads in every call of the agent, whatever the scenario:
  the instructions rendered with neutral values (the template and the agent's default variables;
  the call's date and time stay placeholders) and each tool as offered to the candidate (name,
  description, parameter schema: descriptions, examples, defaults, enums, property names). Every
  searched value is looked for here.
- the scenario's own ``variables``, which the prompt is rendered with in this scenario's calls.
  Looked for here: the values the candidate must learn from a tool call, that is every searched
  value except those the caller's brief holds (the caller can say those; a caller's number shown on
  the agent's screen is call context given on purpose), and every secret.

A value is found in a text in any normalised form (:mod:`callbench.audit.normal`): case, spacing
and separators (``sb3309418826``, ``SB 3309 418826``), digits of any script, and the numeric forms
of an amount (``18450`` / ``18,450.00``).

An ``enum`` member or ``const`` of a tool schema is the interface's own vocabulary: a hidden value
found *there* is not a leak, but a scenario that hides a public enum option hides nothing, which
is itself a problem (``audit.hidden_enum``); the same value written anywhere else (the prompt, a
description) is a leak. A secret is a leak in an enum too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from callbench.audit.forms import amount_in_words, skeleton_fold, spelled_digits, written_amounts
from callbench.audit.normal import amount_of, fold, significant_digits
from callbench.bundle.fixtures import ResolvedFixtures
from callbench.bundle.loader import Problem
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.references import ReferenceError_, resolve
from callbench.bundle.render import render_instructions
from callbench.sim.episode import candidate_tools

_CLOCK = re.compile(r"[0-9]{1,2}:[0-9]{2}(\s*-\s*[0-9]{1,2}:[0-9]{2})?")
MIN_IDENTIFYING_CHARS = 5
"""A string of at least this many characters holding a digit, or a number written with at least this
many digits, identifies something ("a string of five or more characters holding
digits")."""


def identifying(v: Any) -> str | None:
    """The text of a value that identifies something (a reference, an account, a code, an amount),
    else None: a string of :data:`MIN_IDENTIFYING_CHARS`+ characters (stripped) holding a digit
    (of any script), or an int or float written with as many digits at the least
    (:func:`~callbench.audit.normal.significant_digits`: ``18450.75`` and ``12343`` identify,
    ``2340`` and ``1500.00`` do not); a clock time or a range of clock times ("17:00",
    "16:00-16:55") is a schedule, not an identifier. Booleans and None never identify."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        a = amount_of(v)
        return str(v) if a is not None and significant_digits(a) >= MIN_IDENTIFYING_CHARS else None
    if isinstance(v, str):
        s = v.strip()
        if len(s) >= MIN_IDENTIFYING_CHARS and any(c.isdigit() for c in s) and not _CLOCK.fullmatch(s):
            return s
    return None


def leaves(v: Any, where: str) -> list[tuple[str, Any]]:
    """(dotted path, value) of every scalar inside ``v`` (objects and lists walked in order)."""
    if isinstance(v, dict):
        return [x for k, y in v.items() for x in leaves(y, f"{where}.{k}")]
    if isinstance(v, list):
        return [x for i, y in enumerate(v) for x in leaves(y, f"{where}.{i}")]
    return [(where, v)]


def _strings(v: Any, where: str) -> Iterator[tuple[str, str]]:
    """(dotted path, text) of every string inside ``v``, object keys included (a property name is
    text the candidate reads too)."""
    if isinstance(v, dict):
        for k, y in v.items():
            yield f"{where}.{k}", str(k)
            yield from _strings(y, f"{where}.{k}")
    elif isinstance(v, list):
        for i, y in enumerate(v):
            yield from _strings(y, f"{where}.{i}")
    elif v is not None and not isinstance(v, bool):
        yield where, str(v)


_VOCAB_PATH = re.compile(r"\.(enum\.[0-9]+|const)$")


def enum_values(schema: Any) -> set[str]:
    """Every ``enum`` member and ``const`` of a JSON Schema (as text): the interface's vocabulary."""
    out: set[str] = set()
    if isinstance(schema, dict):
        for k, v in schema.items():
            if k == "enum" and isinstance(v, list):
                out |= {str(x) for x in v}
            elif k == "const":
                out.add(str(v))
            else:
                out |= enum_values(v)
    elif isinstance(schema, list):
        for v in schema:
            out |= enum_values(v)
    return out


@dataclass(frozen=True)
class HiddenValue:
    """One searched value: its scenario field path (``hidden_state.x``, ``fixtures.tool.queue.0...``
    or ``secrets.N``), its text, whether the author marked it secret, ``learned``: the candidate must
    learn it from a tool call (module docstring), and ``amount``: the value is a number (an int or a
    float in the scenario file), not a string."""

    path: str
    text: str
    secret: bool = False
    learned: bool = True
    amount: bool = False

    def found_in(self, text: str) -> bool:
        """True when ``text`` holds this value in a normalised form (module docstring): the same
        amount written as a number standing alone (in figures, across a soft line break, with a
        scale word, with spelled digits, or in words), or (for a string) its folded form inside the
        folded text, the text with spelled digits read, or the confusable skeleton of the text. A
        number is found only as the same amount (``4,821.35`` does not hold ``48213.5``)."""
        a = self._amount
        if a is not None and not self.secret and (a in written_amounts(text) or amount_in_words(a, text)):
            return True
        if self.amount or not self._needle:
            return False
        # digits in words are read only for a value with as many digits as a number needs to
        # identify (MIN_IDENTIFYING_CHARS): shorter ones are prose ("three tier", "five to seven days")
        spelled = sum(c.isdigit() for c in self._needle) >= MIN_IDENTIFYING_CHARS
        return (
            self._needle in fold(text)
            or (spelled and self._needle in fold(spelled_digits(text)))
            or self._skeleton in skeleton_fold(text)
        )

    @functools.cached_property
    def _amount(self) -> Decimal | None:
        return amount_of(self.text)

    @functools.cached_property
    def _needle(self) -> str:
        return fold(self.text)

    @functools.cached_property
    def _skeleton(self) -> str:
        return skeleton_fold(self.text)

    @property
    def agent_level(self) -> bool:
        """Searched in the agent-level text: a secret, a value to learn from a tool call, or a
        caller's identifier (a string the brief holds: the caller's record number written in every
        call lets the candidate skip asking for it). A number the caller states (an amount) is not."""
        return self.secret or self.learned or not self.amount


_MATCHER_WORDS = {"eq", "one_of", "contains", "subset", "all", "any"}
_NOT_VALUES = {"range", "regex", "present", "not"}
"""Matcher parts that are no value the scenario holds: bounds, patterns, presence, negations."""


def _field(path: str) -> str:
    """The field a leaf belongs to: the last path segment that is neither an index nor a matcher."""
    parts = [p for p in path.split(".") if not p.isdigit() and p not in _MATCHER_WORDS]
    return parts[-1] if parts else ""


def _vocabulary(tools: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Parameter name -> the enum members and consts it takes, over every tool (nested too)."""
    out: dict[str, set[str]] = {}

    def walk(schema: Any) -> None:
        if isinstance(schema, dict):
            for name, sub in (schema.get("properties") or {}).items():
                if isinstance(sub, dict):
                    own = {k: v for k, v in sub.items() if k in ("enum", "const", "items")}
                    out.setdefault(name, set()).update(enum_values(own))
            for v in schema.values():
                walk(v)
        elif isinstance(schema, list):
            for v in schema:
                walk(v)

    for t in tools:
        walk(t.get("parameters"))
    return out


def _reference_inputs(agent: LoadedAgent, scen: Scenario) -> set[str]:
    """Folded values the reference path sends as arguments before any earlier result holds them:
    inputs the call needs (from the caller or the call context), not answers it learns."""
    if not scen.reference_path:
        return set()
    try:
        fx = ResolvedFixtures(agent.config, scen)
    except (ReferenceError_, ValueError, KeyError):
        return set()
    returned, inputs, counts = "", set(), {}  # type: ignore[var-annotated]
    for turn in scen.reference_path:
        for call in turn.tool_calls:
            for _, v in leaves(call.arguments, ""):
                f = fold(str(v)) if v is not None and not isinstance(v, bool) else ""
                if f and f not in returned:
                    inputs.add(f)
            j = counts.get(call.name, 0)
            counts[call.name] = j + 1
            result = fx.answer(call.name, call.arguments, j).result
            returned += "\x00" + "\x00".join(fold(str(v)) for _, v in leaves(result, ""))
    return inputs


def _brief_texts(scen: Scenario) -> list[str]:
    """The caller's brief as texts: context, reason, persona, each known fact (name and value) and
    each plan step (trigger and meaning)."""
    b = scen.brief
    facts = [f"{p.rsplit('.', 1)[-1]} {v}" for p, v in leaves(b.known_facts, "")]
    return [b.context, b.reason, b.persona or "", *facts, *(f"{p.trigger} {p.meaning}" for p in b.plan)]


def hidden_values(scen: Scenario, agent: LoadedAgent | None = None) -> list[HiddenValue]:
    """The identifying hidden-state and fixture values of ``scen`` and its ``secrets``, each text
    once (the first path it was found at; secrets first). Left out: matcher bounds, patterns and
    negations (``range``, ``regex``, ``present``, ``not``), and, given the ``agent``, a value of a
    field whose tool parameter of the same name lists it in its ``enum`` (the interface's own
    vocabulary, e.g. a transfer destination ``medical_desk_108``). ``learned`` is False for a value
    the caller's brief holds or (given the agent) that the reference path sends as an argument
    before any result holds it. A fixture reference that does not resolve leaves the fixtures out
    (validate reports it)."""
    brief = _brief_texts(scen)
    tools = _tools(agent) if agent is not None else []
    vocab = _vocabulary(tools)
    inputs = _reference_inputs(agent, scen) if agent is not None else set()

    def learned(text: str) -> bool:
        probe = HiddenValue("", text)
        return fold(text) not in inputs and not any(probe.found_in(t) for t in brief)

    found: list[HiddenValue] = [
        HiddenValue(f"secrets.{i}", s, True, learned(s)) for i, s in enumerate(scen.secrets)
    ]
    values = leaves(scen.hidden_state, "hidden_state")
    try:
        fixtures = resolve(
            scen.model_dump(mode="json")["fixtures"], scen.brief.known_facts, scen.hidden_state
        )
        values += leaves(fixtures, "fixtures")
    except (ReferenceError_, ValueError, KeyError):
        pass
    seen = {v.text for v in found}
    for path, v in values:
        s = identifying(v)
        if s is None or s in seen or _NOT_VALUES & set(path.split(".")):
            continue
        if s in vocab.get(_field(path), set()):
            continue
        seen.add(s)
        found.append(HiddenValue(path, s, False, learned(s), isinstance(v, (int, float))))
    return found


def _line_of(text: str, hv: HiddenValue) -> int | None:
    """The first line of ``text`` that holds ``hv``, else the first of two lines that hold it
    together (a value broken by a soft line break), else None."""
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if hv.found_in(line):
            return n
    for n in range(1, len(lines)):
        if hv.found_in("\n".join(lines[n - 1 : n + 1])):
            return n
    return None


@dataclass(frozen=True)
class Leak:
    """One hidden value found in the candidate's text: ``where`` is ``tool`` (``path`` = the tool
    field, e.g. ``tools.2.parameters.properties.code.description``), ``prompt`` (``line`` = the
    template line, None when the value spans lines), ``variable`` (``path`` = ``variables.<name>``
    of agent.yaml, or empty when the rendered text holds the value but neither the template nor a
    variable does) or ``scenario`` (``path`` = ``variables.<name>`` of the scenario file)."""

    value: HiddenValue
    where: Literal["tool", "prompt", "variable", "scenario"]
    path: str = ""
    line: int | None = None
    tool: str = ""


def _tools(agent: LoadedAgent) -> list[dict[str, Any]]:
    return [t.model_dump() for t in candidate_tools(agent.config)]


def hidden_enum_options(agent: LoadedAgent, scen: Scenario) -> list[tuple[HiddenValue, str, str]]:
    """(hidden value, tool name, schema path) of each searched value of ``scen`` (not a secret) that
    is an ``enum`` member or ``const`` of one of ``agent``'s tools: a public option, hidden."""
    out = []
    tools = _tools(agent)
    options = [
        [(p, fold(text)) for p, text in _strings(tool, f"tools.{i}") if _VOCAB_PATH.search(p)]
        for i, tool in enumerate(tools)
    ]
    for hv in hidden_values(scen, agent):
        if hv.secret:
            continue
        for tool, opts in zip(tools, options, strict=True):
            hits = [p for p, f in opts if f == fold(hv.text)]
            out += [(hv, tool["name"], p) for p in hits[:1]]
    return out


def leaks(agent: LoadedAgent, scen: Scenario) -> list[Leak]:
    """Every :class:`Leak` of ``scen``'s hidden values (:func:`hidden_values`) in the text the
    candidate reads (module docstring). Rendering errors are left to validate (``prompt.render``)."""
    try:
        rendered = render_instructions(agent)
    except ValueError:
        rendered = ""
    tools = _tools(agent)
    strings = [(tool["name"], list(_strings(tool, f"tools.{i}"))) for i, tool in enumerate(tools)]
    out: list[Leak] = []
    for hv in hidden_values(scen, agent):
        if hv.learned or hv.secret:
            out += [
                Leak(hv, "scenario", f"variables.{k}") for k, v in scen.variables.items() if hv.found_in(v)
            ]
        if not hv.agent_level:
            continue
        for name, texts in strings:
            out += [
                Leak(hv, "tool", path, tool=name)
                for path, text in texts
                if hv.found_in(text) and (hv.secret or not _VOCAB_PATH.search(path))
            ]
        if not hv.found_in(rendered):
            continue
        if hv.found_in(agent.instructions_template):
            out.append(Leak(hv, "prompt", line=_line_of(agent.instructions_template, hv)))
            continue
        names = [k for k, v in agent.config.variables.items() if hv.found_in(v)]
        out += [Leak(hv, "variable", f"variables.{k}") for k in names] or [Leak(hv, "variable")]
    return out


def find_leaks(agent: LoadedAgent, scen: Scenario, files: dict[str, str]) -> list[Problem]:
    """Located ``audit.leak`` and ``audit.hidden_enum`` problems for :func:`leaks` and
    :func:`hidden_enum_options`.

    ``files`` names the bundle-relative files: ``agent`` (agent.yaml), ``prompt`` (prompt.md) and
    ``scenario``. A value in a tool is located at the tool field of agent.yaml; one in the
    instructions at prompt.md (``line N`` in the message), or at the agent variable that put it
    there (``agent.yaml: variables.x``); one in a scenario variable at the scenario file
    (``variables.x``). The message names the scenario file and the hidden value's field path. A
    hidden enum option is located at the scenario file and the hidden value's path.
    """
    out: list[Problem] = []
    for lk in leaks(agent, scen):
        hv = lk.value
        what = f"{'secret' if hv.secret else 'hidden'} value {hv.text!r} ({files['scenario']}: {hv.path})"
        if lk.where == "tool":
            out.append(
                Problem(
                    file=files["agent"],
                    path=lk.path,
                    code="audit.leak",
                    message=f"the {what} is written in tool {lk.tool!r}, which every "
                    "candidate reads in every call",
                )
            )
        elif lk.where == "prompt":
            at = f"line {lk.line}: " if lk.line is not None else ""
            out.append(
                Problem(
                    file=files["prompt"],
                    code="audit.leak",
                    message=f"{at}the {what} is written in the operating instructions the candidate reads",
                )
            )
        elif lk.where == "scenario":
            out.append(
                Problem(
                    file=files["scenario"],
                    path=lk.path,
                    code="audit.leak",
                    message=f"the {what} reaches the prompt rendered for this scenario through its "
                    f"variable {lk.path.removeprefix('variables.')!r}; the candidate must learn it from "
                    "a tool call",
                )
            )
        else:
            name = lk.path.removeprefix("variables.")
            out.append(
                Problem(
                    file=files["agent"] if name else files["prompt"],
                    path=lk.path,
                    code="audit.leak",
                    message=f"the {what} reaches the rendered operating instructions"
                    + (f" through variable {name!r}" if name else ""),
                )
            )
    for hv, tool, path in hidden_enum_options(agent, scen):
        out.append(
            Problem(
                file=files["scenario"],
                path=hv.path,
                code="audit.hidden_enum",
                message=f"the hidden value {hv.text!r} is an option of tool {tool!r} ({path}), which every "
                "candidate reads: a scenario cannot hide a public enum option",
            )
        )
    return out
