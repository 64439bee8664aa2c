"""Silence what native code writes to file descriptor 2 while a call into it runs.

llama.cpp's grammar parser reports a grammar it refuses with a C ``fprintf(stderr, ...)`` of the
whole grammar (hundreds of lines for the scenario schema of ``callbench generate``) before the local
provider falls back to a looser grammar as designed (``client._parsable_grammar``). Python's
``sys.stderr`` redirection cannot reach a C ``fprintf``; only the file descriptor can be redirected
(``dup(2)``/``dup2(2)``, POSIX.1-2017).

Thread safety: fd 2 belongs to the whole process, so while it points at ``/dev/null`` every thread's
writes to it are lost, not only the native call's. :func:`silenced_stderr` therefore holds a
process-wide lock for the whole silenced section (two threads silencing at once would otherwise
restore in the wrong order and leave stderr pointing at ``/dev/null`` for good), flushes Python's
``sys.stderr`` before and after (text written before the section reaches the terminal), and is
meant for short native calls only (parsing a grammar: milliseconds), never for a generation.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

_LOCK = threading.Lock()
STDERR_FD = 2


def _flush() -> None:
    with contextlib.suppress(Exception):
        sys.stderr.flush()


@contextlib.contextmanager
def silenced_stderr() -> Iterator[None]:
    """Point fd 2 at ``os.devnull`` for the duration of the ``with`` block and restore it after,
    also when the block raises. When fd 2 cannot be redirected (closed, or no ``/dev/null``) the
    block runs with fd 2 unchanged. Not reentrant: a nested call from the same thread would
    deadlock, so the block must not call it again."""
    with _LOCK:
        _flush()
        saved = _redirect_to_null()
        try:
            yield
        finally:
            if saved is not None:
                _flush()
                os.dup2(saved, STDERR_FD)
                os.close(saved)


def _redirect_to_null() -> int | None:
    """Point fd 2 at ``os.devnull``; return a duplicate of the old fd 2 (None when it could not be
    redirected: fd 2 is then unchanged)."""
    try:
        saved = os.dup(STDERR_FD)
    except OSError:
        return None
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, STDERR_FD)
        finally:
            os.close(null)
    except OSError:
        os.close(saved)
        return None
    return saved
