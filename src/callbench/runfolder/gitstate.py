"""The git commit and working-tree state of a callbench checkout, for provenance.

This module imports nothing of callbench, so that the build (``setup.py``) can load this file
alone, before anything is installed, to stamp a built package with the commit it was built from
(:data:`BUILD_INFO`); ``provenance.py`` reads the stamp back in an installed package.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

BUILD_INFO = "_build_info.json"
"""The stamp's file name inside the built ``callbench`` package: a JSON object
``{"git_commit": "<40 hex digits>", "git_dirty": true | false | null}``."""


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)


def checkout_state(root: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout whose top level is ``root`` (a folder holding callbench's
    ``pyproject.toml``): the ``HEAD`` commit, and whether a tracked file differs from it (``git
    status --porcelain --untracked-files=no``; None when that fails, so never reported as clean).
    (None, None) when ``root`` is not the top of a checkout with a ``pyproject.toml`` (a folder
    inside some other repository, such as a virtual environment made inside a clone, is not), or
    git is unavailable."""
    root = root.resolve()
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
            return None, None
        if not (root / "pyproject.toml").is_file():
            return None, None
        commit = _git(root, "rev-parse", "HEAD").stdout.strip() or None
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
        if status.returncode != 0:
            return commit, None
        return commit, bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None
