"""A long loop hands the event loop back once its slice has passed, and not before."""

from __future__ import annotations

import asyncio

from volcano_global.loop_turns import Turns


async def _others_ran(turns: Turns, takes: int) -> int:
    """How many times a task waiting to run got its turn during `takes` takes."""
    ran = 0

    async def other() -> None:
        nonlocal ran
        while True:
            ran += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    try:
        for _ in range(takes):
            await turns.take()
        return ran
    finally:
        task.cancel()


async def test_a_take_yields_once_the_slice_has_passed() -> None:
    assert await _others_ran(Turns(slice_s=0.0), takes=5) == 5


async def test_a_take_within_the_slice_does_not_yield() -> None:
    assert await _others_ran(Turns(slice_s=3600.0), takes=5) == 0
