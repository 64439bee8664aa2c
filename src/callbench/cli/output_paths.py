"""Output paths checked before a command computes anything (``callbench report``'s ``--html``,
``--html-folder``, ``--json``, ``--csv``): one located line naming the option and the path, with no
errno text, so a bad path costs nothing and writes nothing. The exit code follows the CLI's
contract (README, "Exit codes"): 2 for a bad path (a folder where a file goes, a path under a
file), 4 for a write the machine refuses (a read-only file system, permission denied).

What is checked is what can be known before writing: the nearest existing folder on the way to
the path must be a folder (not a file) that this process may write (``access(2)`` with ``W_OK |
X_OK``; a read-only mount is told apart from a missing permission by ``statvfs(3)``'s
``ST_RDONLY``). Missing folders below it are made by the writers (``trace.atomic_write_bytes``).
A disk that fills up during the write is still reported when it happens (exit 4,
``runs/machine.py``).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

BAD_PATH = 2
MACHINE_REFUSES = 4  # callbench.runs.machine.EXIT_MACHINE_FAULT


@dataclass(frozen=True)
class OutputProblem:
    """Why an output path cannot be written: ``line`` (no ``error:`` prefix) and the exit code."""

    line: str
    exit_code: int = BAD_PATH


def _nearest_existing(path: Path) -> tuple[Path, os.stat_result] | None:
    """The nearest existing ancestor of ``path`` (``path`` itself excluded) and its stat; None when
    none can be read (permission to look is missing: the write will say why)."""
    here = path.parent
    while True:
        try:
            return here, here.stat()
        except (FileNotFoundError, NotADirectoryError):
            if here == here.parent:
                return None
            here = here.parent
        except OSError:
            return None


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def creatable_problem(option: str, path: Path) -> OutputProblem | None:
    """Why a file or folder cannot be created at ``path`` (given with ``option``), or None: the
    nearest existing folder on the way is a file, or cannot be written (read-only file system or
    permission denied). One line: ``--json out/r.json: out is a file, not a folder; choose another
    path``."""
    found = _nearest_existing(path)
    if found is None:
        return None
    folder, st = found
    if not stat.S_ISDIR(st.st_mode):
        return OutputProblem(f"{option} {path}: {folder} is a file, not a folder; choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(folder) else "permission denied"
        return OutputProblem(f"{option} {path}: the folder {folder} cannot be written ({why}); choose "
                             "another path", MACHINE_REFUSES)
    return None


def file_path_problem(option: str, path: Path, *, folder_hint: str = "") -> OutputProblem | None:
    """Why the file ``path`` cannot be written: it is a folder (``folder_hint`` may say what to use
    instead), or :func:`creatable_problem`. None when it can."""
    if path.is_dir():
        hint = f" ({folder_hint})" if folder_hint else ""
        return OutputProblem(f"{option} {path}: is a folder; give a file path{hint}")
    return creatable_problem(option, path)


def first_problem(files: dict[str, Path | None], creatable: dict[str, Path | None]) -> OutputProblem | None:
    """The first problem among output paths by option: ``files`` must be writable files
    (:func:`file_path_problem`), ``creatable`` only creatable (:func:`creatable_problem`: paths whose
    kind, file or folder, is not known yet). None paths are skipped."""
    for option, path in files.items():
        line = None if path is None else file_path_problem(option, path)
        if line is not None:
            return line
    for option, path in creatable.items():
        line = None if path is None else creatable_problem(option, path)
        if line is not None:
            return line
    return None
