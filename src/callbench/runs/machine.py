"""Machine faults: the disk, not the model (issue 16 item 4).

A full disk, a permission error or a read-only run folder while a run, a grade or a report writes
is turned into one line naming the path and what to do (:func:`machine_fault_message`); the CLI
exits with :data:`EXIT_MACHINE_FAULT`. Every write is atomic (temp file + rename; SQLite
transactions), so finished episodes are intact and the same command resumes.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

EXIT_PROVIDER = 3
"""Exit code: a role's provider cannot be used (preflight failed, or the run stopped)."""
EXIT_MACHINE_FAULT = 4
"""Exit code: the machine refused a write (disk full, permission denied, read-only folder)."""

_ADVICE = {
    errno.ENOSPC: ("the disk is full", "free some space"),
    errno.EDQUOT: ("the disk quota is exceeded", "free some space or raise the quota"),
    errno.EACCES: ("permission denied", "make the folder writable for this user"),
    errno.EPERM: ("operation not permitted", "make the folder writable for this user"),
    errno.EROFS: ("the file system is read-only", "use a writable {option} folder or remount it read-write"),
}
_SQLITE = (
    ("disk is full", errno.ENOSPC),
    ("readonly", errno.EROFS),
    ("unable to open database file", errno.EACCES),
)


def machine_fault_message(exc: BaseException, fallback: Path | str, option: str = "--out") -> str | None:
    """One line for a machine fault, or None when ``exc`` is not one.

    ``fallback`` names the folder when the error carries no path (e.g. a write that failed after
    the file was opened); ``option`` names what to make writable in the read-only advice (the
command's output option, or ``run`` for the run folder itself).
    Recognises OSError with errno ENOSPC, EDQUOT, EACCES, EPERM, EROFS and SQLite's "database or
    disk is full", "attempt to write a readonly database" and "unable to open database file" (the
    index cannot be created in the folder).
    """
    if isinstance(exc, OSError) and exc.errno in _ADVICE:
        what, todo = _ADVICE[exc.errno]
        path = exc.filename or fallback
    elif isinstance(exc, sqlite3.OperationalError) and any(t in str(exc) for t, _ in _SQLITE):
        code = next(c for t, c in _SQLITE if t in str(exc))
        what, todo = _ADVICE[code]
        path = Path(fallback) / "index.sqlite"
    else:
        return None
    return (f"cannot write {path}: {what}; {todo.format(option=option)}, then run the same command "
            "again to resume (finished work is kept)")
