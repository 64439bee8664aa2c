"""Persona libraries: caller manners swept across scenarios as a factor of a run.

A persona is *how* a caller talks, never *what* they know: patience, verbosity, how they give
numbers, hesitations, self-corrections, mood, speaking pace, interruption habit and language
register. Its ``wording`` (per language) is the only persona text the caller model reads; the
typed ``traits`` label the persona for reports and for tools that act on a trait (the speaking
pace is meant for the voice channel). A persona carries no fact: its wording may hold no digit
and no value of a scenario (:mod:`callbench.bundle.validate.personas` checks it against the
scenarios a run selects).

File shape (YAML, safe load only; or JSON)::

    version: 1
    personas:
      - id: hurried-terse          # [a-z0-9][a-z0-9_]*(-[a-z0-9_]+)* , at most 40 characters
        label: Hurried and terse   # shown in reports, never to the caller
        traits: {patience: low, verbosity: terse, numbers: grouped, hesitation: none,
                 self_correction: never, mood: irritated, pace: fast, interruption: often,
                 register: casual}
        wording:                   # language tag (en, hi, ta-IN, ...) -> what the caller reads
          en: You are in a hurry ...

Every bad field is reported with its file and dotted path (:class:`~callbench.bundle.loader.Problem`),
all at once, by :func:`load_personas` raising :class:`~callbench.bundle.loader.BundleError`.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from callbench.bundle.loader import BundleError, Problem, pydantic_problems, read_data_file

PERSONA_ID = re.compile(r"[a-z0-9][a-z0-9_]*(-[a-z0-9_]+)*")
"""A persona id: lower-case letters, digits, ``_`` and single ``-`` (never ``--``, the separator of
episode ids), at most 40 characters."""

LANGUAGE_TAG = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*")
"""A wording key: a BCP 47 tag (``en``, ``hi``, ``ta-IN``), its primary subtag lower-case."""

MAX_WORDING_CHARS = 1500

Level = Literal["low", "medium", "high"]


class PersonaTraits(BaseModel):
    """The typed traits of a persona (labels for reports and trait-aware channels; the caller reads
    the persona's wording, not these)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    patience: Level
    verbosity: Literal["terse", "normal", "chatty"]
    numbers: Literal["digit_by_digit", "grouped", "in_words", "in_pieces"] = Field(
        description="How the caller gives a number: one digit at a time, in groups of a few digits, "
        "as number words, or a part at a time with pauses.")
    hesitation: Literal["none", "some", "frequent"]
    self_correction: Literal["never", "sometimes", "often"]
    mood: Literal["calm", "cheerful", "anxious", "irritated", "tired"]
    pace: Literal["slow", "normal", "fast"] = Field(
        description="Speaking pace, for the voice channel (the wording asks the caller for it; the "
        "synthesiser's rate does not yet follow it).")
    interruption: Literal["never", "sometimes", "often"]
    language_register: Literal["formal", "neutral", "casual"] = Field(
        alias="register", description="Language register (``register`` in the file).")


class Persona(BaseModel):
    """One persona: ``id`` (see :data:`PERSONA_ID`), a ``label`` for reports, ``traits`` and
    ``wording`` (language tag -> text the caller model reads, 1..1500 characters)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=40)
    label: str = Field(default="", max_length=80)
    traits: PersonaTraits
    wording: dict[str, str] = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not PERSONA_ID.fullmatch(v):
            raise ValueError("a persona id is lower-case letters, digits, '_' and single '-' "
                             "(for example hurried-terse)")
        return v

    @field_validator("wording")
    @classmethod
    def _wording(cls, v: dict[str, str]) -> dict[str, str]:
        for tag, text in v.items():
            if not LANGUAGE_TAG.fullmatch(tag):
                raise ValueError(f"wording key {tag!r} is not a language tag such as en, hi or ta-IN")
            if not text.strip():
                raise ValueError(f"wording.{tag} is empty")
            if len(text) > MAX_WORDING_CHARS:
                raise ValueError(f"wording.{tag} has {len(text)} characters, over {MAX_WORDING_CHARS}")
        return {k: unicodedata.normalize("NFC", t.strip()) for k, t in v.items()}

    def wording_for(self, language: str) -> str | None:
        """The wording for ``language`` (a scenario's BCP 47 tag): the exact tag (case-insensitive)
        first, then its primary subtag (``gu-IN`` -> ``gu``); None when neither is written."""
        by_tag = {k.lower(): t for k, t in self.wording.items()}
        return by_tag.get(language.lower()) or by_tag.get(language.split("-")[0].lower())


class PersonaLibrary(BaseModel):
    """A persona library file: ``version`` 1 and a non-empty list of personas with unique ids."""

    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    personas: list[Persona] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> PersonaLibrary:
        seen: set[str] = set()
        for p in self.personas:
            if p.id in seen:
                raise ValueError(f"persona id {p.id!r} is listed twice")
            seen.add(p.id)
        return self

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.personas]

    def get(self, persona_id: str) -> Persona:
        """The persona ``persona_id``; raises ``KeyError`` naming the known ids."""
        for p in self.personas:
            if p.id == persona_id:
                return p
        raise KeyError(f"persona {persona_id!r} is not in the library (known: {', '.join(self.ids)})")

    def content_hash(self) -> str:
        """SHA-256 (hex) of the library's canonical JSON: a run records it, and a resume with a
        changed library is refused as a different run."""
        data = self.model_dump(mode="json")
        return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False,
                                         separators=(",", ":")).encode()).hexdigest()


def load_personas(path: str | Path) -> PersonaLibrary:
    """Read and validate a persona library file (YAML or JSON, safe load).

    Raises :class:`~callbench.bundle.loader.BundleError` listing every problem with the file name
    and the dotted path of the bad field (codes ``read``, ``parse``, ``empty``, ``size.*`` from the
    reader; ``schema`` for a bad field; ``personas.file`` for a missing file)."""
    p = Path(path)
    if not p.is_file():
        raise BundleError([Problem(file=str(p), code="personas.file",
                                   message="no such file (a persona library is one YAML or JSON file)")])
    problems: list[Problem] = []
    data = read_data_file(p.parent, p, problems)
    if problems:
        raise BundleError(problems)
    try:
        return PersonaLibrary.model_validate(data)
    except ValidationError as e:
        raise BundleError(pydantic_problems(p.name, e)) from None
