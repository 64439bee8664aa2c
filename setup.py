"""setuptools build hook (the project's configuration is in pyproject.toml): stamps the built
``callbench`` package with the git commit it was built from and whether that working tree was
dirty (``callbench/_build_info.json``), so that an installed callbench records its code in every
run manifest as a checkout does (``src/callbench/runfolder/provenance.py``). Built from an archive
without git, nothing is stamped and the manifest says the commit is unknown."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _gitstate() -> Any:
    """``src/callbench/runfolder/gitstate.py``, loaded alone: nothing is installed yet."""
    path = ROOT / "src" / "callbench" / "runfolder" / "gitstate.py"
    spec = importlib.util.spec_from_file_location("_callbench_gitstate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stamp(build_lib: Path, root: Path = ROOT) -> Path | None:
    """Write the stamp of the checkout ``root`` into the built package under ``build_lib``; the
    stamp's path, or None when ``root`` is not a git checkout (nothing is written)."""
    git = _gitstate()
    commit, dirty = git.checkout_state(root)
    if commit is None:
        return None
    out = Path(build_lib) / "callbench" / git.BUILD_INFO
    out.write_text(json.dumps({"git_commit": commit, "git_dirty": dirty}) + "\n", encoding="utf-8")
    return out


class BuildPy(build_py):
    """``build_py`` into an emptied package folder (setuptools leaves files of an earlier build
    in ``build/lib``, and a wheel would carry a module deleted since), then :func:`stamp` beside
    the built package's modules."""

    def run(self) -> None:
        if not self.dry_run:
            shutil.rmtree(Path(self.build_lib) / "callbench", ignore_errors=True)
        super().run()
        if not self.dry_run:
            stamp(Path(self.build_lib))


if __name__ == "__main__":  # setuptools runs this file as __main__; the tests import it for stamp()
    setup(cmdclass={"build_py": BuildPy})
