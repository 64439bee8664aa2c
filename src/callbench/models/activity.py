"""What a model is doing right now, for progress displays.

A long local computation (loading weights, reading an 8,500-token operating document on a CPU)
takes minutes with no finished episode to show. Model clients report it here with
:func:`report` (what, how far, how fast) and :func:`clear` when done; a display subscribes with
:func:`listening` and gets every change, from whichever thread made it. With no listener a
report costs a lock and a list check.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Activity:
    """One ongoing computation: ``what`` (e.g. ``local:0.5b reading the candidate prompt``),
    ``done`` of ``total`` units (tokens; None when not counted), ``started`` (monotonic seconds)."""

    what: str
    done: int | None = None
    total: int | None = None
    started: float = field(default_factory=time.monotonic)

    def rate(self, now: float | None = None) -> float | None:
        """Units per second since ``started`` (None before one unit or one tenth of a second)."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        return self.done / elapsed if self.done and elapsed >= 0.1 else None

    def describe(self, now: float | None = None) -> str:
        """``what: done/total tokens, rate tok/s``, or ``what`` alone."""
        if self.done is None or self.total is None:
            return self.what
        rate = self.rate(now)
        speed = f", {rate:,.0f} tok/s" if rate else ""
        return f"{self.what}: {self.done:,}/{self.total:,} tokens{speed}"


Listener = Callable[[Activity | None], None]
_LOCK = threading.Lock()
_LISTENERS: list[Listener] = []


def report(what: str, done: int | None = None, total: int | None = None, *,
           started: float | None = None) -> None:
    """Tell every listener that ``what`` is under way (``done`` of ``total`` tokens)."""
    with _LOCK:
        listeners = list(_LISTENERS)
    if not listeners:
        return
    act = Activity(what, done, total, started if started is not None else time.monotonic())
    for fn in listeners:
        fn(act)


def clear() -> None:
    """Tell every listener that the computation reported last has ended."""
    with _LOCK:
        listeners = list(_LISTENERS)
    for fn in listeners:
        fn(None)


@contextmanager
def listening(fn: Listener) -> Iterator[None]:
    """Call ``fn`` with every :class:`Activity` (or None when one ends) inside the block."""
    with _LOCK:
        _LISTENERS.append(fn)
    try:
        yield
    finally:
        with _LOCK:
            _LISTENERS.remove(fn)
