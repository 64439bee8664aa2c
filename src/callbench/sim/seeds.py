"""Component seeds (paper: "Component seeds derive from the run seed, so channel and backend
behavior replays exactly"; DESIGN.md "Episode loop").

Every random choice of an episode draws from a seed derived from (run seed, scenario id, repeat,
component). The candidate's model spec is deliberately *not* part of the key: every candidate meets
the same channel noise on the same scenario and repeat, so comparisons between candidates are paired.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Literal

from callbench.trace import EpisodeSeeds

Component = Literal["episode", "channel", "backend", "caller", "candidate"]
COMPONENTS: tuple[Component, ...] = ("episode", "channel", "backend", "caller", "candidate")
_PREFIX = "callbench-seed-v1"


def derive_seed(run_seed: int, scenario_id: str, repeat: int, component: str,
                persona: str | None = None) -> int:
    """Return a 63-bit non-negative seed for one component of one episode.

    The seed is the first 8 bytes (big-endian) of SHA-256 over the canonical UTF-8 string
    ``callbench-seed-v1|<run_seed>|<NFC scenario_id>|<repeat>|<component>``, shifted right by one
    bit, so it fits a signed 64-bit integer. An episode of a persona sweep appends
    ``|persona=<id>``: each persona x scenario x repeat has its own seeds, and an episode without a
    persona keeps exactly the seeds it always had. Raises ``ValueError`` for an unknown component.
    """
    if component not in COMPONENTS:
        raise ValueError(f"unknown seed component {component!r}; expected one of {', '.join(COMPONENTS)}")
    sid = unicodedata.normalize("NFC", scenario_id)
    text = f"{_PREFIX}|{int(run_seed)}|{sid}|{int(repeat)}|{component}"
    if persona is not None:
        text += f"|persona={persona}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1


def episode_seeds(run_seed: int, scenario_id: str, repeat: int, persona: str | None = None) -> EpisodeSeeds:
    """All component seeds of one episode (of ``persona`` in a persona sweep), as recorded in the
    trace."""
    return EpisodeSeeds(
        run=run_seed,
        **{c: derive_seed(run_seed, scenario_id, repeat, c, persona) for c in COMPONENTS},
    )
