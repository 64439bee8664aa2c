"""One writer per run folder: an OS-level lock held by whoever writes traces or grades.

``callbench run`` and ``demo`` (the Ray driver too: it runs in the same function), ``grade`` and
``labels import`` hold :func:`hold_run_folder` for as long as they may write into the folder. The
lock is ``flock(2)`` (``LOCK_EX | LOCK_NB``) on the file :data:`LOCK_FILE` in the run folder: the
kernel releases it when the holder's process ends in any way (exit, crash, ``kill -9``), so a lock
is never stale after a crash. A second writer fails at once with :class:`RunFolderBusy`, a one-line
error naming the holder's command, pid and host (read from the lock file, where the holder writes
them). Two drivers on one folder used to both run, about 70% of the episodes simulated twice.

flock on NFS is emulated with POSIX record locks on Linux >= 2.6.12 (``flock(2)``, NOTES); on a
file system without locks at all, holding fails with an ``OSError`` (the command's machine-fault
line). Elsewhere than POSIX nothing is locked.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = "run.lock"
"""The lock file's name inside a run folder (kept after the run; its content is informative)."""


class RunFolderBusy(ValueError):
    """Another process holds the run folder's lock; the message is one line naming it."""


def _holder(path: Path) -> str:
    try:
        said = path.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        said = []
    if len(said) >= 2 and said[0].isdigit():
        what = " ".join(said[2:]) or "callbench"
        return f"{what} (pid {said[0]} on host {said[1]})"
    return "another callbench process (it has not said which yet)"


_held: dict[Path, int] = {}
"""Folders this process holds, with how deep: a nested hold (``run`` holds before drawing its
progress bar, the session again) is a no-op, where a second ``flock`` would refuse this process."""


@contextlib.contextmanager
def hold_run_folder(folder: Path, command: str) -> Iterator[Path]:
    """Hold the lock of run folder ``folder`` (created when missing) while the block runs; yields
    the lock file's path. ``command`` (``callbench run``, ``callbench grade`` ...) is written into
    the lock file with this process's pid and host, for the message of a second writer. A folder
    this hold created and left holding nothing but the lock file is removed on release (a refused
    run leaves nothing behind). Holding a folder this process already holds is a no-op.

    Raises :class:`RunFolderBusy` at once when another process holds it, ``OSError`` when the folder
    or lock file cannot be created (a read-only folder). Released on leaving the block, and by the
    kernel however the process ends."""
    folder = Path(folder)
    key = folder.resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield folder / LOCK_FILE
        finally:
            _held[key] -= 1
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield folder / LOCK_FILE
        return
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if created:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise RunFolderBusy(
                f"run folder {folder} is in use by {_holder(path)}; wait for it to finish or stop it "
                "(one process writes a run folder at a time)"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # the file may have been removed (and made anew) between open and lock: lock the one on disk
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _held[key] = 1
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()} {command}\n".encode())
        yield path
    finally:
        del _held[key]
        if created and only_the_lock(folder):
            with contextlib.suppress(OSError):
                path.unlink()
                folder.rmdir()
        os.close(fd)  # releases the lock


def only_the_lock(folder: Path) -> bool:
    """True when ``folder`` holds nothing but its lock file (a run that stopped before saving)."""
    try:
        return [p.name for p in Path(folder).iterdir()] == [LOCK_FILE]
    except OSError:
        return False
