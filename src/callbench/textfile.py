"""Reading the text of a file that is stored either gzip-compressed (RFC 1952, a ``.gz`` name) or
plain: the two forms of a run folder's episode files (:mod:`callbench.runfolder.episode_files`
holds their names and the writer).

It lives at the bottom of the package, below :mod:`callbench.trace`, because
:func:`callbench.trace.load_trace` reads trace files of either form and the trace model must not
import the run folder's package, which sits above it.
"""

from __future__ import annotations

import errno
import gzip
import zlib
from pathlib import Path


class DamagedFile(OSError):
    """A compressed file whose gzip data is damaged or truncated. ``filename`` names the file;
    ``str()`` is the reason alone (callers put the path in front)."""

    def __str__(self) -> str:
        return str(self.strerror)


def decompress(path: Path, data: bytes) -> bytes:
    """The gzip-decompressed ``data`` read from ``path``. Raises :class:`DamagedFile` naming
    ``path`` when the gzip stream is damaged or truncated."""
    try:
        return gzip.decompress(data)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise DamagedFile(errno.EIO, f"damaged gzip data ({e or 'truncated'})", str(path)) from None


def read_text(path: Path) -> str:
    """The UTF-8 text of a file of either form: decompressed when its name ends in ``.gz``.

    Raises ``OSError`` (missing or unreadable file; :class:`DamagedFile` for a damaged or
    truncated gzip stream) or ``UnicodeDecodeError`` (not UTF-8)."""
    path = Path(path)
    if not path.name.endswith(".gz"):
        return path.read_text(encoding="utf-8")
    return decompress(path, path.read_bytes()).decode("utf-8")
