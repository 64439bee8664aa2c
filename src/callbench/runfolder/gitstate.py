"""The git commit and working-tree state of a callbench checkout, for provenance.

This module imports nothing of callbench, so that the build (``setup.py``) can load this file
alone, before anything is installed, to stamp a built package with the commit it was built from
(:data:`BUILD_INFO`); ``provenance.py`` reads the stamp back in an installed package.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

BUILD_INFO = "_build_info.json"
"""The stamp's file name inside the built ``callbench`` package: a JSON object
``{"git_commit": "<40 or 64 hex digits>", "git_dirty": true | false | null}``."""
COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
"""A git commit id: SHA-1 (40 hex digits) or, in a SHA-256 repository, 64."""


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)


def _is_callbench(pyproject: Path) -> bool:
    """Whether ``pyproject`` is callbench's own (``[project] name = "callbench"``)."""
    try:
        with pyproject.open("rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError):  # absent, unreadable, or not TOML (tomllib.TOMLDecodeError)
        return False
    project = data.get("project")
    return isinstance(project, dict) and project.get("name") == "callbench"


def checkout_state(root: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout of callbench whose top level is ``root`` (its
    ``pyproject.toml`` names the project ``callbench``): the ``HEAD`` commit (40 or 64 hex digits),
    and whether the code differs from it: a tracked file changed anywhere (``git status
    --porcelain --untracked-files=no``), or a file under ``src/`` that git does not track and
    does not ignore (it would be imported, and built into a package); None when git cannot say,
    so never reported as clean. (None, None) when ``root`` is not the top of a checkout of
    callbench (a folder inside some other repository, such as a virtual environment made inside
    a clone, or another project's ``src/``), when it has no commit yet, or git is unavailable."""
    root = root.resolve()
    try:
        if not _is_callbench(root / "pyproject.toml"):
            return None, None
        top = _git(root, "rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
            return None, None
        head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD")
        commit = head.stdout.strip()
        if head.returncode != 0 or not COMMIT.fullmatch(commit):
            return None, None
        tracked = _git(root, "status", "--porcelain", "--untracked-files=no")
        new = _git(root, "status", "--porcelain", "--untracked-files=all", "--", "src")
        if tracked.returncode != 0 or new.returncode != 0:
            return commit, None
        return commit, bool(tracked.stdout.strip() or new.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None
