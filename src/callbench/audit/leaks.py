"""The audit's leak check (issue 12 item 1c): a scenario's hidden value written where the candidate
reads it.

The candidate sees the rendered operating document and the tool schemas (DESIGN.md "Who sees
what"), never the hidden state or the fixtures. A hidden value that *identifies* something (a
reference, an account, a code) written in that text hands the candidate the answer the scenario
tests for, as the issue measured: the bank prompt's pronunciation example ``DSP26031100418`` was a
scenario's hidden dispute reference, and a dairy tool's ``e.g. BMC-2417-02`` the hidden sub-centre
code that is the trap of the paper's example scenario.

Searched values: every leaf of ``hidden_state`` and of the fixtures (``${caller...}`` /
``${state...}`` references resolved, so a fixture matching the caller's own number counts), that
is identifying (:func:`identifying`), plus every value the author lists in the scenario's
``secrets`` (whatever its form). Searched text: the agent-level text every candidate reads in
every call of the agent, whatever the scenario: the instructions rendered with neutral values (the
template and the agent's default variables; the call's date and time stay placeholders) and each
tool as offered to the candidate (name, description, parameter schema: descriptions, examples,
defaults, enums, property names). A scenario's own ``variables`` are the call's context given to
the agent on purpose (the caller's shipment number on the agent's screen) and are not searched.
A value the tools declare as an ``enum`` member or ``const`` is the interface's own vocabulary, not
a leak, unless the author marks it secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from callbench.bundle.loader import Problem, render_instructions
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.references import ReferenceError_, resolve
from callbench.sim.episode import candidate_tools

_CLOCK = re.compile(r"[0-9]{1,2}:[0-9]{2}(\s*-\s*[0-9]{1,2}:[0-9]{2})?")
MIN_IDENTIFYING_CHARS = 5
"""A string of at least this many characters holding a digit, or an integer of at least this many
digits, identifies something (issue 12: "a string of five or more characters holding digits")."""


def identifying(v: Any) -> str | None:
    """The text of a value that identifies something (a reference, an account, a code), else None:
    a string of :data:`MIN_IDENTIFYING_CHARS`+ characters (stripped) holding a digit, or an integer
    of as many digits; a clock time or a range of clock times ("17:00", "16:00-16:55") is a
    schedule, not an identifier. Booleans, floats and None never identify."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return str(v) if len(str(abs(v))) >= MIN_IDENTIFYING_CHARS else None
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
    or ``secrets.N``), its text, and whether the author marked it secret."""

    path: str
    text: str
    secret: bool = False


def hidden_values(scen: Scenario) -> list[HiddenValue]:
    """The identifying hidden-state and fixture values of ``scen`` and its ``secrets``, each text
    once (the first path it was found at; secrets first). A fixture reference that does not resolve
    leaves the fixtures out (validate reports it)."""
    found: list[HiddenValue] = [HiddenValue(f"secrets.{i}", s, True) for i, s in enumerate(scen.secrets)]
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
        if s is not None and s not in seen:
            seen.add(s)
            found.append(HiddenValue(path, s))
    return found


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@dataclass(frozen=True)
class Leak:
    """One hidden value found in the candidate's text: ``where`` is ``tool`` (``path`` = the tool
    field, e.g. ``tools.2.parameters.properties.code.description``), ``prompt`` (``line`` = the
    template line) or ``variable`` (``path`` = ``variables.<name>`` of agent.yaml, or empty when
    the rendered text holds the value but neither the template nor a variable does)."""

    value: HiddenValue
    where: Literal["tool", "prompt", "variable"]
    path: str = ""
    line: int | None = None
    tool: str = ""


def leaks(agent: LoadedAgent, scen: Scenario) -> list[Leak]:
    """Every :class:`Leak` of ``scen``'s hidden values (:func:`hidden_values`) in ``agent``'s
    agent-level text (module docstring). Rendering errors are left to validate (``prompt.render``)."""
    try:
        rendered = render_instructions(agent)
    except ValueError:
        rendered = ""
    tools = [t.model_dump() for t in candidate_tools(agent.config)]
    vocab = set().union(set(), *(enum_values(t["parameters"]) for t in tools))
    out: list[Leak] = []
    for hv in hidden_values(scen):
        if not hv.secret and hv.text in vocab:
            continue
        for i, tool in enumerate(tools):
            out += [
                Leak(hv, "tool", path, tool=tool["name"])
                for path, text in _strings(tool, f"tools.{i}")
                if hv.text in text
            ]
        if hv.text not in rendered:
            continue
        if hv.text in agent.instructions_template:
            out.append(Leak(hv, "prompt", line=_line_of(agent.instructions_template, hv.text)))
            continue
        names = [k for k, v in agent.config.variables.items() if hv.text in v]
        out += [Leak(hv, "variable", f"variables.{k}") for k in names] or [Leak(hv, "variable")]
    return out


def find_leaks(agent: LoadedAgent, scen: Scenario, files: dict[str, str]) -> list[Problem]:
    """Located ``audit.leak`` problems for :func:`leaks`.

    ``files`` names the bundle-relative files: ``agent`` (agent.yaml), ``prompt`` (prompt.md) and
    ``scenario``. A value in a tool is located at the tool field of agent.yaml; one in the
    instructions at prompt.md (``line N`` in the message), or at the agent variable that put it
    there (``agent.yaml: variables.x``). The message names the scenario file and the hidden value's
    field path.
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
            out.append(
                Problem(
                    file=files["prompt"],
                    code="audit.leak",
                    message=f"line {lk.line}: the {what} is written in the operating "
                    "instructions the candidate reads",
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
    return out
