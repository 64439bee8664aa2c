"""The per-episode files of a run folder, traces and episode grades: their names, their format,
reading and writing. Every reader and writer of ``traces/`` and ``grades/<id>/episodes/`` goes
through this module, so the format is known in one place (the reading of either form is
:mod:`callbench.textfile`, below the trace model, which reads trace files too).

Format: gzip-compressed JSON (RFC 1952), ``<episode_id>.json.gz``, written atomically (temp file
in the same folder, fsync, rename) with a fixed header (no file name, time 0) so that equal text
gives equal bytes. Chosen by measurement on a scripted starter run (docs/scale.md): gzip level 6
takes a trace from about 74 KB to 21 KB for about 2 ms of CPU, and any tool reads it
(``zcat``, ``gunzip``, ``jq`` after ``gzip -dc``, Python's ``gzip``). Runs written before it keep
plain ``<episode_id>.json`` files, which every reader here still accepts; when both forms of one
episode exist the compressed one wins, and writing an episode removes its plain file.

Hashes are of the JSON text, never of the compressed bytes: a trace's hash is SHA-256 of its
canonical JSON (``Trace.sha256``), whichever form the file has.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path

from callbench.textfile import DamagedFile, decompress, read_text
from callbench.trace import atomic_write_bytes

__all__ = [
    "COMPRESSED", "LEVEL", "PLAIN", "DamagedFile", "encode", "episode_id_of", "file_bytes", "iter_texts",
    "new_path", "path_for", "paths", "read_text", "remove", "remove_temp_files", "scan", "write_text",
]

COMPRESSED = ".json.gz"
"""Suffix of the current form."""
PLAIN = ".json"
"""Suffix of the form runs wrote before gzip (still read)."""
LEVEL = 6
"""gzip compression level (docs/scale.md: level 6 vs 1, 3 and 9)."""


def episode_id_of(name: str) -> str | None:
    """The episode id a file name in ``traces/`` or ``episodes/`` stands for, or None for any
    other name (hidden files, leftover ``.*.tmp`` files of interrupted writes, other suffixes)."""
    if name.startswith("."):
        return None
    if name.endswith(COMPRESSED):
        return name[: -len(COMPRESSED)] or None
    if name.endswith(PLAIN):
        return name[: -len(PLAIN)] or None
    return None


def new_path(folder: Path, episode_id: str) -> Path:
    """Where an episode's file is written: ``folder/<episode_id>.json.gz``."""
    return Path(folder) / f"{episode_id}{COMPRESSED}"


def path_for(folder: Path, episode_id: str) -> Path:
    """An episode's file in ``folder``: the compressed one if present, else the plain one of an
    older run if present, else the path it would be written to (:func:`new_path`)."""
    new = new_path(folder, episode_id)
    if new.exists():
        return new
    old = Path(folder) / f"{episode_id}{PLAIN}"
    return old if old.exists() else new


def scan(folder: Path) -> dict[str, os.DirEntry[str]]:
    """Every episode file of ``folder`` by episode id (empty when the folder is missing). When
    both forms of an episode exist, the compressed one is returned. Order: by episode id."""
    found: dict[str, os.DirEntry[str]] = {}
    try:
        entries = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    with entries:
        for e in entries:
            eid = episode_id_of(e.name)
            if eid is None:
                continue
            if eid in found and not e.name.endswith(COMPRESSED):
                continue
            found[eid] = e
    return dict(sorted(found.items()))


def paths(folder: Path) -> dict[str, Path]:
    """:func:`scan` as paths, by episode id."""
    return {eid: Path(e.path) for eid, e in scan(folder).items()}


def remove_temp_files(folder: Path) -> None:
    """Delete leftover ``.*.tmp`` files of interrupted atomic writes in ``folder``."""
    try:
        entries = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    with entries:
        for e in entries:
            if e.name.startswith(".") and e.name.endswith(".tmp"):
                Path(e.path).unlink(missing_ok=True)


def file_bytes(path: Path) -> bytes:
    """The content of any file of a run folder as a reader of its text sees it: decompressed for
    a ``.gz`` file, as stored otherwise (for scans of a whole folder, e.g. that no secret was
    saved). Raises ``OSError`` like :func:`read_text`."""
    path = Path(path)
    data = path.read_bytes()
    if not path.name.endswith(".gz"):
        return data
    return decompress(path, data)


def iter_texts(folder: Path) -> Iterator[tuple[str, Path, str]]:
    """(episode id, path, JSON text) of every episode file of ``folder``, by id, one at a time
    (nothing is kept). Raises like :func:`read_text`."""
    for eid, p in paths(folder).items():
        yield eid, p, read_text(p)


def encode(text: str) -> bytes:
    """The compressed bytes of ``text`` (deterministic: no file name, time 0)."""
    return gzip.compress(text.encode("utf-8"), compresslevel=LEVEL, mtime=0)


def write_text(folder: Path, episode_id: str, text: str, *, sync: bool = True) -> Path:
    """Write ``text`` compressed as ``folder/<episode_id>.json.gz`` atomically and return the path;
    a plain ``.json`` file of the same episode (an older run) is removed afterwards.

    ``sync=False`` skips the fsync (for generators of test data only). An OSError that names no
    file (e.g. ENOSPC) is raised again naming the path, with the same errno."""
    path = new_path(folder, episode_id)
    atomic_write_bytes(path, encode(text), sync=sync)
    (Path(folder) / f"{episode_id}{PLAIN}").unlink(missing_ok=True)
    return path


def remove(folder: Path, episode_id: str) -> None:
    """Delete an episode's file in both forms (missing files are fine)."""
    new_path(folder, episode_id).unlink(missing_ok=True)
    (Path(folder) / f"{episode_id}{PLAIN}").unlink(missing_ok=True)
