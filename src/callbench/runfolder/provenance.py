"""What produced an artifact: callbench version, git commit and whether the working tree was dirty."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from callbench import __version__


@functools.lru_cache(maxsize=1)
def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding the callbench source, or (None, None) when the
    package is not running from a checkout (an installed release) or git is unavailable."""
    src = Path(__file__).resolve().parents[2]
    try:
        top = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if top.returncode != 0 or not (Path(top.stdout.strip()) / "pyproject.toml").exists():
            return None, None
        commit = (
            subprocess.run(
                ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
        status = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if status.returncode != 0:
            return commit, None  # unknown, so never reported as clean
        return commit, bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``<version>`` or ``<version>+g<short commit>[.dirty]`` when running from a checkout."""
    commit, dirty = git_state()
    if commit is None:
        return __version__
    return f"{__version__}+g{commit[:10]}{'.dirty' if dirty else ''}"
