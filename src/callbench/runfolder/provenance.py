"""What produced an artifact: callbench version, git commit and whether the working tree was dirty."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from callbench import __version__
from callbench.runfolder.gitstate import BUILD_INFO, COMMIT, checkout_state


def state_of(package: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) for the callbench package folder ``package``: from git when it is the
    ``src/callbench`` of a checkout (an editable install, tests), else from the stamp the build
    wrote into it (``gitstate.BUILD_INFO``: the commit an installed package was built from, and
    whether that working tree was dirty), else (None, None): a build from an archive without git,
    or a stamp that is not one (unreadable, not JSON, or a commit that is not 40 or 64 hex digits)."""
    if package.parent.name == "src":
        commit, dirty = checkout_state(package.parent.parent)
        if commit is not None:
            return commit, dirty
    try:
        stamp = json.loads((package / BUILD_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(stamp, dict):
        return None, None
    commit, dirty = stamp.get("git_commit"), stamp.get("git_dirty")
    if not isinstance(commit, str) or not COMMIT.fullmatch(commit):
        return None, None
    return commit, dirty if isinstance(dirty, bool) else None


@functools.lru_cache(maxsize=1)
def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the running callbench (:func:`state_of` its package folder): None for
    what cannot be known."""
    return state_of(Path(__file__).resolve().parents[1])


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``<version>`` or ``<version>+g<short commit>[.dirty]`` when the commit is known."""
    commit, dirty = git_state()
    if commit is None:
        return __version__
    return f"{__version__}+g{commit[:10]}{'.dirty' if dirty else ''}"
