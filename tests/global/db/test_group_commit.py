"""Group commit on its own: what arrives during a write goes in the next batch together, each
caller gets its own item's result, an error that belongs to one item fails only that item, and
any other error fails the whole batch."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from tests.factories import REPLY_S
from volcano_global.db.group_commit import GroupCommit


class Bad(Exception):
    pass


def writer(
    batches: list[list[int]], *, fail: Exception | None = None, writers: int = 1
) -> GroupCommit[int, int]:
    async def write(items: list[int]) -> list[int]:
        batches.append(items)
        await asyncio.sleep(0.01)  # a transaction's round trips
        if fail is not None:
            raise fail
        if 13 in items:
            raise Bad("13 cannot be written")
        return [i * 10 for i in items]

    return GroupCommit(
        write, what="numbers", max_batch=4, alone=lambda e: isinstance(e, Bad), writers=writers
    )


async def test_items_that_arrive_during_a_write_share_the_next_batch() -> None:
    batches: list[list[int]] = []
    group = writer(batches)
    first = asyncio.create_task(group.add(0))
    await asyncio.sleep(0.001)  # the first is being written alone
    rest = [asyncio.create_task(group.add(i)) for i in range(1, 7)]
    assert await first == 0
    assert await asyncio.gather(*rest) == [10, 20, 30, 40, 50, 60]
    assert batches == [[0], [1, 2, 3, 4], [5, 6]]  # at most max_batch per write


async def test_with_two_writers_items_queue_once_both_are_busy() -> None:
    """A second batch is written while the first one is (its transaction waits on the
    database, not on the first); what arrives while both are busy shares the next."""
    batches: list[list[int]] = []
    group = writer(batches, writers=2)
    first = asyncio.create_task(group.add(0))
    await asyncio.sleep(0.001)
    second = asyncio.create_task(group.add(1))
    await asyncio.sleep(0.001)
    assert (group.writing, group.waiting) == (2, 0)
    rest = [asyncio.create_task(group.add(i)) for i in range(2, 8)]
    await asyncio.sleep(0.001)
    assert group.waiting == 6
    assert await asyncio.gather(first, second, *rest) == [i * 10 for i in range(8)]
    assert batches == [[0], [1], [2, 3, 4, 5], [6, 7]]
    assert (group.writing, group.waiting) == (0, 0)


async def test_a_batch_holds_at_most_its_weight() -> None:
    batches: list[list[int]] = []

    async def write(items: list[int]) -> list[int]:
        batches.append(items)
        await asyncio.sleep(0.01)
        return items

    group = GroupCommit(
        write, what="numbers", max_batch=4, alone=lambda e: False, weight=int, max_weight=10
    )
    first = asyncio.create_task(group.add(1))
    await asyncio.sleep(0.001)
    rest = [asyncio.create_task(group.add(i)) for i in (3, 3, 3, 3, 20, 2)]
    await asyncio.gather(first, *rest)
    assert batches == [[1], [3, 3, 3], [3], [20], [2]]  # one item heavier than a batch: alone


async def test_an_error_of_one_item_fails_that_item_alone() -> None:
    batches: list[list[int]] = []
    group = writer(batches)
    results = await asyncio.gather(*(group.add(i) for i in (12, 13, 14)), return_exceptions=True)
    assert results[0] == 120
    assert results[2] == 140
    assert isinstance(results[1], Bad)
    assert batches == [[12, 13, 14], [12], [13], [14]]


async def test_any_other_error_fails_every_caller_of_the_batch() -> None:
    batches: list[list[int]] = []
    group = writer(batches, fail=ConnectionError("database went away"))
    results = await asyncio.gather(*(group.add(i) for i in (1, 2)), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    assert batches == [[1, 2]]  # not retried one by one: the callers retry


async def test_a_writer_cancelled_before_it_ran_leaves_no_caller_waiting_and_is_replaced() -> None:
    batches: list[list[int]] = []
    group = writer(batches)
    callers = [asyncio.create_task(group.add(i)) for i in range(3)]
    await asyncio.sleep(0)  # the callers queue; the writer task is created, not yet run
    # As the event loop does on shutdown: every other task is cancelled (the writer only).
    others = asyncio.all_tasks() - {asyncio.current_task(), *callers}
    assert len(others) == 1
    others.pop().cancel()
    done, pending = await asyncio.wait(callers, timeout=5)
    assert not pending
    assert all(task.cancelled() for task in done)
    assert batches == []  # nothing was written
    assert await asyncio.wait_for(group.add(5), timeout=REPLY_S) == 50


async def test_a_writer_cancelled_in_a_write_leaves_no_caller_waiting_and_is_replaced() -> None:
    batches: list[list[int]] = []
    cut = asyncio.Event()

    async def write(items: list[int]) -> list[int]:
        batches.append(items)
        if not cut.is_set():  # shutting down in the middle of the first write
            cut.set()
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
        await asyncio.sleep(0.01)
        return [i * 10 for i in items]

    group = GroupCommit(write, what="numbers", max_batch=4, alone=lambda e: False)
    callers = [asyncio.create_task(group.add(i)) for i in range(6)]
    done, pending = await asyncio.wait(callers, timeout=5)
    assert not pending
    assert all(task.cancelled() for task in done)  # the batch written and the one queued
    assert batches == [[0, 1, 2, 3]]
    assert await asyncio.wait_for(group.add(5), timeout=REPLY_S) == 50


@pytest.mark.parametrize("size", [1, 4, 9])
async def test_every_item_is_written_once_in_arrival_order(size: int) -> None:
    batches: list[list[int]] = []
    group = writer(batches)
    assert await asyncio.gather(*(group.add(i) for i in range(size))) == [
        i * 10 for i in range(size)
    ]
    assert [i for b in batches for i in b] == list(range(size))


async def test_a_write_does_not_see_its_first_callers_context() -> None:
    caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")
    seen = []

    async def write(items: list[int]) -> list[int]:
        seen.append(caller.get())
        return items

    group = GroupCommit(write, what="numbers", max_batch=4, alone=lambda e: False)

    async def add(name: str, item: int) -> int:
        caller.set(name)  # e.g. a stream's guard: the batch's items are other callers' too
        return await group.add(item)

    assert await asyncio.gather(add("first", 1), add("second", 2)) == [1, 2]
    assert seen == ["none"]  # one batch, of both callers
