"""callbench's own CPU time while it runs a conversation, for the harness CPU per request.

:class:`CpuMeter` drives a coroutine step by step and counts the CPU time (``time.thread_time``:
CPU of this thread only, user and system, never time spent waiting) of

- every step of the coroutine: the conversation's own code, however many conversations share the
  event loop: building requests, the model client's work in the task (the request body, the SDK's
  HTTP stack, reading and assembling a stream, parsing the answer, the response cache), the
  checks on the answer, the backend, the channel;
- the event loop's own work on the same thread just before each step, since the previous step
  of any driven coroutine there ended: polling the sockets and the protocol callbacks that read
  the bytes which woke this step. That work is not tagged with the conversation it serves, so it
  is charged to the step that runs next; at a concurrency above 1 a step may carry some of
  another conversation's socket reads, and any other task on the loop between steps (grading a
  finished call, saving) is charged to the conversations too. Summed over a run, the figures
  hold the loop thread's CPU while conversations run, no less; while no conversation is live on
  the thread (before a run, between runs) nothing is charged.

Work handed to another thread is only counted when it is run through :meth:`CpuMeter.in_thread`
(the voice channel); an embedded local model's computation runs on its own thread and is the
model's, not the harness's; the provider's server time is never on this machine's CPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

_last = threading.local()
"""Per thread: ``end``, thread_time when the last driven step there ended (None once no driven
coroutine is live there: work between runs is nobody's); ``live``, driven coroutines started
and not finished."""


class CpuMeter:
    """CPU seconds (``time.thread_time``) spent in the coroutines it drove (see the module
    docstring): :meth:`reading`, which only grows. ``driven``: :meth:`drive` was called (a
    conversation loop that is not driven, such as a deployed candidate's, has no harness CPU to
    give)."""

    def __init__(self) -> None:
        self.steps_s = 0.0  # the steps that are over (written on the loop's thread only)
        self.threads_s = 0.0  # work run through in_thread (written by one worker at a time)
        self.driven = False
        self._step: float | None = None  # thread_time at the start of the step in progress

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the steps that are over and of the work run through :meth:`in_thread`."""
        return self.steps_s + self.threads_s

    def reading(self) -> float:
        """CPU seconds so far, the step in progress included up to now (a conversation that
        never waits runs in one step: its requests are told apart within it)."""
        if self._step is None:
            return self.cpu_s
        return self.cpu_s + max(0.0, time.thread_time() - self._step)

    def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn(*args)`` (in the worker thread it is run on) and add that thread's CPU time for
        the call to :attr:`cpu_s`. Meant for ``asyncio.to_thread(meter.in_thread, fn, ...)`` from a
        driven coroutine: it awaits the call, so one worker at a time adds here (a total of its
        own: the step that handed the work over may still be ending on the loop's thread)."""
        t0 = time.thread_time()
        try:
            return fn(*args)
        finally:
            self.threads_s += time.thread_time() - t0

    async def drive(self, coro: Awaitable[T]) -> T:
        """Await ``coro``, adding the CPU time of each of its steps to :attr:`steps_s`. Exceptions,
        cancellation and the result pass through unchanged."""
        self.driven = True
        return await _Driven(coro, self)


class _Driven:
    """An awaitable that steps ``coro`` itself, timing each step (``__await__`` is a generator the
    task drives: what the inner coroutine yields to the event loop goes out unchanged, what the
    loop sends or throws back goes in)."""

    def __init__(self, coro: Awaitable[Any], meter: CpuMeter) -> None:
        self.coro, self.meter = coro, meter

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self.coro.__await__()
        _last.live = getattr(_last, "live", 0) + 1
        try:
            return (yield from self._steps(inner))
        finally:
            _last.live -= 1
            if not _last.live:
                _last.end = None

    def _steps(self, inner: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
        meter = self.meter
        value: Any = None
        error: BaseException | None = None
        while True:
            # from the end of the last driven step on this thread (the loop's work since is
            # charged here too), else from now; one clock read per step: it is a system call
            before = getattr(_last, "end", None)
            meter._step = time.thread_time() if before is None else before
            try:
                yielded = inner.send(value) if error is None else inner.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                _last.end = end = time.thread_time()
                meter.steps_s += max(0.0, end - meter._step)
                meter._step = None
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as e:  # cancellation and the like: into the inner coroutine
                value, error = None, e
