"""Long loops on the event loop hand it back every few milliseconds: a round builds the rows
of all its starts in one loop with nothing to await, and every request and agent message of
its replica would wait for the whole of it (docs/benchmarks.md, "The leader's stalls"). Pure
asyncio, no I/O."""

from __future__ import annotations

import asyncio
import time

SLICE_S = 0.005  # a loop yields at its next item once it has held the event loop this long


class Turns:
    """`await turns.take()` between the items of a long loop: it yields to the event loop when
    `slice_s` has passed since the last time it did (or since it was made), else returns at
    once, so a short loop costs nothing. An item longer than the slice still holds the loop
    for all of it."""

    def __init__(self, slice_s: float | None = None) -> None:
        self._slice = SLICE_S if slice_s is None else slice_s
        self._since = time.perf_counter()

    async def take(self) -> None:
        if time.perf_counter() - self._since >= self._slice:
            await asyncio.sleep(0)
            self._since = time.perf_counter()
