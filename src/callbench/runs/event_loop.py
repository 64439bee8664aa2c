"""The event loop callbench's commands run on: uvloop's where it is installed, else asyncio's own.

Why: a run against a streaming provider spends most of the harness's CPU below Python, in the
event loop waking for each streamed chunk (polling the sockets, reading them, calling the
protocol). uvloop (libuv, written in Cython; https://uvloop.readthedocs.io/) does that work in C:
on the 2-core test machine it cut callbench's CPU per candidate request by about 40% at
concurrency 1 (``benchmarks/latency_bench.py``; docs/latency.md, "Harness CPU"). It is a drop-in
``asyncio.AbstractEventLoop`` (the docs' "uvloop.new_event_loop"), so nothing else changes: tasks,
futures, threads, subprocesses and signal handling are asyncio's API.

``CALLBENCH_EVENT_LOOP`` chooses: ``auto`` (the default: uvloop when it imports, else asyncio),
``uvloop`` (an error when it is not installed), ``asyncio`` (the standard library's loop). The run
manifest records the loop that ran each invocation (:func:`describe`), beside the machine.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "CALLBENCH_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")


class EventLoopChoiceError(ValueError):
    """``CALLBENCH_EVENT_LOOP`` names no loop callbench knows, or uvloop is asked for and missing."""


def loop_factory(choice: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the event loop to run on (``asyncio.Runner``'s ``loop_factory``): uvloop's
    ``new_event_loop`` or None (asyncio's default loop). ``choice`` defaults to the environment's
    ``CALLBENCH_EVENT_LOOP`` (``auto`` when unset or empty). Raises :class:`EventLoopChoiceError`
    for another value, or for ``uvloop`` when it cannot be imported."""
    raw = os.environ.get(ENV, "") if choice is None else choice
    name = raw.strip().lower() or "auto"
    if name not in CHOICES:
        raise EventLoopChoiceError(f"{ENV}={raw!r}: expected one of {', '.join(CHOICES)}")
    if name == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as e:  # not installed (uvloop has no Windows build)
        if name == "uvloop":
            raise EventLoopChoiceError(f"{ENV}=uvloop, but uvloop cannot be imported ({e}): "
                                       "pip install uvloop, or unset it") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T], choice: str | None = None) -> T:
    """Run ``main`` to its end on a new loop of :func:`loop_factory` (``choice`` as there) and
    close the loop: ``asyncio.run`` with the chosen loop, Ctrl-C included (``asyncio.Runner``
    cancels the main task and raises ``KeyboardInterrupt``). Raises what ``main`` raises, and
    :class:`EventLoopChoiceError` before starting anything (``main`` is then closed unawaited)."""
    try:
        factory = loop_factory(choice)
    except EventLoopChoiceError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.get_loop().set_exception_handler(_report_loop_error)
        return runner.run(main)


def _report_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: what asyncio reports, less a stop. A stop signal raises
    ``KeyboardInterrupt`` wherever the main thread is (``runs/supervisor.py``), which may be inside a
    task other than the main one (a request handler of ``callbench serve-backend``); that task then
    holds the ``KeyboardInterrupt``, and when it is collected asyncio printed "Task exception was
    never retrieved" with a traceback after a clean stop. That exception is the stop itself, so it
    is not reported; everything else goes to the loop's default handler."""
    if isinstance(context.get("exception"), (KeyboardInterrupt, SystemExit)):
        return
    loop.default_exception_handler(context)


def describe(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """The loop that runs (``loop``, default the running one): ``"uvloop 0.21.0"`` or
    ``"asyncio"`` (the standard library's, any of its loop classes); another library's loop by
    its module's top-level name; ``""`` when no ``loop`` is given and none is running."""
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return ""
    top = type(loop).__module__.split(".")[0]
    if top == "uvloop":
        import uvloop

        return f"uvloop {uvloop.__version__}"
    return top
