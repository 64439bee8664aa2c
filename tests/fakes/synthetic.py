"""The synthetic run generator ``benchmarks/synthetic_runs.py`` as a module, for tests (one loader
shared by every test that needs synthetic run folders).

``benchmarks/`` is not a package, so the file is loaded by path. The module is loaded once per
test process: the module keeps the scripted starter runs its episodes copy from (``_CACHE``, a few
seconds of CPU each) for its life, so the tests of one process share them. What it writes depends
only on the arguments of ``make_synthetic_run`` (the seed above all), not on what it made before.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC_RUNS = ROOT / "benchmarks" / "synthetic_runs.py"


@functools.cache
def synthetic_runs() -> ModuleType:
    """``benchmarks/synthetic_runs.py`` loaded as the module ``synthetic_runs`` (registered in
    ``sys.modules``: its ``@dataclass`` looks its module up there); the same module object on every call."""
    spec = importlib.util.spec_from_file_location("synthetic_runs", SYNTHETIC_RUNS)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["synthetic_runs"] = mod
    spec.loader.exec_module(mod)
    return mod
