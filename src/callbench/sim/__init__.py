"""The simulation engine: episode loop, caller simulator, channel and mock backend.

``run_episode`` (in :mod:`callbench.sim.episode`) runs one simulated call and returns its trace.
sim imports bundle, models.base and trace only; it never imports grade (DESIGN.md layering).
"""

from callbench.sim.episode import LoopLimits, candidate_tools, run_episode
from callbench.sim.seeds import derive_seed, episode_seeds

__all__ = ["LoopLimits", "candidate_tools", "derive_seed", "episode_seeds", "run_episode"]
