"""The generation manifest, ``generation.yaml`` at the bundle root.

It lives beside ``provenance.yaml`` (docs/decisions.md, "Generation manifest"): provenance keeps,
for every scenario, how it was made, the SHA-256 of its file and its review status; the generation
manifest keeps what only generation knows::

    batches:
      g-3f9c0a1b2c4d:                 # id: SHA-256 of the batch parameters (see generator.batch_id)
        agent, model, provider, settings, seed, n, languages, difficulty, max_attempts,
        document_sha256,              # the rendered operating document sent
        tools_sha256,                 # tool schemas and call-ending success conditions sent
        rules_sha256,                 # the generator's system prompt (generate/rules.py)
        plan: [...], written: [ids], failed: [{item, reason, attempts, last_problems}],
        usage: {input_tokens, output_tokens, cost_usd},
        written_languages, written_difficulty   # the mix actually written (above: as planned)
    scenarios:
      water_no_supply_tanker:
        batch, item, file,
        planned: {language, difficulty, channel: [kinds]},   # what the plan item asked
        written: {language, difficulty, channel: [kinds]},   # what the file is (equal: enforced)
        prompt_sha256 (the first request's messages), output_sha256 (the file
        as written), attempts, audit: [{attempt, request_sha256, output_sha256, problems, usage}],
        review: {status: unreviewed | accepted | rejected, by, at}

No wall-clock time is recorded for a generation, so a replay with the same seed, model and cache
writes the same bytes; a review adds its reviewer and time. The file is not part of the bundle's
content hash (as provenance). Writes are atomic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callbench.trace import atomic_write_text

MANIFEST_NAME = "generation.yaml"
ReviewDecision = Literal["unreviewed", "accepted", "rejected"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UsageRecord(_Strict):
    """Tokens and cost (USD; None when the price is unknown)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0


class AttemptRecord(_Strict):
    """One request of the repair loop: its hash, the output's hash (None when no text came back),
    the problems found (empty: accepted) and what it cost."""

    attempt: int
    request_sha256: str
    output_sha256: str | None = None
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    """What was repaired without a request (``output.fenced``: a code fence unwrapped)."""
    output_budget: int | None = None
    """The request's output budget in tokens (``generate/budget.py``)."""
    usage: UsageRecord = Field(default_factory=UsageRecord)


class ReviewRecord(_Strict):
    """The review decision on a generated scenario, who made it and when (ISO 8601, UTC)."""

    status: ReviewDecision = "unreviewed"
    by: str | None = None
    at: str | None = None
    notes: str = ""


class PlanFacts(_Strict):
    """What a plan item asked for, or what a scenario is: language, difficulty, channel event
    kinds (``asr_substitute``, ``asr_drop``, ``asr_double``, ``vad_split``, ``seeded_noise``) and
    the sections of the operating document: planned to be tested, or tested by the scenario's
    checks and criteria (:mod:`callbench.bundle.section_tests`; empty in manifests written before
    sections were recorded)."""

    language: str
    difficulty: str
    channel: list[str] = Field(default_factory=list)
    sections: list[str] = Field(default_factory=list)


class ScenarioRecord(_Strict):
    """What generation recorded for one written scenario; ``planned`` and ``written``
    are None in manifests written before they were recorded."""

    batch: str
    item: int
    file: str
    planned: PlanFacts | None = None
    written: PlanFacts | None = None
    prompt_sha256: str
    output_sha256: str
    attempts: int
    audit: list[AttemptRecord]
    review: ReviewRecord = Field(default_factory=ReviewRecord)


class FailedItem(_Strict):
    """A plan item for which no scenario was written: why (``audit``, ``near_duplicate``,
    ``output``, ``infrastructure``), after how many attempts, and the last problems."""

    item: int
    reason: str
    attempts: int
    last_problems: list[str] = Field(default_factory=list)


class BatchRecord(_Strict):
    """One generation batch (fields in the module docstring)."""

    agent: str
    model: str
    provider: str
    settings: dict[str, Any]
    seed: int
    n: int
    languages: dict[str, int]
    difficulty: dict[str, int]
    max_attempts: int
    document_sha256: str
    tools_sha256: str
    rules_sha256: str
    plan: list[dict[str, Any]]
    written: list[str] = Field(default_factory=list)
    failed: list[FailedItem] = Field(default_factory=list)
    usage: UsageRecord = Field(default_factory=UsageRecord)
    written_languages: dict[str, int] = Field(default_factory=dict)
    """The language mix actually written (``languages`` is the planned one)."""
    written_difficulty: dict[str, int] = Field(default_factory=dict)
    """The difficulty mix actually written (``difficulty`` is the planned one)."""
    uncovered: list[str] = Field(default_factory=list)
    """Testable sections of the document that no plan item asked for (the plan is in ``plan``)."""


BATCH_RESULT_FIELDS = frozenset(
    {"written", "failed", "usage", "written_languages", "written_difficulty", "uncovered"}
)
"""Fields of a :class:`BatchRecord` filled while the batch runs: not part of its id."""


class GenerationManifest(_Strict):
    """``generation.yaml``: batches by id and generated scenarios by id."""

    batches: dict[str, BatchRecord] = Field(default_factory=dict)
    scenarios: dict[str, ScenarioRecord] = Field(default_factory=dict)


class ManifestError(ValueError):
    """The manifest cannot be read or does not fit its schema (message names file and field)."""


def manifest_path(root: Path) -> Path:
    """``<root>/generation.yaml``."""
    return root / MANIFEST_NAME


def load_manifest(root: Path) -> GenerationManifest:
    """The bundle's generation manifest (an empty one when the file does not exist). Raises
    :class:`ManifestError` naming the file and field."""
    path = manifest_path(root)
    if not path.exists():
        return GenerationManifest()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ManifestError(f"{path}: cannot read: {e}") from None
    try:
        return GenerationManifest.model_validate(data or {})
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ManifestError(f"{path}: {loc}: {first['msg']}") from None


def manifest_text(manifest: GenerationManifest) -> str:
    """The file's text: a comment, then the manifest as YAML (batches and scenarios sorted by id)."""
    data = manifest.model_dump(mode="json")
    data = {
        "batches": dict(sorted(data["batches"].items())),
        "scenarios": dict(sorted(data["scenarios"].items())),
    }
    return (
        "# How callbench generate made each generated scenario: model, settings, seed, hashes of what\n"
        "# was sent, attempts and audit results, review decisions. Beside provenance.yaml\n"
        "# (docs/generating.md).\n"
        + yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)
    )


def save_manifest(root: Path, manifest: GenerationManifest) -> Path:
    """Write the manifest atomically; returns its path. Raises ``OSError`` when it cannot."""
    path = manifest_path(root)
    atomic_write_text(path, manifest_text(manifest))
    return path
