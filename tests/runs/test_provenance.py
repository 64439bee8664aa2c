"""Provenance of the running code: the git state of a checkout, and the stamp a build writes into an
installed package (``setup.py``), read back so that an installed callbench's manifests name their
commit too."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from callbench.runfolder.gitstate import BUILD_INFO, checkout_state
from callbench.runfolder.provenance import state_of

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org",
                          "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout with a pyproject.toml and src/callbench, one commit."""
    root = tmp_path / "clone"
    (root / "src" / "callbench").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'callbench'\n")
    (root / "src" / "callbench" / "a.py").write_text("A = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "one")
    return root


def test_a_checkout_gives_its_commit_and_whether_a_tracked_file_changed(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    assert checkout_state(repo) == (head, False)
    (repo / "notes.txt").write_text("untracked\n")  # an untracked file leaves the tree clean
    assert checkout_state(repo) == (head, False)
    (repo / "src" / "callbench" / "a.py").write_text("A = 2\n")
    assert checkout_state(repo) == (head, True)
    assert state_of(repo / "src" / "callbench") == (head, True)
    _git(repo, "checkout", "-q", "--", "src")
    (repo / "src" / "callbench" / "new.py").write_text("B = 1\n")  # untracked, but imported and built
    assert checkout_state(repo) == (head, True)


def test_only_a_checkout_of_callbench_with_a_commit_counts(tmp_path: Path, repo: Path) -> None:
    # another project's src/ holding an installed callbench: not callbench's checkout
    (repo / "pyproject.toml").write_text("[project]\nname = 'other'\n")
    _git(repo, "commit", "-q", "-am", "other")
    assert checkout_state(repo) == (None, None)
    assert state_of(repo / "src" / "callbench") == (None, None)
    (repo / "pyproject.toml").write_text("not = [toml")
    assert checkout_state(repo) == (None, None)
    unborn = tmp_path / "unborn"  # git init, nothing committed: no commit to name
    unborn.mkdir()
    (unborn / "pyproject.toml").write_text("[project]\nname = 'callbench'\n")
    _git(unborn, "init", "-q")
    assert checkout_state(unborn) == (None, None)


def test_a_folder_inside_a_checkout_is_not_that_checkout(repo: Path) -> None:
    # a virtual environment made inside a clone: its installed package is not the clone's code
    site = repo / ".venv" / "lib" / "python3.11" / "site-packages" / "callbench"
    site.mkdir(parents=True)
    assert checkout_state(site.parent) == (None, None)
    assert state_of(site) == (None, None)
    (repo / "pyproject.toml").unlink()
    assert checkout_state(repo) == (None, None)


def test_an_installed_package_reads_its_build_stamp(tmp_path: Path, repo: Path) -> None:
    site = tmp_path / "site-packages" / "callbench"
    site.mkdir(parents=True)
    assert state_of(site) == (None, None)  # built without git: unknown
    commit = "0123456789abcdef0123456789abcdef01234567"
    (site / BUILD_INFO).write_text(json.dumps({"git_commit": commit, "git_dirty": False}))
    assert state_of(site) == (commit, False)
    (site / BUILD_INFO).write_text(json.dumps({"git_commit": commit, "git_dirty": "no"}))
    assert state_of(site) == (commit, None)  # a dirty flag that is not one: unknown, never clean
    for bad in ('{"git_commit": "HEAD", "git_dirty": false}', "[1]", "not json", '{"git_dirty": true}'):
        (site / BUILD_INFO).write_text(bad)
        assert state_of(site) == (None, None), bad
    # in a checkout, git is asked even where a stale stamp lies beside the sources (itself a file
    # git does not track there: the tree is dirty)
    stale = json.dumps({"git_commit": commit, "git_dirty": False})
    (repo / "src" / "callbench" / BUILD_INFO).write_text(stale)
    assert state_of(repo / "src" / "callbench") == (_git(repo, "rev-parse", "HEAD"), True)


def _setup_module() -> Any:
    spec = importlib.util.spec_from_file_location("callbench_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not as __main__: setup() is not run
    return module


def test_the_build_stamps_the_package_with_the_commit_it_was_built_from(tmp_path: Path, repo: Path) -> None:
    build = _setup_module()
    (tmp_path / "lib" / "callbench").mkdir(parents=True)
    path = build.stamp(tmp_path / "lib", repo)
    head = _git(repo, "rev-parse", "HEAD")
    assert json.loads(path.read_text(encoding="utf-8")) == {"git_commit": head, "git_dirty": False}
    assert state_of(tmp_path / "lib" / "callbench") == (head, False)
    assert build.stamp(tmp_path / "lib", tmp_path) is None  # built from an archive: no stamp
    # the hook is the build_py that setuptools runs (setup.py's cmdclass)
    assert issubclass(build.BuildPy, build.build_py) and build.BuildPy.run is not build.build_py.run
