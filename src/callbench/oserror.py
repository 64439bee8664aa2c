"""One-line wording for operating-system errors on a path the user gave.

Python's own text (``[Errno 2] No such file or directory: 'examples/startr'``) names neither what
the path was for nor what to do. :func:`os_error_line` gives ``PATH: what is wrong; what to do``.
"""

from __future__ import annotations

import errno
from pathlib import Path

_REASONS = {
    errno.ENOENT: ("does not exist", "check the path (a typo?)"),
    errno.ENOTDIR: ("is not a folder", "give a folder"),
    errno.EISDIR: ("is a folder", "give a file"),
    errno.EACCES: ("permission denied", "check the permissions of the path and its folders"),
    errno.EPERM: ("permission denied", "check the permissions of the path and its folders"),
    errno.ENOSPC: ("no space left on the device", "free some space"),
    errno.EROFS: ("is on a read-only file system", "use a writable folder"),
}


def os_error_line(e: OSError, path: str | Path | None = None, *, expected: str = "") -> str:
    """``PATH: reason; what to do`` for ``e`` on ``path`` (default: the error's own file name).
    ``expected`` says what the path should be (``a bundle folder (one holding bundle.yaml)``) and
    replaces the generic advice for a missing path or a path of the wrong kind."""
    where = str(path if path is not None else (e.filename or "?"))
    reason, todo = _REASONS.get(e.errno or -1, (e.strerror or str(e), ""))
    if expected and e.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR):
        todo = f"give the path of {expected}"
    return f"{where}: {reason}" + (f"; {todo}" if todo else "")
