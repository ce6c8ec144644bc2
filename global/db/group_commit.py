"""Group commit: items that arrive while a batch is being written wait for the next batch, and
a batch is written in one transaction. The first item after a quiet spell is written at once;
under load a batch holds what queued during the previous write, so an item waits at most one
write. Each caller learns its own item's result; nothing is reported written that is not
committed.

A batch that fails with an error `alone` says belongs to one item (not, say, the database
going away) is written again one item at a time, so only the item at fault fails. Any other
error fails every caller of the batch (the caller retries)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass
class _Entry(Generic[Item, Result]):
    item: Item
    done: asyncio.Future[Result]


class GroupCommit(Generic[Item, Result]):
    def __init__(
        self,
        write: Callable[[list[Item]], Awaitable[Sequence[Result]]],
        *,
        what: str,
        max_batch: int,
        alone: Callable[[BaseException], bool],
        writers: int = 1,
        weight: Callable[[Item], int] | None = None,
        max_weight: int | None = None,
    ) -> None:
        """`write(items)` writes the items in one transaction and returns a result per item,
        in order; `alone(error)`: whether the error may come from one item's content; `what`
        names the items in the log ("jobs"). Up to `writers` batches are written at once (each
        its own transaction): items queue for the next batch once all of them are busy. With
        `max_weight`, a batch also holds items of at most that total `weight` (at least one
        item)."""
        self._what = what
        self._write_batch = write
        self._max_batch = max_batch
        self._alone = alone
        self._writers = writers
        self._weight = weight
        self._max_weight = max_weight
        self._queue: list[_Entry[Item, Result]] = []
        self._batches: dict[asyncio.Task[None], list[_Entry[Item, Result]]] = {}  # being written
        self._tasks: set[asyncio.Task[None]] = set()  # writers that take more batches

    @property
    def writers(self) -> int:
        return self._writers

    @property
    def waiting(self) -> int:
        """Items queued for the next batch (not one being written)."""
        return len(self._queue)

    @property
    def writing(self) -> int:
        """Items of the batches being written."""
        return sum(len(batch) for batch in self._batches.values())

    async def add(self, item: Item) -> Result:
        """Write `item` in the next batch and return its result; raises what its write raised
        (the item is then not written)."""
        return await self.enqueue(item)

    def enqueue(self, item: Item) -> asyncio.Future[Result]:
        """As `add`, the item queued now: its result's future (shield it to outlive a caller's
        cancellation without wrapping the wait in a task of its own)."""
        entry = _Entry[Item, Result](item, asyncio.get_running_loop().create_future())
        self._queue.append(entry)
        if len(self._tasks) < self._writers:
            # Its own empty context: a writer serves every caller, so it sees none's context
            # variables (the first caller's, copied, would be read as every item's).
            task = asyncio.create_task(self._drain(), context=contextvars.Context())
            self._tasks.add(task)
            task.add_done_callback(self._abandon)
        return entry.done

    async def _drain(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            while self._queue:
                size = self._next_size()
                batch = self._batches[task] = self._queue[:size]
                self._queue = self._queue[size:]
                await self._write(batch)
                del self._batches[task]
        finally:
            self._tasks.discard(task)  # at once: an item added from now on starts a writer

    def _next_size(self) -> int:
        """How many queued items the next batch takes."""
        size = min(len(self._queue), self._max_batch)
        if self._weight is None or self._max_weight is None:
            return size
        total = 0
        for n, entry in enumerate(self._queue[:size]):
            total += self._weight(entry.item)
            if total > self._max_weight:
                return max(n, 1)
        return size

    def _abandon(self, task: asyncio.Task[None]) -> None:
        """A writer was cancelled (shutting down), maybe before it started: no caller of its
        batch may wait for ever, nor of the queue once no writer is left, and the next item
        starts a new writer."""
        self._tasks.discard(task)
        batch = self._batches.pop(task, [])
        if task.cancelled():
            for entry in batch:
                entry.done.cancel()
            if not self._tasks:
                for entry in self._queue:
                    entry.done.cancel()
                self._queue = []

    async def _write(self, batch: list[_Entry[Item, Result]]) -> None:
        try:
            results = await self._write_batch([entry.item for entry in batch])
        except Exception as exc:
            if len(batch) > 1 and self._alone(exc):
                log.info(
                    "a batch of %d %s hit %s: writing them one by one", len(batch), self._what, exc
                )
                for entry in batch:
                    await self._write([entry])
                return
            for entry in batch:
                if not entry.done.done():
                    entry.done.set_exception(exc)
            return
        for entry, result in zip(batch, results, strict=True):
            if not entry.done.done():  # else its caller went away (the result stands all the same)
                entry.done.set_result(result)
