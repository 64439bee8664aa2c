"""callbench's own CPU time while it runs a conversation, for the harness CPU per request.

:class:`CpuMeter` drives a coroutine step by step and adds, for every step, the CPU time of the
thread that ran it (``time.thread_time``: CPU of this thread only, user and system, not time spent
waiting). Between two steps the coroutine is suspended (waiting for a socket, a timer, another
thread), and whatever the event loop runs meanwhile (other episodes at a concurrency above 1, the
loop's own polling and socket callbacks) is not counted. So the meter holds the CPU that this
conversation's own code spent, however many conversations share the loop: building requests,
the model client's work in the loop (the request body, the HTTP stack, reading and assembling a
stream, parsing the answer, the response cache), the checks on the answer, the backend, the
channel. Work handed to another thread is only counted when it is run through :meth:`CpuMeter.
in_thread` (the voice channel); an embedded local model's computation runs on its own thread and
is the model's, not the harness's.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class CpuMeter:
    """CPU seconds (``time.thread_time``) spent in the coroutines it drove (see the module
    docstring); :attr:`cpu_s` only grows. ``driven``: :meth:`drive` was called (a conversation
    loop that is not driven, such as a deployed candidate's, has no harness CPU to give)."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.driven = False

    def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn(*args)`` (in the worker thread it is run on) and add that thread's CPU time for
        the call to :attr:`cpu_s`. Meant for ``asyncio.to_thread(meter.in_thread, fn, ...)`` from a
        driven coroutine: it is suspended meanwhile, so nothing else adds to this meter."""
        t0 = time.thread_time()
        try:
            return fn(*args)
        finally:
            self.cpu_s += time.thread_time() - t0

    async def drive(self, coro: Awaitable[T]) -> T:
        """Await ``coro``, adding the CPU time of each of its steps to :attr:`cpu_s`. Exceptions,
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
        value: Any = None
        error: BaseException | None = None
        while True:
            t0 = time.thread_time()
            try:
                yielded = inner.send(value) if error is None else inner.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                self.meter.cpu_s += time.thread_time() - t0
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as e:  # cancellation and the like: into the inner coroutine
                value, error = None, e
