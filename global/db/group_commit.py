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
    ) -> None:
        """`write(items)` writes the items in one transaction and returns a result per item,
        in order; `alone(error)`: whether the error may come from one item's content; `what`
        names the items in the log ("jobs")."""
        self._what = what
        self._write_batch = write
        self._max_batch = max_batch
        self._alone = alone
        self._queue: list[_Entry[Item, Result]] = []
        self._batch: list[_Entry[Item, Result]] = []  # being written
        self._writing: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Items queued for the next batch (not the one being written)."""
        return len(self._queue)

    @property
    def writing(self) -> int:
        """Items of the batch being written."""
        return len(self._batch) if self._writing is not None else 0

    async def add(self, item: Item) -> Result:
        """Write `item` in the next batch and return its result; raises what its write raised
        (the item is then not written)."""
        entry = _Entry[Item, Result](item, asyncio.get_running_loop().create_future())
        self._queue.append(entry)
        if self._writing is None:
            self._writing = asyncio.create_task(self._drain())
            self._writing.add_done_callback(self._abandon)
        return await entry.done

    async def _drain(self) -> None:
        try:
            while self._queue:
                self._batch = self._queue[: self._max_batch]
                self._queue = self._queue[self._max_batch :]
                await self._write(self._batch)
        finally:
            self._writing = None

    def _abandon(self, task: asyncio.Task[None]) -> None:
        """The writer was cancelled (shutting down), maybe before it started: no caller may
        wait for ever, and the next item starts a new writer."""
        if self._writing is task:
            self._writing = None
        if task.cancelled():
            for entry in self._batch + self._queue:
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
