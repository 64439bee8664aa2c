"""The harness CPU meter (``sim/harness_cpu.py``): CPU of a driven coroutine's own steps, not of
another coroutine sharing the loop, nor of the time it waits; results, errors and cancellation
pass through. CPU figures are compared with CPU burned in known amounts, never with wall-clock
guesses."""

from __future__ import annotations

import asyncio
import time

import pytest

from callbench.sim.harness_cpu import CpuMeter

BURN_S = 0.03


def burn(seconds: float) -> float:
    """Spin until this thread has used ``seconds`` of CPU; returns the CPU actually used."""
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass
    return time.thread_time() - t0


async def busy(steps: int, burned: list[float]) -> str:
    for _ in range(steps):
        burned.append(burn(BURN_S))
        await asyncio.sleep(0.001)
    return "done"


async def idle(steps: int) -> int:
    for _ in range(steps):
        await asyncio.sleep(0.001)
    return steps


def test_a_driven_coroutine_is_charged_its_own_cpu_not_its_neighbours() -> None:
    async def main() -> tuple[CpuMeter, CpuMeter, list[float], list[object]]:
        a, b = CpuMeter(), CpuMeter()
        burned: list[float] = []
        results = await asyncio.gather(a.drive(busy(4, burned)), b.drive(idle(4)))
        return a, b, burned, list(results)

    a, b, burned, results = asyncio.run(main())
    assert results == ["done", 4]
    assert a.driven and b.driven
    assert a.cpu_s >= sum(burned) >= 4 * BURN_S
    # the idle one shares the loop with 120 ms of burning and waits as long: none of it is its own
    assert b.cpu_s < BURN_S / 2 < a.cpu_s, (a.cpu_s, b.cpu_s)
    assert a.reading() == a.cpu_s  # no step in progress


def test_errors_and_cancellation_pass_through_and_the_meter_keeps_what_ran() -> None:
    async def fails() -> None:
        burn(BURN_S)
        await asyncio.sleep(0)
        raise KeyError("inner")

    async def main() -> tuple[CpuMeter, CpuMeter]:
        m = CpuMeter()
        with pytest.raises(KeyError, match="inner"):
            await m.drive(fails())
        c = CpuMeter()
        task = asyncio.ensure_future(c.drive(asyncio.sleep(30)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return m, c

    m, c = asyncio.run(main())
    assert m.cpu_s >= BURN_S
    assert 0.0 <= c.cpu_s < BURN_S


def test_reading_counts_a_step_in_progress_and_work_handed_to_a_thread() -> None:
    async def main() -> tuple[float, float, float]:
        m = CpuMeter()
        seen: list[float] = []

        async def body() -> None:
            burn(BURN_S)
            seen.append(m.reading())  # mid-step: the burn is already counted
            await asyncio.to_thread(m.in_thread, burn, BURN_S)

        await m.drive(body())
        return seen[0], m.cpu_s, m.reading()

    mid, total, reading = asyncio.run(main())
    assert mid >= BURN_S
    assert total >= mid + BURN_S  # the worker thread's burn, through in_thread
    assert reading == total
