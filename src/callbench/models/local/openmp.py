"""How llama.cpp's OpenMP threads wait between parallel regions, chosen for the machine's load.

llama.cpp (built with OpenMP, as llama-cpp-python builds it on Linux) runs each layer's operations
as parallel regions with a barrier after each; a one-token decode of the 0.5B model crosses
hundreds of barriers. How a thread waits at a barrier is libgomp's ``OMP_WAIT_POLICY``, read once
when the library loads (GCC manual, "OMP_WAIT_POLICY" and "GOMP_SPINCOUNT"): unset, a thread spins
for a while (300,000 iterations) and then sleeps; ``PASSIVE``, it sleeps at once.

Measured on this project's 2-core machine (AMD EPYC, the embedded 0.5B judge, 341 generated
tokens): with the cores otherwise idle, unset 42.6 tokens/s against 21.2 with ``PASSIVE`` (every
barrier a futex sleep and wake-up); with one other busy process, unset 11.1 against 23.7 with
``PASSIVE`` (a spinning thread burns the time slice the descheduled one needs). Neither wins
everywhere, so :func:`configure_wait_policy` looks at the CPU the *other* processes use right
before llama.cpp loads, and chooses ``PASSIVE`` only when they would leave fewer idle cores than
llama.cpp has threads. A value already in the environment is always kept. The policy changes
speed only, never what is computed.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

LOG = logging.getLogger(__name__)
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
PROBE_SECONDS = 0.25
"""How long :func:`other_cpu_load` watches the machine."""
SPARE = 0.3
"""Cores' worth of other processes' CPU tolerated beyond the cores llama.cpp does not use."""


def _busy_ticks(stat: Path) -> tuple[int, int] | None:
    """(busy, total) clock ticks of every CPU together from ``/proc/stat``'s ``cpu`` line: busy is
    user + nice + system + irq + softirq + steal; total adds idle and iowait."""
    try:
        line = stat.read_text(encoding="ascii", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = line.split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    try:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    except ValueError:
        return None
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def other_cpu_load(interval: float = PROBE_SECONDS, stat: Path = Path("/proc/stat")) -> float | None:
    """Cores' worth of CPU that processes other than this one used over the next ``interval``
    seconds (this process's own CPU time, ``time.process_time``, is taken out). None where
    ``/proc/stat`` cannot be read (not Linux) or no tick passed."""
    first = _busy_ticks(stat)
    own0, wall0 = time.process_time(), time.monotonic()
    time.sleep(interval)
    second = _busy_ticks(stat)
    own1, wall1 = time.process_time(), time.monotonic()
    if first is None or second is None or second[1] <= first[1]:
        return None
    cores = os.cpu_count() or 1
    tick_s = (wall1 - wall0) * cores / (second[1] - first[1])  # seconds of one core per tick
    busy_s = (second[0] - first[0]) * tick_s - (own1 - own0)
    return max(0.0, busy_s / (wall1 - wall0))


def choose_wait_policy(threads: int, cores: int, other_load: float | None) -> str | None:
    """``"PASSIVE"`` when other processes use more than ``cores - threads + SPARE`` cores'
    worth of CPU (or when that is unknown and ``threads >= cores``), else None: leave libgomp's
    default (spin, then sleep)."""
    if other_load is None:
        return "PASSIVE" if threads >= cores else None
    return "PASSIVE" if other_load > max(0, cores - threads) + SPARE else None


def configure_wait_policy(threads: int) -> str:
    """Set ``OMP_WAIT_POLICY`` for llama.cpp before it loads (:func:`choose_wait_policy` on
    :func:`other_cpu_load`), unless the environment already sets it or llama_cpp is already
    imported (too late to matter). Returns what was decided, for the debug log."""
    if WAIT_POLICY_ENV in os.environ:
        return f"{WAIT_POLICY_ENV}={os.environ[WAIT_POLICY_ENV]} (from the environment)"
    if "llama_cpp" in sys.modules:
        return "libgomp default (llama_cpp was already loaded)"
    cores = os.cpu_count() or 1
    load = other_cpu_load()
    policy = choose_wait_policy(threads, cores, load)
    seen = "unknown" if load is None else f"{load:.2f} cores"
    if policy is None:
        return f"libgomp default (spin, then sleep): other processes used {seen}"
    os.environ[WAIT_POLICY_ENV] = policy
    return f"{WAIT_POLICY_ENV}={policy}: other processes used {seen} of {cores}"


def import_llama_cpp(threads: int | None = None) -> Any:
    """``import llama_cpp``, the first time in a process after :func:`configure_wait_policy`
    (``threads`` default: every core). Every place in callbench that loads llama.cpp goes through
    here, so the policy is decided whichever loads it first. Raises ImportError as the import does."""
    if "llama_cpp" not in sys.modules:
        LOG.debug("llama.cpp threads: %s", configure_wait_policy(threads or os.cpu_count() or 1))
    import llama_cpp

    return llama_cpp


__all__ = ["choose_wait_policy", "configure_wait_policy", "import_llama_cpp", "other_cpu_load"]
