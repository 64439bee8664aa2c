"""Run planning: which episodes a run contains, in a stable order, with stable ids.

A run is candidates x scenarios x repeats (DESIGN.md vocabulary). Scenarios come from the bundle's
active agents in (agent id, scenario id) order; filters narrow them; ``limit`` keeps the first N
scenarios of that order (before candidates and repeats multiply them).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re

from pydantic import BaseModel, Field

from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.personas import PersonaLibrary
from callbench.bundle.validate.personas import audit_personas
from callbench.models.base import OPERATIONAL_SETTINGS, ModelSettings, identity_settings
from callbench.runfolder.manifest import EpisodeKey


class ScenarioFilters(BaseModel):
    """Scenario selection. Empty lists select everything; ``limit`` keeps the first N."""

    agents: list[str] = Field(default_factory=list)
    scenarios: list[str] = Field(default_factory=list)
    languages: list[str] = Field(default_factory=list)
    difficulty: list[str] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1)


def candidate_slug(spec: str, settings: ModelSettings) -> str:
    """A file-name-safe, stable id for a candidate: readable spec plus 8 hex of SHA-256(spec, settings).

    Two candidates with the same spec but different settings get different slugs; settings that
    do not change what the model says (headers, retries: ``OPERATIONAL_SETTINGS``) do not
    count.
    """
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_")[:40] or "model"
    kept = identity_settings(settings, OPERATIONAL_SETTINGS)
    payload = json.dumps([spec, kept], sort_keys=True)
    return f"{readable}-{hashlib.sha256(payload.encode()).hexdigest()[:8]}"


KNOWN_LISTED = 12
"""Up to this many known values are listed in a filter error; beyond it, the closest ones."""


LISTING = {
    "scenarios": "callbench inspect {root} --scenarios lists them",
    "agents": "callbench inspect {root} lists them (table Agents)",
    "languages": "callbench inspect {root} lists them (table Scenarios by language and difficulty)",
    "difficulty": "callbench inspect {root} lists them (table Scenarios by language and difficulty)",
}
"""The command that lists every value a filter can take, by filter."""


def _known_hint(name: str, unknown: list[str], known: set[str], root: str = "BUNDLE") -> str:
    """``known: a, b, c`` when there are at most :data:`KNOWN_LISTED` known values, else the
    closest known values to each unknown one (``difflib.get_close_matches``) and the command that
    lists them all (:data:`LISTING`)."""
    if len(known) <= KNOWN_LISTED:
        return f"known: {', '.join(sorted(known))}"
    close = sorted({m for u in unknown for m in difflib.get_close_matches(u, sorted(known), n=3, cutoff=0.5)})
    where = LISTING[name].format(root=root)
    if close:
        return f"did you mean {', '.join(close)}? {len(known)} {name} in all; {where}"
    return f"{len(known)} {name} in all; {where}"


def select_scenarios(bundle: Bundle, filters: ScenarioFilters) -> list[tuple[LoadedAgent, Scenario]]:
    """Active agents' scenarios matching every filter, in (agent id, scenario id) order.

    Raises ``ValueError`` naming any filter value that selects nothing (a typo should not silently
    run an empty benchmark).
    """
    pairs = [(a, s) for a, s in bundle.scenarios() if a.config.active]
    known: dict[str, set[str]] = {
        "agents": {a.config.id for a, _ in pairs},
        "scenarios": {s.id for _, s in pairs},
        "languages": {s.language for _, s in pairs},
        "difficulty": {s.difficulty for _, s in pairs},
    }
    for name, values in (
        ("agents", filters.agents),
        ("scenarios", filters.scenarios),
        ("languages", filters.languages),
        ("difficulty", filters.difficulty),
    ):
        unknown = sorted(set(values) - known[name])
        if unknown:
            hint = _known_hint(name, unknown, known[name], str(bundle.root) if bundle.root else "BUNDLE")
            raise ValueError(f"--{name} {', '.join(unknown)}: not in the bundle ({hint})")
    out = [
        (a, s)
        for a, s in pairs
        if (not filters.agents or a.config.id in filters.agents)
        and (not filters.scenarios or s.id in filters.scenarios)
        and (not filters.languages or s.language in filters.languages)
        and (not filters.difficulty or s.difficulty in filters.difficulty)
    ]
    if filters.limit is not None:
        out = out[: filters.limit]
    if not out:
        raise ValueError("the filters select no scenario")
    return out


def plan_episodes(
    bundle: Bundle,
    candidates: list[tuple[str, ModelSettings]],
    repeats: int,
    filters: ScenarioFilters,
    personas: list[str] | None = None,
) -> list[EpisodeKey]:
    """Every episode of the run: for each candidate, each selected scenario, (each persona of a
    persona sweep,) repeats 0..N-1.

    Episode id: ``<candidate slug>--<scenario id>--r<repeat>``, or in a persona sweep
    ``<candidate slug>--<scenario id>--<persona id>--r<repeat>`` (unique, file-name safe: a persona
    id holds no ``--``). A plan without personas is exactly the plan it always was.
    Raises ``ValueError`` for repeats < 1, no candidates, duplicate candidates or personas, or an
    empty persona list.
    """
    if repeats < 1:
        raise ValueError("--repeats must be at least 1")
    if not candidates:
        raise ValueError("at least one --candidate is needed")
    slugs = [candidate_slug(spec, st) for spec, st in candidates]
    if len(set(slugs)) != len(slugs):
        raise ValueError("the same candidate (spec and settings) is listed twice")
    if personas is not None and not personas:
        raise ValueError("a persona sweep needs at least one persona")
    if personas is not None and len(set(personas)) != len(personas):
        raise ValueError("the same persona is listed twice")
    chosen = select_scenarios(bundle, filters)
    return [
        EpisodeKey(
            episode_id=f"{slug}--{s.id}--{p}--r{r}" if p is not None else f"{slug}--{s.id}--r{r}",
            candidate=slug,
            agent_id=a.config.id,
            scenario_id=s.id,
            repeat=r,
            persona=p,
        )
        for slug in slugs
        for a, s in chosen
        for p in (personas if personas is not None else [None])
        for r in range(repeats)
    ]


def sweep_personas(bundle: Bundle, filters: ScenarioFilters, library: PersonaLibrary | None,
                   file: str = "") -> list[str] | None:
    """The persona ids a run sweeps (None without a library), after checking the library against
    the scenarios the filters select (:func:`~callbench.bundle.validate.personas.audit_personas`:
    no digit, no scenario value, a wording for every selected language). Raises ``ValueError``
    listing every problem, each with its file and field path."""
    if library is None:
        return None
    pairs = [(a.config.id, s) for a, s in select_scenarios(bundle, filters)]
    problems = audit_personas(library, pairs, file or "personas.yaml")
    if problems:
        shown = "\n".join(f"  {p}" for p in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ValueError(f"the persona library is not fit for this run ({len(problems)} problem(s)):\n"
                         f"{shown}{more}")
    return library.ids
