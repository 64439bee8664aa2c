"""Machine faults: the disk, not the model.

A full disk, a permission error or a read-only run folder while a run, a grade or a report writes
is turned into one line naming the path and what to do (:func:`machine_fault_message`); the CLI
exits with :data:`EXIT_MACHINE_FAULT`. Every write is atomic (temp file + rename; SQLite
transactions), so finished episodes are intact and the same command resumes.
"""

from __future__ import annotations

import errno
import os
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
    errno.EIO: ("a disk input/output error", "check the disk and its free space"),
}
_SQLITE = (
    ("disk is full", errno.ENOSPC, False),
    ("readonly", errno.EACCES, False),
    ("unable to open database file", errno.EACCES, True),
    ("disk I/O error", errno.EIO, True),
)
"""SQLite's messages for a refused write, the errno each means when the folder itself shows nothing
more specific, and whether a full disk can be behind it (:func:`diagnose`): SQLite reports a
read-only mount, a folder without write permission and a full disk with these few messages, so
the folder is asked which it was."""
LOW_SPACE_BYTES = 1 << 20
"""Free space below which a refused write is put down to a full disk (SQLite needs room for its
write-ahead log and shared-memory file, 32 KiB and more, so a "disk I/O error" or "unable to open
database file" on a file system with less than this left is a full disk)."""


def diagnose(path: Path | str, code: int, *, space: bool = False) -> int:
    """The errno a refused write under ``path`` really had: ``EROFS`` when its file system is
    mounted read-only; with ``space``, ``ENOSPC`` when less than :data:`LOW_SPACE_BYTES` is free
    for this user; for ``EIO``, ``EACCES`` when the nearest existing folder is not writable for
    this user; else ``code``.

    For the errors that do not say which (``EACCES``, ``EPERM``, ``EIO`` and SQLite's messages);
    the first existing folder up from ``path`` is examined (``os.statvfs``, ``os.access``).
    """
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        folder = folder.parent
    try:
        st = os.statvfs(folder)
    except OSError:
        return code
    if st.f_flag & os.ST_RDONLY:
        return errno.EROFS
    if space and st.f_bavail * st.f_frsize < LOW_SPACE_BYTES:
        return errno.ENOSPC
    if code == errno.EIO and not os.access(folder, os.W_OK):
        return errno.EACCES
    return code


def machine_fault_message(exc: BaseException, fallback: Path | str, option: str = "--out") -> str | None:
    """One line for a machine fault, or None when ``exc`` is not one.

    ``fallback`` names the folder when the error carries no path (e.g. a write that failed after
    the file was opened); ``option`` names what to make writable in the read-only advice (the
    command's output option, or ``run`` for the run folder itself).
    Recognises OSError with errno ENOSPC, EDQUOT, EACCES, EPERM, EROFS, EIO and SQLite's "database
    or disk is full", "attempt to write a readonly database", "unable to open database file" (the
    index cannot be created in the folder) and "disk I/O error" (a write of the index or its
    write-ahead log failed). Errors that do not say why (permission, I/O and SQLite's) are told
    apart by :func:`diagnose`: a read-only mount, a full disk or a folder without permission.
    """
    if isinstance(exc, OSError) and exc.errno in _ADVICE:
        path = exc.filename or fallback
        code = exc.errno
        if code in (errno.EACCES, errno.EPERM, errno.EIO):
            code = diagnose(path, code, space=code == errno.EIO)
    elif isinstance(exc, sqlite3.OperationalError) and any(t in str(exc) for t, _, _ in _SQLITE):
        path = Path(fallback) / "index.sqlite"
        code, space = next((c, sp) for t, c, sp in _SQLITE if t in str(exc))
        if code != errno.ENOSPC:
            code = diagnose(path, code, space=space)
    else:
        return None
    what, todo = _ADVICE[code]
    return (f"cannot write {path}: {what}; {todo.format(option=option)}, then run the same command "
            "again to resume (finished work is kept)")
