"""Crash-safe records of generated scenarios.

A generated scenario is committed in three atomic writes, in this order:

1. ``generation.yaml`` with the scenario's record (its file, the SHA-256 of the text about to be
   written, what was planned and written) and the batch's progress;
2. ``provenance.yaml`` with its entry (``made: generated``, the same SHA-256, review
   ``unreviewed``);
3. the scenario file itself.

So a scenario file never exists without both records: a crash (or Ctrl-C) before step 3 leaves
records that name a file that is not there, and nothing else. Those orphan records are removed
by :func:`roll_back_orphans`, which the next ``callbench generate`` runs first; the item is then
generated again (with a response cache, byte for byte the same). A scenario rejected in review
(its file removed by ``callbench review --reject``) keeps its record and is not an orphan.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from callbench.bundle.loader import Problem
from callbench.bundle.provenance import (
    PROVENANCE_STEM,
    Generation,
    Provenance,
    ProvenanceEntry,
    Review,
    load_provenance,
    provenance_path,
    save_provenance,
)
from callbench.generate.manifest import GenerationManifest, load_manifest, save_manifest
from callbench.trace import atomic_write_text


class RecordsError(ValueError):
    """``provenance.yaml`` cannot be read, so no scenario can be recorded (message says where)."""


def _provenance(root: Path) -> tuple[Path, Provenance]:
    problems: list[Problem] = []
    prov = load_provenance(root, problems)
    if problems:
        raise RecordsError("; ".join(str(p) for p in problems[:5]))
    return provenance_path(root) or root / f"{PROVENANCE_STEM}.yaml", prov or Provenance()


def commit_scenario(
    root: Path,
    manifest: GenerationManifest,
    scenario_id: str,
    rel: str,
    text: str,
    generation: Generation,
    model_spec: str,
    made_by: str = "callbench generate",
) -> None:
    """Commit one generated scenario (module docstring): save ``manifest`` (which already holds the
    scenario's record), add its provenance entry (author ``<made_by> (<model_spec>)``), then write
    ``text`` to ``root / rel``. Raises
    :class:`RecordsError` when ``provenance.yaml`` cannot be read and ``OSError`` when a write
    fails (what was written before it is rolled back by the next run)."""
    save_manifest(root, manifest)
    path, prov = _provenance(root)
    prov.scenarios[scenario_id] = ProvenanceEntry(
        file=rel,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        made="generated",
        authors=[f"{made_by} ({model_spec})"],
        generation=generation,
        review=Review(status="unreviewed"),
    )
    prov.scenarios = dict(sorted(prov.scenarios.items()))
    save_provenance(path, prov)
    atomic_write_text(root / rel, text)


def roll_back_orphans(root: Path) -> list[str]:
    """Remove the records a crash left without their scenario file (module docstring): the
    ``generation.yaml`` scenario record and batch ``written`` entry, and the ``provenance.yaml``
    entry of every generated scenario whose file is missing and that was not rejected in review.
    Returns their ids, sorted (empty when there were none; nothing is written then). Raises
    :class:`~callbench.generate.manifest.ManifestError` or :class:`RecordsError` for an unreadable
    record file."""
    manifest = load_manifest(root)
    orphans = sorted(
        sid for sid, r in manifest.scenarios.items()
        if r.review.status != "rejected" and not (root / r.file).is_file()
    )
    if not orphans:
        return []
    for sid in orphans:
        del manifest.scenarios[sid]
    for batch in manifest.batches.values():
        batch.written = [s for s in batch.written if s not in orphans]
    path, prov = _provenance(root)
    gone = [s for s in orphans if s in prov.scenarios and prov.scenarios[s].made == "generated"
            and not (root / prov.scenarios[s].file).is_file()]
    save_manifest(root, manifest)
    if gone:
        for sid in gone:
            del prov.scenarios[sid]
        save_provenance(path, prov)
    return orphans
