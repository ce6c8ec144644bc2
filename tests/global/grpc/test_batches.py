"""Reading an agent's stream in batches: order kept, silence reported, errors after the
messages before them, the reader stopped when the consumer leaves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.factories import REPLY_S
from volcano_global.grpc.batches import batches
from volcano_global.rpc.v1 import agent_pb2 as pb


def beat(i: int) -> pb.AgentMessage:
    return pb.AgentMessage(heartbeat=pb.Heartbeat(sent_unix_millis=i))


async def test_queued_messages_come_out_together_in_order() -> None:
    async def stream() -> AsyncIterator[pb.AgentMessage]:
        for i in range(10):
            yield beat(i)
        await asyncio.sleep(0.3)  # silence
        yield beat(10)

    seen: list[list[int]] = []
    async for batch in batches(stream(), 0.1, limit=4):
        seen.append([m.heartbeat.sent_unix_millis for m in batch])
        await asyncio.sleep(0.02)  # handling a batch: the next messages queue up meanwhile
    flat = [i for batch in seen for i in batch]
    assert flat == list(range(11))
    assert max(len(b) for b in seen) == 4  # the limit
    assert [] in seen  # silence came out as an empty batch


async def test_an_error_comes_after_the_messages_before_it() -> None:
    async def stream() -> AsyncIterator[pb.AgentMessage]:
        yield beat(1)
        yield beat(2)
        raise ConnectionError("cut")

    seen = []
    with pytest.raises(ConnectionError, match="cut"):
        async for batch in batches(stream(), 1.0):
            seen += [m.heartbeat.sent_unix_millis for m in batch]
    assert seen == [1, 2]


async def test_leaving_early_stops_the_reader() -> None:
    closed = asyncio.Event()

    async def stream() -> AsyncIterator[pb.AgentMessage]:
        try:
            while True:
                yield beat(0)
                await asyncio.sleep(0)
        finally:
            closed.set()

    reader = batches(stream(), 1.0)
    async for _ in reader:
        break
    await reader.aclose()
    await asyncio.wait_for(closed.wait(), timeout=REPLY_S)


async def test_a_wake_during_silence_comes_out_as_an_empty_batch_at_once() -> None:
    """Messages still come out while a wake is pending; a wake in a silence ends it early."""
    wake = asyncio.Event()

    async def stream() -> AsyncIterator[pb.AgentMessage]:
        yield beat(1)
        await asyncio.sleep(0.2)
        wake.set()
        await asyncio.sleep(0.2)
        yield beat(2)

    seen: list[tuple[list[int], float]] = []
    started = asyncio.get_running_loop().time()
    async for batch in batches(stream(), 60, wake=wake):
        seen.append(
            (
                [m.heartbeat.sent_unix_millis for m in batch],
                round(asyncio.get_running_loop().time() - started, 1),
            )
        )
        wake.clear()  # as the stream does before reading its outbox
    assert [b for b, _ in seen] == [[1], [], [2]]
    assert seen[1][1] < 5  # the wake, not the 60 s silence


async def test_the_silence_may_be_asked_before_each_wait() -> None:
    """A stream's tick follows whether commits wake it (a callable `every_s`)."""
    asked: list[float] = []

    def every_s() -> float:
        asked.append(0.05)
        return 0.05

    async def stream() -> AsyncIterator[pb.AgentMessage]:
        await asyncio.sleep(0.4)
        yield beat(1)

    batches_seen = [batch async for batch in batches(stream(), every_s)]
    assert batches_seen[-1] and batches_seen[-1][0].heartbeat.sent_unix_millis == 1
    # an empty batch per silence, each after its own ask; the last wait ended with the message
    assert len(asked) >= 4 and len(batches_seen) == len(asked)
