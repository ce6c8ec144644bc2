"""One watch of a kind, as the API server streams it: a JSON object per line (`ADDED`,
`MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`). It takes the process's change feed before reading
what changed since the watch's resourceVersion, so no change falls between the two; a
resourceVersion older than the feed's window ends the watch with a 410 Expired ERROR event
(then the client lists again)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import FastAPI

from volcano_global.api.kube.registry import Kind
from volcano_global.api.kube.tables import table
from volcano_global.db.engine import reading
from volcano_global.services.kube import cluster, store
from volcano_global.services.kube.feed import Change, ChangeFeed
from volcano_global.services.kube.objects import resource_version

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _line(kind_of_event: str, obj: dict[str, Any]) -> bytes:
    return (
        json.dumps({"type": kind_of_event, "object": obj}, separators=(",", ":")).encode() + b"\n"
    )


def expired(version: int) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {version}",
        "reason": "Expired",
        "code": 410,
    }


@dataclass
class Stream:
    app: FastAPI
    kind: Kind
    query: store.ListQuery
    start: int | None  # None: the current objects first, as ADDED
    bookmarks: bool
    timeout_s: float | None
    as_table: bool
    include: str

    def _encode(self, kind_of_event: str, obj: dict[str, Any]) -> bytes:
        if self.as_table and kind_of_event in ("ADDED", "MODIFIED", "DELETED"):
            metadata = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            obj = table(self.kind, [obj], metadata=metadata, include=self.include)
        return _line(kind_of_event, obj)

    def _bookmark(self, version: int) -> bytes:
        obj = {
            "kind": self.kind.kind,
            "apiVersion": self.kind.group_version,
            "metadata": {"resourceVersion": str(version)},
        }
        return _line("BOOKMARK", obj)

    async def _catch_up(self, settings: Any) -> tuple[list[tuple[str, dict[str, Any]]], int] | None:
        """What the client has not seen, and the newest version read; None if expired."""
        adapter = self.kind.adapter
        async with reading(self.app.state.sessions) as session:
            newest = await store.watermark(session)
            if self.start is None:
                items, _ = await adapter.list(session, kind=self.kind, query=_unpaged(self.query))
                return [("ADDED", obj) for obj in items], newest
            window = timedelta(seconds=settings.kube.watch_window_s)
            now = datetime.now(UTC)
            if self.start < newest and _EPOCH + timedelta(microseconds=self.start) < now - window:
                return None
            since = _EPOCH + timedelta(microseconds=self.start)
            rows = await store.changed_since(session, since=since)
            clusters = await store.clusters_of(session, [r["id"] for r in rows])
            # Queues and classes changed since (one deleted in between is not replayed: the
            # rows are gone; a watch kept open sees it through the feed).
            rows += await cluster.changed_since(session, since=since)
        found = []
        for row in rows:
            newest = max(newest, int(resource_version(row["updated_at"])))
            event = adapter.event(self.kind, Change(row, clusters.get(row["id"], [])), self.query)
            if event is not None:
                found.append(event)
        return found, max(newest, self.start)

    async def lines(self) -> AsyncIterator[bytes]:
        settings = self.app.state.settings
        feed: ChangeFeed = self.app.state.kube_feed
        loop = asyncio.get_running_loop()
        async with feed.subscribe() as subscription:
            caught = await self._catch_up(settings)
            if caught is None:
                yield _line("ERROR", expired(self.start or 0))
                return
            events, newest = caught
            floor = newest if self.start is None else self.start
            seen = set()
            for kind_of_event, obj in events:
                seen.add((obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]))
                yield self._encode(kind_of_event, obj)
            timeout = self.timeout_s or settings.kube.watch_timeout_s
            deadline = loop.time() + timeout
            every = settings.kube.bookmark_s
            next_bookmark = loop.time() + every
            while True:
                now = loop.time()
                if now >= deadline:
                    return
                try:
                    change = await asyncio.wait_for(
                        subscription.inbox.get(), min(deadline, next_bookmark) - now
                    )
                except TimeoutError:
                    if self.bookmarks and loop.time() >= next_bookmark:
                        yield self._bookmark(newest)
                    next_bookmark = loop.time() + every
                    continue
                if subscription.overflowed:
                    yield _line("ERROR", expired(newest))
                    return
                version = resource_version(change.row["updated_at"])
                if int(version) <= floor or (str(change.row["id"]), version) in seen:
                    # Read by the catch-up, or older than the watch: the client has it. (A
                    # change committed after the catch-up with an older stamp is lost here;
                    # the feed's look-back hands it to watches that started before it.)
                    continue
                newest = max(newest, int(version))
                event = self.kind.adapter.event(self.kind, change, self.query)
                if event is not None:
                    yield self._encode(*event)


def _unpaged(query: store.ListQuery) -> store.ListQuery:
    return store.ListQuery(
        namespace=query.namespace,
        labels=query.labels,
        fields=query.fields,
        queues=query.queues,
    )
