"""Reading a user's JSON file (a platform export, a tools file) with a located one-line error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_json_file(path: Path, where: str, error: Callable[[str], Exception]) -> Any:
    """The JSON value in ``path`` (UTF-8; a leading byte-order mark, common in Windows downloads,
    is allowed, RFC 8259 section 8.1). Raises ``error(message)`` with one line located at
    ``where`` (the option and path the user gave): ``<where>: cannot read: <reason>`` for a missing,
    unreadable or non-UTF-8 file, ``<where>: not JSON: <what> at line L column C`` for invalid JSON."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{where}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
