"""What bounds the memory of lists and watches of the Kubernetes-compatible API: pages read a
few at a time across the process, a list without a limit streamed a page at a time (encoded
in a worker thread), the open watches counted per token, and a streamed response that drops
a client that stops reading."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from volcano_global.services.kube.watches import OpenWatches, WatchLimits

log = logging.getLogger(__name__)

# Pages read and built at once across all lists and watches of the process: what they hold
# in memory while reading is this many pages, whatever the number of callers.
PAGES_AT_ONCE = 4


@dataclass
class PageSize:
    """How many objects the next page reads: as many as fit `budget` bytes by the size of
    the objects read so far (jobs of 1 MB one at a time, small ones up to `most`), starting
    at one: the size of what is stored is not known before it is read."""

    most: int
    budget: int
    rows: int = 0

    def __post_init__(self) -> None:
        self.rows = self.rows or 1

    def measured(self, count: int, size: int) -> None:
        if count:
            self.rows = max(1, min(self.most, self.budget * count // max(size, 1)))


def page_size_of(app: FastAPI) -> PageSize:
    kube = app.state.settings.kube
    return PageSize(kube.list_page_size, kube.list_page_bytes)


def pages_of(app: FastAPI) -> asyncio.Semaphore:
    pages: asyncio.Semaphore | None = getattr(app.state, "kube_pages", None)
    if pages is None:
        pages = app.state.kube_pages = asyncio.Semaphore(PAGES_AT_ONCE)
    return pages


def watches_of(app: FastAPI) -> OpenWatches:
    watches: OpenWatches | None = getattr(app.state, "kube_watches", None)
    if watches is None:
        kube = app.state.settings.kube
        limits = WatchLimits(kube.watches_per_token, kube.watches_total, kube.watch_recheck_s)
        watches = app.state.kube_watches = OpenWatches(app.state.sessions, limits)
    return watches


class BoundedStream(StreamingResponse):
    """A streamed response (a watch, a long list) that ends when its client disconnects,
    even while nothing is sent, and drops a client that takes no data for `send_timeout_s`
    (the connection is closed: its watch ends and its memory is freed). `done` runs when the
    response ends, however it ends."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        send_timeout_s: float,
        done: Callable[[], None] | None = None,
        media_type: str = "application/json",
    ) -> None:
        super().__init__(content, media_type=media_type)
        self.send_timeout_s = send_timeout_s
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = asyncio.create_task(self._stream(send))
        listen = asyncio.create_task(self.listen_for_disconnect(receive))
        try:
            await asyncio.wait({stream, listen}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (stream, listen):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task
            if self.done is not None:
                self.done()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _stream(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            try:
                await asyncio.wait_for(
                    send({"type": "http.response.body", "body": chunk, "more_body": True}),
                    self.send_timeout_s,
                )
            except TimeoutError:
                # The client stopped reading: end without completing the response, so the
                # server closes the connection (a client that reads again sees it end).
                log.info("dropped a client that took nothing for %.0f s", self.send_timeout_s)
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def encoded_items(items: list[dict[str, Any]], *, first: bool) -> bytes:
    """A page of a streamed list's items, comma-joined, in a worker thread."""

    def encode() -> bytes:
        text = ",".join(json.dumps(item, separators=(",", ":")) for item in items)
        return (text if first or not text else "," + text).encode()

    return await asyncio.to_thread(encode) if items else b""
