"""The simulation engine: episode loop, caller simulator, channel and mock backend.

``run_episode`` (in :mod:`callbench.sim.episode`) runs one simulated call and returns its trace.
sim imports bundle, models.base and trace only; it never imports grade (DESIGN.md layering).

The names below are imported when first used (PEP 562), so importing one light module of the
package (:mod:`callbench.sim.tools`, for ``callbench validate``) does not load the episode loop.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from callbench.sim.episode import LoopLimits, run_episode
    from callbench.sim.seeds import derive_seed, episode_seeds
    from callbench.sim.tools import candidate_tools

_WHERE = {
    "LoopLimits": "callbench.sim.episode",
    "run_episode": "callbench.sim.episode",
    "candidate_tools": "callbench.sim.tools",
    "derive_seed": "callbench.sim.seeds",
    "episode_seeds": "callbench.sim.seeds",
}

__all__ = ["LoopLimits", "candidate_tools", "derive_seed", "episode_seeds", "run_episode"]


def __getattr__(name: str) -> Any:
    """The package's public names, imported from their modules on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
