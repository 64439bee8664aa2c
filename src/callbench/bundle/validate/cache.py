"""A cache of ``callbench validate``'s results, keyed by everything the result depends on.

``validate`` of the starter bundle (100 scenarios) spends about 0.9 s importing, loading and
auditing ("cache what does not change"). When nothing it depends on changed, the
same command prints the same lines and exits with the same code, so the cache replays them. The
key (SHA-256) covers:

- the bytes of every file under the bundle folder, the path of every folder (an empty one
  included) and the target text of every symlink there, with their paths (a symlink out of the
  bundle, a FIFO, device or socket there, a file that cannot be read, a bundle over :data:`MAX_FILES` files or
  :data:`MAX_BYTES` bytes: no caching, the command runs in full);
- the command's options and the path as given and as resolved, and the working folder;
- callbench's own code (path, size and modification time of every file of the installed package)
  and the installed versions of the libraries the audits use (pydantic, PyYAML, jsonschema,
  google-re2) and of Python.

Entries are JSON files under ``$CALLBENCH_CACHE_DIR/validate`` (default
``~/.cache/callbench/validate``), written atomically, the oldest removed beyond
:data:`MAX_ENTRIES`; ``CALLBENCH_VALIDATE_CACHE=0`` turns the cache off. Without the variable the
cache serves the ``callbench`` command only, never the app invoked in-process
(``callbench.RUNNING_AS_COMMAND``).
A cache that cannot be read or written is ignored (never an error). Only results of a readable
bundle are kept (exit codes 0 and 1). This module imports nothing heavy: a hit costs the hashing,
not the audits.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CACHE_FORMAT = 1
MAX_ENTRIES = 64
MAX_FILES = 20_000
MAX_BYTES = 64 * 1024 * 1024
MAX_ENTRY_BYTES = 16 * 1024 * 1024
CACHE_ENV = "CALLBENCH_VALIDATE_CACHE"
LIBRARIES = ("pydantic", "pyyaml", "jsonschema", "google_re2")


@dataclass(frozen=True)
class Replay:
    """One cached result: the lines the command wrote, in order, each ``(stream, text)`` with
    stream ``"out"`` or ``"err"`` and text without its newline, and its exit code."""

    lines: tuple[tuple[str, str], ...]
    exit_code: int


def cache_dir() -> Path | None:
    """``$CALLBENCH_CACHE_DIR/validate`` or ``~/.cache/callbench/validate``; None when
    ``CALLBENCH_VALIDATE_CACHE`` is ``0``/``off``/``false``/``no``, or when it is unset (or empty)
    and this process is not the ``callbench`` command (``callbench.RUNNING_AS_COMMAND``, set by
    ``callbench.__main__``: the typer app invoked in-process, as by tests or a library user, runs
    every audit, so code patched in that process is never bypassed by a stored result)."""
    import callbench

    value = os.environ.get(CACHE_ENV, "").strip().lower()
    if value in ("0", "off", "false", "no") or (not value and not callbench.RUNNING_AS_COMMAND):
        return None
    base = os.environ.get("CALLBENCH_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "callbench") / "validate"


def _code_fingerprint(h: hashlib._Hash) -> None:
    """callbench's files (path, size, mtime) and the audit libraries' installed versions (their
    ``.dist-info`` folder names on ``sys.path``) and Python's version into ``h``."""
    package = Path(__file__).resolve().parents[2]  # src/callbench (this file: bundle/validate/cache.py)
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            st = os.stat(os.path.join(folder, name))
            h.update(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    h.update(sys.version.encode())
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in sorted(names):
            if name.endswith(".dist-info") and name.lower().replace("-", "_").startswith(LIBRARIES):
                h.update(f"{entry}/{name}\n".encode())


def _bundle_fingerprint(h: hashlib._Hash, root: Path) -> bool:
    """Every folder's path, every file's bytes and every symlink's target under ``root`` into
    ``h``; False (do not cache) over the limits, when anything cannot be read, or when an entry
    is neither a folder, a regular file nor a symlink (a FIFO or a device would block or never
    end when read; validate reports those itself). An empty folder counts: under ``agents/`` it
    is a problem ("no agent.yaml"). Symlinks are hashed as their target text, not followed: the
    loader reports a link out of the bundle (``path.escape``) without reading it, and a link
    inside resolves to a file hashed under its own path."""
    count = size = 0
    real_root = os.path.realpath(root)
    try:
        for folder, dirs, files in os.walk(root, onerror=_raise):
            dirs.sort()
            rel = os.path.relpath(folder, root)
            for name in dirs:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    if not _inside(path, real_root):
                        return False
                    h.update(f"L\0{rel}/{name}\0{os.readlink(path)}\n".encode())
                else:
                    h.update(f"D\0{rel}/{name}\n".encode())
            for name in sorted(files):
                path = os.path.join(folder, name)
                count += 1
                if count > MAX_FILES:
                    return False
                if os.path.islink(path):
                    if not _inside(path, real_root):
                        return False
                    h.update(f"L\0{rel}/{name}\0{os.readlink(path)}\n".encode())
                    continue
                data = _read_regular(path, MAX_BYTES + 1)
                if data is None:
                    return False
                size += len(data)
                if size > MAX_BYTES:
                    return False
                h.update(f"F\0{rel}/{name}\0{len(data)}\n".encode())
                h.update(data)
    except OSError:
        return False
    return True


def _inside(path: str, real_root: str) -> bool:
    """Whether ``path`` resolves (through every symlink) to ``real_root`` or below it."""
    target = os.path.realpath(path)
    return target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)


def _read_regular(path: str | Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``path`` when it is a regular file, not through a symlink; None
    for anything else (a FIFO, a device, a socket, a symlink). Opened non-blocking so a FIFO
    cannot hang the open; the type is checked on the open file, so a swap after a check cannot
    slip one in. Raises OSError when it cannot be opened or read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(limit)


def _raise(error: OSError) -> None:
    raise error


def cache_key(path: Path, options: dict[str, str]) -> str | None:
    """The key of ``validate PATH`` with ``options`` (name -> value), or None when the result
    must not be cached (the cache is off, ``path`` is not a readable bundle folder or its
    ``bundle.yaml``/``bundle.json``, or the bundle is over the limits)."""
    if cache_dir() is None:
        return None
    root = path.parent if path.is_file() and path.stem == "bundle" else path
    if not root.is_dir():
        return None
    h = hashlib.sha256(f"callbench validate cache {CACHE_FORMAT}\n".encode())
    try:
        h.update(f"{path}\0{root.resolve()}\0{os.getcwd()}\n".encode())
    except OSError:
        return None
    h.update(json.dumps(options, sort_keys=True).encode())
    _code_fingerprint(h)
    if not _bundle_fingerprint(h, root):
        return None
    return h.hexdigest()


def load(key: str) -> Replay | None:
    """The cached result for ``key``, or None (absent, unreadable, not a cache entry, not a
    regular file (a symlink is not followed: it could point at another user's text or at
    ``/dev/zero``), or over :data:`MAX_ENTRY_BYTES`)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        raw = _read_regular(folder / f"{key}.json", MAX_ENTRY_BYTES + 1)
        if raw is None or len(raw) > MAX_ENTRY_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
        lines = tuple((stream, text) for stream, text in data["lines"])
        code = data["exit_code"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if code not in (0, 1) or type(code) is not int or not all(
            stream in ("out", "err") and isinstance(text, str) for stream, text in lines):
        return None
    return Replay(lines=lines, exit_code=code)


def save(key: str, replay: Replay) -> None:
    """Keep ``replay`` under ``key`` (atomically: a temporary file renamed into place), then
    remove the oldest entries beyond :data:`MAX_ENTRIES`. Results other than exit 0 or 1, and
    results over :data:`MAX_ENTRY_BYTES` as JSON, are not kept. Never raises: a cache that
    cannot be written is skipped."""
    folder = cache_dir()
    if folder is None or replay.exit_code not in (0, 1):
        return
    body = json.dumps({"lines": [list(line) for line in replay.lines], "exit_code": replay.exit_code},
                      ensure_ascii=False)
    if len(body.encode("utf-8")) > MAX_ENTRY_BYTES:  # load() would refuse it
        return
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(body)
            os.replace(tmp, folder / f"{key}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        entries = sorted(folder.glob("*.json"), key=_mtime)
        for old in entries[:-MAX_ENTRIES]:
            with contextlib.suppress(OSError):
                old.unlink()


def _mtime(path: Path) -> int:
    """``path``'s own modification time (a symlink's, not its target's); 0 when it is gone (a
    concurrent validate pruned it), so the pruning goes on."""
    try:
        return path.lstat().st_mtime_ns
    except OSError:
        return 0
