"""Persona text carries no facts: the audit of a persona library against the scenarios it meets.

A persona changes how the caller talks, never what the caller knows (docs/personas.md). Its
wording is what the caller model reads besides the brief, so it must not hand the caller a fact:

- ``persona.digit``: a wording holds a digit (of any script: a number is a fact, whatever it is);
- ``persona.fact``: a wording holds a value of a scenario it is paired with: a secret value
  (hidden state, fixture responses: :func:`~callbench.bundle.validate.isolation.secret_values`)
  or one of the caller's known facts (names, account numbers), searched in the same normalised
  forms as the caller-isolation audit (:class:`~callbench.bundle.normalize.TextSet`);
- ``persona.language``: a persona has no wording for the language of a scenario it is paired
  with (the caller would get no manner, or one in the wrong language).

Every problem is located: ``personas.<index>.wording.<tag>`` of the library file.
"""

from __future__ import annotations

from collections.abc import Sequence

from callbench.bundle.loader import Problem
from callbench.bundle.models import Scenario
from callbench.bundle.normalize import TextSet
from callbench.bundle.personas import PersonaLibrary
from callbench.bundle.validate.isolation import _leaves, _number_text, secret_values

KNOWN_FACT_MIN_CHARS = 4
"""A known fact's text is searched when it has at least this many letters and digits (the
isolation audit's minimum for strings: shorter values match ordinary words)."""


def _scenario_values(scen: Scenario) -> list[tuple[str, str, int]]:
    """(path, text, minimum letters and digits) of every value of ``scen`` a persona must not hold."""
    out = list(secret_values(scen))
    for path, v in _leaves(scen.brief.known_facts, "brief.known_facts"):
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int | float):
            out.append((path, _number_text(v), 3))
        elif isinstance(v, str) and v.strip():
            out.append((path, v.strip(), KNOWN_FACT_MIN_CHARS))
    return out


def audit_personas(library: PersonaLibrary, scenarios: Sequence[tuple[str, Scenario]],
                   file: str = "personas.yaml") -> list[Problem]:
    """Every fact a persona wording holds and every language it lacks, for the ``(agent id,
    scenario)`` pairs it will be swept across (module docstring for the codes). The digit check
    covers every wording, paired or not. An empty list means the library is fit for the run."""
    problems: list[Problem] = []
    for i, persona in enumerate(library.personas):
        tags = sorted(persona.wording)
        for tag in tags:
            text = persona.wording[tag]
            digit = next((c for c in text if c.isdigit()), None)
            if digit is not None:
                problems.append(Problem(
                    file=file, path=f"personas.{i}.wording.{tag}", code="persona.digit",
                    message=f"persona {persona.id!r} holds the digit {digit!r}: a persona says how a "
                    "caller talks, never a number (write 'a few digits at a time', not '3 digits')"))
        seen_missing: set[str] = set()
        reported: set[tuple[str, str]] = set()
        for agent_id, scen in scenarios:
            wording = persona.wording_for(scen.language)
            if wording is None:
                if scen.language not in seen_missing:
                    seen_missing.add(scen.language)
                    problems.append(Problem(
                        file=file, path=f"personas.{i}.wording", code="persona.language",
                        message=f"persona {persona.id!r} has no wording for {scen.language} "
                        f"(scenario {agent_id}/{scen.id}); add wording.{scen.language.split('-')[0]}"))
                continue
            text = wording
            found = TextSet([text])
            for path, value, min_chars in _scenario_values(scen):
                tag = next(t for t in tags if persona.wording[t] == text)
                if (tag, value) not in reported and found.holding(value, min_chars):
                    reported.add((tag, value))
                    short = value if len(value) <= 60 else value[:57] + "..."
                    problems.append(Problem(
                        file=file, path=f"personas.{i}.wording.{tag}", code="persona.fact",
                        message=f"persona {persona.id!r} holds {short!r}, the value of {path} in scenario "
                        f"{agent_id}/{scen.id}: a persona must carry no facts of a scenario"))
    return problems
