"""The one change feed of a server process behind every watch of the Kubernetes-compatible
API: while anyone watches, it reads the jobs changed since its last read (one statement per
period, whatever the number of watches) and hands each change to every watch, which filters
it. An idle watch costs a queue and a waiting task, not a query.

Changes are read in `updated_at` order. A transaction stamps the time before it commits, so a
change may become visible after a later-stamped one: each read looks back `settle_s`, and on
Postgres further, to the start of the oldest transaction still writing (a change it stamped
cannot be older than that; a long transaction, e.g. one waiting on a lock, commits rows
stamped long before), and hands on what it has not handed on yet. A watch drops what is not
newer than what it started from (`api/kube/watch.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.base import utcnow
from volcano_global.db.engine import autocommit
from volcano_global.services.kube import cluster_scoped, store

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LOOKBACK_LIMIT = timedelta(minutes=10)


@dataclass(frozen=True)
class Change:
    # A job's: every column of the job and its queue's name. A queue's or class's
    # (`cluster_scoped.change_row`): its kind, id, updated_at, whether deleted, and the object.
    row: dict[str, Any]
    clusters: list[str]

    @property
    def key(self) -> tuple[uuid.UUID, datetime]:
        return self.row["id"], self.row["updated_at"]

    @functools.cached_property
    def size(self) -> int:
        """About what the change holds, in bytes (its document's JSON): measured once,
        whatever the number of watches it is handed to."""
        document = self.row.get("manifest", self.row.get("object"))
        return len(json.dumps(document, default=str)) + 512


@dataclass(eq=False)
class Subscription:
    """One watch's inbox, bounded in changes and in bytes of their documents. A watch further
    behind (its client reads slower than changes come) is dropped: its inbox emptied at once
    (what it held is freed), then a None that ends the watch, as kube-apiserver closes a watch
    that cannot keep up (the client watches again from its last resourceVersion). A None is
    also how the watch is ended from outside (its token revoked)."""

    max_events: int = 10_000
    max_bytes: int = 8 * 1024 * 1024
    inbox: asyncio.Queue[Change | None] = field(default_factory=asyncio.Queue)
    buffered_bytes: int = 0
    ended: str | None = None  # why the watch must end (dropped, revoked)

    def offer(self, change: Change) -> None:
        if self.ended is not None:
            return
        size = change.size
        if self.inbox.qsize() >= self.max_events or self.buffered_bytes + size > self.max_bytes:
            self.end(
                f"more than {self.max_events} changes or {self.max_bytes} bytes behind "
                "(settings kube.watch_buffer_events, kube.watch_buffer_bytes)"
            )
            return
        self.buffered_bytes += size
        self.inbox.put_nowait(change)

    def end(self, why: str) -> None:
        """Free what the watch holds and wake it to end."""
        if self.ended is not None:
            return
        self.ended = why
        while not self.inbox.empty():
            self.inbox.get_nowait()
        self.buffered_bytes = 0
        self.inbox.put_nowait(None)

    async def next(self) -> Change | None:
        """The next change (None: the watch must end)."""
        change = await self.inbox.get()
        if change is not None:
            self.buffered_bytes -= change.size
        return change


class ChangeFeed:
    """The feed's state between reads; `step` is one read, run by the named loop
    "kube-change-feed" (`background.py`) every `poll_s`."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], *, poll_s: float, settle_s: float
    ) -> None:
        self._sessions = sessions
        self.poll_s = poll_s
        self.settle = timedelta(seconds=settle_s)
        self._subscribers: set[Subscription] = set()
        self._wanted = asyncio.Event()
        self._read = asyncio.Condition()
        self._since: datetime | None = None  # None: start from the newest change at the next read
        self._writing: datetime | None = None  # when the oldest transaction still writing began
        self._handed: set[tuple[uuid.UUID, datetime]] = set()
        self._present: dict[uuid.UUID, tuple[str, str]] = {}  # cluster-scoped objects that exist

    @property
    def watches(self) -> int:
        return len(self._subscribers)

    async def next_read(self) -> None:
        """Wait for the feed's next read to be handed on (a caller knows that what was
        committed before it started waiting is seen by every watch open then)."""
        async with self._read:
            await self._read.wait()

    @contextlib.asynccontextmanager
    async def subscribe(
        self, *, max_events: int = 10_000, max_bytes: int = 8 * 1024 * 1024
    ) -> AsyncIterator[Subscription]:
        subscription = Subscription(max_events=max_events, max_bytes=max_bytes)
        self._subscribers.add(subscription)
        self._wanted.set()
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)

    async def step(self) -> None:
        """One read: wait until someone watches, then hand every watch the changes it has not
        been handed yet. A read that fails leaves the position as it was: the next one reads
        from there (the loop retries after a pause)."""
        if not self._subscribers:
            self._wanted.clear()
            self._since = None  # nobody watched meanwhile: start again from now
            await self._wanted.wait()
        async with self._sessions() as session:
            await autocommit(session)
            since = self._since if self._since is not None else await self._start(session)
            fresh, clusters, start = await self._changes(session, since)
        for row in sorted(fresh, key=lambda r: (r["updated_at"], r["id"])):
            self._handed.add((row["id"], row["updated_at"]))
            since = max(since, row["updated_at"])
            self._publish(Change(row, clusters.get(row["id"], [])))
        self._since = since
        self._handed = {key for key in self._handed if key[1] > start}
        async with self._read:
            self._read.notify_all()

    async def _start(self, session: AsyncSession) -> datetime:
        """Start from the newest change: what watches see from now on."""
        newest = await store.watermark(session)
        present = await cluster_scoped.present_ids(session)
        self._since = _EPOCH + timedelta(microseconds=newest) if newest else utcnow()
        self._handed.clear()
        self._present = present
        return self._since

    async def _changes(
        self, session: AsyncSession, since: datetime
    ) -> tuple[list[dict[str, Any]], dict[uuid.UUID, list[str]], datetime]:
        """The rows changed after `since` not handed on yet, the clusters of each job among
        them, and the time the read looked back to. The feed's state changes only once every
        query has answered."""
        # Asked before the rows are read, and kept for the next read: a writer seen now may
        # commit just after this read, when it no longer shows as writing.
        writing = await _oldest_writer(session)
        start = since - self.settle
        for began in (writing, self._writing):
            if began is not None:  # bounded: a session left open must not cost every read
                start = max(min(start, began - self.settle), since - LOOKBACK_LIMIT)
        rows = await store.changed_since(session, since=start)
        rows += await cluster_scoped.changed_since(session, since=start)
        fresh = [row for row in rows if (row["id"], row["updated_at"]) not in self._handed]
        clusters = await store.clusters_of(session, list({r["id"] for r in fresh}))
        now_present = await cluster_scoped.present_ids(session)
        fresh += [
            cluster_scoped.gone(kind, uid, name, max(utcnow(), since))
            for uid, (kind, name) in self._present.items()
            if uid not in now_present
        ]
        self._present, self._writing = now_present, writing
        return fresh, clusters, start

    def _publish(self, change: Change) -> None:
        for subscription in self._subscribers:
            subscription.offer(change)


async def _oldest_writer(session: AsyncSession) -> datetime | None:
    """When the oldest other transaction that has written something began (Postgres; None
    when there is none, or on SQLite, whose single writer commits in the order it stamps)."""
    if session.get_bind().dialect.name != "postgresql":
        return None
    found = await session.execute(
        text(
            "SELECT min(xact_start) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()"
        )
    )
    return found.scalar_one_or_none()
