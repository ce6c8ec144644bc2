"""Reading an agent's stream in batches: the messages that arrived while the previous batch
was being handled come out together, so that under load many small deltas become one
transaction instead of queueing one transaction each. Bounded: at most `limit` messages wait
(beyond that gRPC flow control holds the agent back)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.shutdown import cancelling

_END = object()


async def batches(
    requests: AsyncIterator[pb.AgentMessage],
    every_s: float | Callable[[], float],
    *,
    wake: asyncio.Event | None = None,
    limit: int = 256,
) -> AsyncIterator[list[pb.AgentMessage]]:
    """The agent's messages in order, in batches of up to `limit`; an empty batch after every
    `every_s` of silence (a callable: asked before each wait), and at once when `wake` is set
    during a silence (the caller clears it). An error reading the stream is raised after the
    messages before it."""
    silence_s = every_s if callable(every_s) else lambda: every_s
    queue: asyncio.Queue[object] = asyncio.Queue(maxsize=limit)

    async def read() -> None:
        try:
            async for message in requests:
                await queue.put(message)
            await queue.put(_END)
        except Exception as exc:  # the stream broke, or a message did not decode
            if cancelling():  # the stream is being stopped: a full queue would hold it for ever
                raise asyncio.CancelledError from exc
            await queue.put(exc)

    reader = asyncio.create_task(read(), name="agent-stream-reader")
    getter: asyncio.Future[object] | None = None
    waker: asyncio.Future[object] | None = None
    try:
        while True:
            if getter is None:
                getter = asyncio.ensure_future(queue.get())
            if waker is None and wake is not None:
                waker = asyncio.ensure_future(wake.wait())
            waiting = {getter} if waker is None else {getter, waker}
            done, _ = await asyncio.wait(
                waiting, timeout=silence_s(), return_when=asyncio.FIRST_COMPLETED
            )
            if waker in done:
                waker = None
            if getter not in done:
                yield []
                continue
            item, getter = getter.result(), None
            batch: list[pb.AgentMessage] = []
            while isinstance(item, pb.AgentMessage):
                batch.append(item)
                if len(batch) >= limit or queue.empty():
                    item = None
                    break
                item = queue.get_nowait()
            if batch:
                yield batch
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
    finally:
        for pending in (getter, waker):
            if pending is not None:
                pending.cancel()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
