"""One read for every open agent stream of this process: a periodic check that each of 100
streams made alone every few seconds (its standing, whether dispatch waits for it) is one
transaction for all of them, shared by the streams whose check falls due after it began."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class SharedRead(Generic[Key, Value]):
    def __init__(self) -> None:
        self._began = float("-inf")
        self._read: asyncio.Task[dict[Key, Value]] | None = None

    async def of(
        self,
        key: Key,
        *,
        since: float,
        read_all: Callable[[], Awaitable[dict[Key, Value]]],
        alone: Callable[[], Awaitable[Value]],
    ) -> Value:
        """`key`'s value as read by a read of every open stream (`read_all`) begun after
        `since` (monotonic), begun now if there is none; `alone()` for a key opened after the
        read began. A read that failed is not shared: the next check reads again."""
        if self._read is None or self._began < since or _failed(self._read):
            self._began = time.monotonic()
            self._read = asyncio.create_task(read_all())
        values = await self._read
        if key not in values:
            return await alone()
        return values[key]


def _failed(read: asyncio.Task[Any]) -> bool:
    return read.done() and (read.cancelled() or read.exception() is not None)
