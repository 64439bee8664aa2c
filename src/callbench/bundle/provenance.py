"""A bundle's provenance file: how each scenario was made and reviewed, pinned by content hash.

Paper (section 3): "a generation manifest records the parameters, seeds, and hashes behind the
bundle" and "the authors reviewed every case". The file ``provenance.yaml`` (or ``.yml`` /
``.json``) at the bundle root holds one entry per scenario id::

    scenarios:
      dairy_zero_supply_mastitis:
        file: agents/dairy_milk_collection/scenarios/dairy_zero_supply_mastitis.yaml
        sha256: 3f5c...                       # SHA-256 of the scenario file's bytes
        made: hand_authored                    # or assisted, or generated
        authors: [callbench maintainers]
        generation: null                       # for generated: {model, provider, settings, seed, date}
        review: {status: machine_checked, by: [], date: "2026-12-01", notes: ...}

The file is optional; when a bundle has one, ``callbench validate`` checks it (codes below) and
``callbench provenance BUNDLE --update`` keeps it in step with the scenario files. It is not part
of the bundle's content hash, so recording a review does not invalidate saved runs.

Problem codes: ``provenance.missing_entry`` (a scenario has no entry), ``provenance.hash_mismatch``
(the scenario file changed after its entry was written), ``provenance.unknown_scenario`` (an entry
names no scenario of the bundle), ``provenance.file`` (the entry's ``file`` is not where the
scenario is), ``provenance.generation`` (a generated scenario without its ``generation`` record,
or a hand-authored one with one; an assisted one may name its model or not), ``provenance.source``
(an imported scenario without its ``source`` record, or a ``source`` on one not imported), plus the loader's
``parse`` / ``schema`` / ``empty`` codes for the file itself.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from datetime import date as _date
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callbench.bundle.loader import DATA_SUFFIXES, Problem, read_data_file

PROVENANCE_STEM = "provenance"
"""The provenance file is ``provenance.yaml`` (or ``.yml``/``.json``) at the bundle root."""

Made = Literal["hand_authored", "assisted", "generated", "imported"]
MADE_MEANING: dict[str, str] = {
    "hand_authored": "written by people, file by file",
    "assisted": "written file by file with an AI assistant in an editor or chat (its model in generation "
                "when known), not by a generation pipeline",
    "generated": "produced by a generation pipeline; generation records the model, settings and seed",
    "imported": "converted from another benchmark's task by callbench import; source records the benchmark, "
                "its commit and the task id",
}
ReviewStatus = Literal["unreviewed", "machine_checked", "reviewed"]
REVIEW_MEANING: dict[str, str] = {
    "unreviewed": "nobody has checked this version of the file",
    "machine_checked": "it passes callbench validate and the reference replay; no person has read it whole",
    "reviewed": "a person read the whole case and approved it (who and when in review.by/date)",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Generation(_Strict):
    """How a generated scenario was produced: the model, where it ran, its sampling settings and
    seed, and when. Enough to tell two generations apart and to rerun one."""

    model: str = Field(min_length=1, max_length=200, description="Model id, e.g. gpt-5.6-sol.")
    provider: str = Field(default="", max_length=200)
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Sampling and reasoning settings (temperature, effort, ...).")
    seed: int | None = None
    date: str | None = Field(default=None, description="ISO date of the generation.")
    notes: str = Field(default="", max_length=4000)


class ImportSource(_Strict):
    """Where an imported scenario came from (``callbench import``): the benchmark (repository),
    its commit, the task id and the licence of its data."""

    benchmark: str = Field(min_length=1, max_length=200, description="e.g. sierra-research/tau2-bench")
    commit: str = Field(min_length=1, max_length=64)
    domain: str = Field(default="", max_length=100)
    task_id: str = Field(min_length=1, max_length=200)
    licence: str = Field(default="", max_length=100)


class Review(_Strict):
    """Review status of the scenario file at the recorded hash (meanings in ``REVIEW_MEANING``)."""

    status: ReviewStatus = "unreviewed"
    by: list[str] = Field(default_factory=list, description="Reviewers (people or tools).")
    date: str | None = Field(default=None, description="ISO date of the review.")
    notes: str = Field(default="", max_length=4000)


class ProvenanceEntry(_Strict):
    """One scenario's record: its file, the SHA-256 of the file's bytes, how it was made, by whom,
    and its review status."""

    file: str = Field(description="Scenario file, relative to the bundle root.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 (hex) of the scenario file's bytes.")
    made: Made
    authors: list[str] = Field(default_factory=list)
    generation: Generation | None = None
    source: ImportSource | None = Field(default=None, description="For made: imported, the source task.")
    review: Review = Field(default_factory=Review)


class Provenance(_Strict):
    """``provenance.yaml``: scenario id -> entry."""

    scenarios: dict[str, ProvenanceEntry] = Field(default_factory=dict)


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes. Raises ``OSError`` when it cannot be read."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def provenance_path(root: Path) -> Path | None:
    """The bundle's provenance file, or None when it has none."""
    for suf in DATA_SUFFIXES:
        p = root / f"{PROVENANCE_STEM}{suf}"
        if p.is_file():
            return p
    return None


def load_provenance(root: Path, problems: list[Problem]) -> Provenance | None:
    """Read the provenance file under ``root``; None (and no problem) when there is none, None with
    a located problem appended when it cannot be read or does not fit the schema."""
    path = provenance_path(root)
    if path is None:
        return None
    rel = path.relative_to(root).as_posix()
    raw = read_data_file(root, path, problems)
    if raw is None:
        return None
    try:
        return Provenance.model_validate(raw)
    except ValidationError as e:
        for err in e.errors():
            where = ".".join(str(x) for x in err["loc"])
            problems.append(Problem(file=rel, path=where, code="schema", message=err["msg"]))
        return None


def audit_provenance(root: Path, scenario_files: dict[str, str]) -> list[Problem]:
    """Check the provenance file (if any) against the bundle's scenarios.

    ``scenario_files`` maps scenario id -> its file relative to ``root``. Returns every problem
    (codes in the module docstring); an empty list when the bundle has no provenance file.
    """
    problems: list[Problem] = []
    prov = load_provenance(root, problems)
    path = provenance_path(root)
    if prov is None or path is None:
        return problems
    rel = path.relative_to(root).as_posix()
    update = f"callbench provenance {root.name} --update"
    for sid, sfile in sorted(scenario_files.items()):
        entry = prov.scenarios.get(sid)
        if entry is None:
            problems.append(Problem(
                file=rel, path=f"scenarios.{sid}", code="provenance.missing_entry",
                message=f"scenario {sid!r} ({sfile}) has no provenance entry; add one with: "
                f"{update} --made ..."))
            continue
        where = f"scenarios.{sid}"
        if entry.file != sfile:
            problems.append(Problem(file=rel, path=f"{where}.file", code="provenance.file",
                                    message=f"the entry names {entry.file!r} but the scenario is in {sfile}"))
        try:
            actual = file_sha256(root / sfile)
        except OSError as e:
            problems.append(Problem(file=rel, path=f"{where}.sha256", code="read",
                                    message=f"cannot hash {sfile}: {getattr(e, 'strerror', None) or e}"))
        else:
            if actual != entry.sha256:
                problems.append(Problem(
                    file=rel, path=f"{where}.sha256", code="provenance.hash_mismatch",
                    message=f"recorded {entry.sha256[:12]}... but {sfile} hashes to {actual[:12]}...: the "
                    f"scenario changed after its entry was written (review {entry.review.status!r} was for "
                    f"the old text); record it with: {update}"))
        if (entry.made == "generated" and entry.generation is None) or (
                entry.made == "hand_authored" and entry.generation is not None):
            problems.append(Problem(
                file=rel, path=f"{where}.generation", code="provenance.generation",
                message="a generated scenario needs its generation record (model, settings, seed)"
                if entry.made == "generated" else "a hand-authored scenario has no generation record"))
        if (entry.made == "imported") != (entry.source is not None):
            problems.append(Problem(
                file=rel, path=f"{where}.source", code="provenance.source",
                message="an imported scenario needs its source record (benchmark, commit, task id)"
                if entry.made == "imported" else "only an imported scenario has a source record"))
    loaded_files = set(scenario_files.values())
    for sid in sorted(set(prov.scenarios) - set(scenario_files)):
        if _unloaded(root, prov.scenarios[sid].file, loaded_files):
            continue  # the file is there but did not load: its own problem says why; keep the entry
        problems.append(Problem(file=rel, path=f"scenarios.{sid}", code="provenance.unknown_scenario",
                                message=f"no scenario {sid!r} in the bundle; remove the entry ({update})"))
    return problems


def _unloaded(root: Path, file: str, loaded_files: set[str]) -> bool:
    """True when an entry's scenario file exists but loaded as no scenario (a parse or schema
    problem reported on that file): its entry is neither an unknown scenario nor removed."""
    return file not in loaded_files and (root / file).is_file()


class UpdateResult(BaseModel):
    """What :func:`update_provenance` changed, by scenario id."""

    path: str
    added: list[str] = Field(default_factory=list)
    rehashed: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    unchanged: int = 0


def update_provenance(
    root: Path,
    scenario_files: dict[str, str],
    *,
    made: Made | None = None,
    authors: Iterable[str] = (),
    generation: Generation | None = None,
    review: Review | None = None,
    only: Iterable[str] | None = None,
) -> UpdateResult:
    """Bring the provenance file in step with the scenario files and write it atomically.

    A scenario without an entry gets one made from ``made``, ``authors``, ``generation`` and
    ``review`` (``ValueError`` when ``made`` is None, or is ``generated`` without ``generation``).
    An entry whose file changed gets the new hash, and its review becomes ``review`` (default
    ``unreviewed``: a review covers the text it read). Entries of scenarios that no longer exist
    are dropped (an entry whose file is there but does not load is kept). ``only`` limits
    additions and rehashes to those scenario ids. The file is created
    as ``provenance.yaml`` when the bundle has none. Raises ``ValueError`` when the existing file
    cannot be read (its problems in the message) and ``OSError`` when it cannot be written.
    """
    problems: list[Problem] = []
    existing = load_provenance(root, problems)
    if problems:
        raise ValueError("; ".join(str(p) for p in problems))
    prov = existing or Provenance()
    path = provenance_path(root) or root / f"{PROVENANCE_STEM}.yaml"
    chosen = set(scenario_files) if only is None else set(only) & set(scenario_files)
    result = UpdateResult(path=path.relative_to(root).as_posix())
    new_review = review or Review(status="unreviewed")
    missing = sorted(s for s in chosen if s not in prov.scenarios)
    if missing:
        if made is None:
            raise ValueError(f"{len(missing)} scenario(s) have no entry ({', '.join(missing[:5])}"
                             f"{', ...' if len(missing) > 5 else ''}): say how they were made with --made")
        if (made == "generated" and generation is None) or (made == "hand_authored" and generation):
            raise ValueError("--made generated needs --model (and its settings); hand_authored takes none")
    out: dict[str, ProvenanceEntry] = {}
    for sid, sfile in sorted(scenario_files.items()):
        entry = prov.scenarios.get(sid)
        if sid not in chosen:
            if entry is not None:
                out[sid] = entry
            continue
        digest = file_sha256(root / sfile)
        if entry is None:
            out[sid] = ProvenanceEntry(file=sfile, sha256=digest, made=made or "hand_authored",
                                       authors=list(authors), generation=generation, review=new_review)
            result.added.append(sid)
        elif entry.sha256 != digest or entry.file != sfile:
            out[sid] = entry.model_copy(update={"sha256": digest, "file": sfile, "review": new_review})
            result.rehashed.append(sid)
        else:
            out[sid] = entry
            result.unchanged += 1
    loaded_files = set(scenario_files.values())
    for sid in sorted(set(prov.scenarios) - set(scenario_files)):
        if _unloaded(root, prov.scenarios[sid].file, loaded_files):  # present, not loadable: kept
            out[sid] = prov.scenarios[sid]
            result.unchanged += 1
        else:
            result.removed.append(sid)
    save_provenance(path, Provenance(scenarios=out))
    return result


def save_provenance(path: Path, prov: Provenance) -> None:
    """Write ``prov`` to ``path`` atomically (JSON for a ``.json`` path, else YAML with a header
    comment). Raises ``OSError`` when it cannot be written."""
    data = prov.model_dump(mode="json", exclude_none=True)
    if path.suffix == ".json":
        import json

        text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    else:
        text = ("# How each scenario was made and reviewed, pinned by the SHA-256 of its file.\n"
                "# Checked by `callbench validate`; refresh with `callbench provenance BUNDLE --update`.\n"
                + yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100))
    _atomic_write(path, text)


def unreviewed_generated(root: Path) -> list[str]:
    """Ids of scenarios whose provenance says ``made: generated`` and ``review.status:
    unreviewed`` (``callbench validate`` warns about them; ``callbench review`` clears them).
    Empty when the bundle has no readable provenance file."""
    problems: list[Problem] = []
    prov = load_provenance(root, problems)
    if prov is None:
        return []
    return sorted(sid for sid, e in prov.scenarios.items()
                  if e.made == "generated" and e.review.status == "unreviewed")


def review_counts(root: Path, scenario_ids: Iterable[str]) -> dict[str, int]:
    """How many of ``scenario_ids`` have each review status in the provenance file
    (``unreviewed`` / ``machine_checked`` / ``reviewed``), and ``no_record`` for those without an
    entry (all of them when the bundle has no readable provenance file). Only non-zero counts."""
    problems: list[Problem] = []
    prov = load_provenance(root, problems)
    counts: dict[str, int] = {}
    for sid in sorted(set(scenario_ids)):
        entry = prov.scenarios.get(sid) if prov is not None else None
        key = entry.review.status if entry is not None else "no_record"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def today() -> str:
    """Today's date (local), ISO 8601: the default review or generation date."""
    return _date.today().isoformat()


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
