"""What to type to install an optional extra, as callbench is installed here.

``pip install 'callbench[local]'`` works only when callbench came from a package index. Installed
from a checkout (``pip install -e .`` or ``pip install .``, which PEP 610 records in the
distribution's ``direct_url.json`` as a ``file://`` URL), that command fetches callbench from
PyPI instead, so the hint names the checkout: ``pip install -e '/path/to/checkout[local]'``. Run
from a source tree that is not installed at all, the hint is ``pip install '.[local]'`` from the
checkout's root.
"""

from __future__ import annotations

import json
from importlib import metadata
from urllib.parse import unquote, urlparse


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra`` (e.g. ``local``) for this installation of callbench,
    one line, quoted for a POSIX shell (rules in the module docstring)."""
    try:
        dist = metadata.distribution("callbench")
    except metadata.PackageNotFoundError:
        return f"pip install '.[{extra}]' (from the root of your callbench checkout)"
    raw = dist.read_text("direct_url.json")
    try:
        direct = json.loads(raw) if raw else None
    except ValueError:
        direct = None
    url = direct.get("url") if isinstance(direct, dict) else None
    if isinstance(url, str) and url.startswith("file://"):
        path = unquote(urlparse(url).path)
        editable = bool((direct.get("dir_info") or {}).get("editable")) if isinstance(direct, dict) else False
        flag = "-e " if editable else ""
        return f"pip install {flag}'{path}[{extra}]' (callbench is installed from that checkout)"
    return f"pip install 'callbench[{extra}]'"
