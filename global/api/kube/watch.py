"""One watch of a kind, as the API server streams it: a JSON object per line (`ADDED`,
`MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`). It takes the process's change feed before reading
what changed since the watch's resourceVersion, so no change falls between the two; a
resourceVersion older than the feed's window ends the watch with a 410 Expired ERROR event
(then the client lists again). Its catch-up is read and encoded a page at a time; it ends at
its (capped) timeout, when it falls too far behind its client, or when its token no longer
stands (docs/kubectl.md "Watches" and "Bounds")."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import FastAPI, Request

from volcano_global.api.kube.paging import (
    BoundedStream,
    page_size_of,
    pages_of,
    watches_of,
)
from volcano_global.api.kube.registry import Kind
from volcano_global.api.kube.tables import table, wants_table
from volcano_global.db.engine import reading
from volcano_global.services.kube import cluster_scoped, store
from volcano_global.services.kube.feed import Change, ChangeFeed, Subscription
from volcano_global.services.kube.objects import parse_resource_version, resource_version
from volcano_global.services.kube.watches import Ticket
from volcano_global.services.tenancy.tokens import configured_admin, hash_token

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Events = list[tuple[str, dict[str, Any]]]


def _line(kind_of_event: str, obj: dict[str, Any]) -> bytes:
    return (
        json.dumps({"type": kind_of_event, "object": obj}, separators=(",", ":")).encode() + b"\n"
    )


def expired_status(version: int) -> dict[str, Any]:
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
    as_table: bool
    include: str
    timeout_s: float
    ticket: Ticket | None = None

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

    def _page(self, events: Events) -> bytes:
        return b"".join(self._encode(*event) for event in events)

    async def _encoded(self, events: Events) -> bytes:
        """A page's lines, encoded in a worker thread (a page may be megabytes of JSON)."""
        return await asyncio.to_thread(self._page, events) if events else b""

    async def _current(self, query: store.ListQuery) -> tuple[Events, store.ListQuery | None]:
        """One page of the current objects as ADDED, and the query of the next page (None
        after the last). Each page is read in its own session, so a watch holds one page
        whatever the number of objects."""
        async with pages_of(self.app), reading(self.app.state.sessions) as session:
            items, token = await self.kind.adapter.list(session, kind=self.kind, query=query)
        follow = dataclasses.replace(query, continue_token=token) if token else None
        return [("ADDED", obj) for obj in items], follow

    async def _changes(
        self, since: datetime, after: tuple[Any, Any] | None, page_size: int
    ) -> tuple[Events, tuple[Any, Any] | None]:
        """One page of what changed after `since`, oldest first, from the (updated_at, id)
        key `after`, and the key of the next page (None after the last). The queues and
        classes come with the last page (tens of rows; one deleted in between is not
        replayed, the rows are gone: a watch kept open sees it through the feed)."""
        async with pages_of(self.app), reading(self.app.state.sessions) as session:
            rows = await store.changed_page(session, since=since, after=after, limit=page_size)
            clusters = await store.clusters_of(session, [r["id"] for r in rows])
            follow = (rows[-1]["updated_at"], rows[-1]["id"]) if len(rows) == page_size else None
            if follow is None:
                rows += await cluster_scoped.changed_since(session, since=since)
        return self._events(rows, clusters), follow

    async def _next_page(self, cursor: Any, rows: int) -> tuple[Events, Any]:
        """One page of what the client has not seen (the current objects from a list
        `ListQuery` cursor, the changes after a resourceVersion from a `(since, after)` one)
        and the cursor of the next page (None after the last). A plain call, not a
        generator: nothing of a page is held while the client takes it."""
        if isinstance(cursor, store.ListQuery):
            return await self._current(dataclasses.replace(cursor, limit=rows))
        since, after = cursor
        events, after = await self._changes(since, after, rows)
        return events, (since, after) if after is not None else None

    def _events(self, rows: list[dict[str, Any]], clusters: dict[Any, list[str]]) -> Events:
        found = []
        for row in rows:
            event = self.kind.adapter.event(
                self.kind, Change(row, clusters.get(row["id"], [])), self.query
            )
            if event is not None:
                found.append(event)
        return found

    async def _expired(self, settings: Any) -> tuple[bool, int]:
        """Whether the watch's resourceVersion is older than the window, with changes since;
        and the newest version now."""
        async with reading(self.app.state.sessions) as session:
            newest = await store.watermark(session)
        if self.start is None:
            return False, newest
        window = timedelta(seconds=settings.kube.watch_window_s)
        old = _EPOCH + timedelta(microseconds=self.start) < datetime.now(UTC) - window
        return self.start < newest and old, newest

    async def lines(self) -> AsyncIterator[bytes]:
        settings = self.app.state.settings
        feed: ChangeFeed = self.app.state.kube_feed
        kube = settings.kube
        async with feed.subscribe(
            max_events=kube.watch_buffer_events, max_bytes=kube.watch_buffer_bytes
        ) as subscription:
            if self.ticket is not None:
                self.ticket.subscription = subscription
            expired, newest = await self._expired(settings)
            if expired:
                yield _line("ERROR", expired_status(self.start or 0))
                return
            floor = newest if self.start is None else self.start
            seen: set[tuple[str, str]] = set()
            pages = page_size_of(self.app)
            cursor: Any = (
                dataclasses.replace(self.query, continue_token=None)
                if self.start is None
                else (_EPOCH + timedelta(microseconds=self.start), None)
            )
            while cursor is not None:
                events, cursor = await self._next_page(cursor, pages.rows)
                for _, obj in events:
                    version = obj["metadata"]["resourceVersion"]
                    newest = max(newest, int(version))
                    if int(version) > floor:  # changed during the catch-up: the feed has it too
                        seen.add((obj["metadata"]["uid"], version))
                chunk = await self._encoded(events)
                pages.measured(len(events), len(chunk))
                del events  # only the encoded page is held while the client takes it
                yield chunk
                if subscription.ended is not None:
                    return
            async for line in self._follow(subscription, floor, newest, seen):
                yield line

    async def _follow(
        self, subscription: Subscription, floor: int, newest: int, seen: set[tuple[str, str]]
    ) -> AsyncIterator[bytes]:
        """The feed's changes the client has not seen, until the timeout, a drop or a
        revocation (the stream then ends, as kube-apiserver ends a watch)."""
        settings = self.app.state.settings
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        every = settings.kube.bookmark_s
        next_bookmark = loop.time() + every
        while True:
            now = loop.time()
            if now >= deadline:
                return
            try:
                async with asyncio.timeout(min(deadline, next_bookmark) - now):
                    change = await subscription.next()
            except TimeoutError:
                if self.bookmarks and loop.time() >= next_bookmark:
                    yield self._bookmark(newest)
                next_bookmark = loop.time() + every
                continue
            if change is None:
                log.info("a watch of %s ended: %s", self.kind.plural, subscription.ended)
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


def timeout_of(requested: str | None, kube: Any) -> float:
    """The watch's timeout: `timeoutSeconds` up to `kube.watch_timeout_max_s` (kube-apiserver
    takes any value as given; a watch here ends at the cap and the client watches again),
    else `kube.watch_timeout_s`."""
    if requested and requested.isdigit() and int(requested) > 0:
        return min(float(requested[:12]), kube.watch_timeout_max_s)
    return float(kube.watch_timeout_s)


def _token_of(request: Request) -> tuple[str, bool]:
    """The caller's token as the open watches count it (its hash), and whether it is a
    stored token (re-checked while it watches) rather than the configured admin token."""
    _, _, token = request.headers.get("authorization", "").partition(" ")
    settings = request.app.state.settings
    admin = settings.admin_token.get_secret_value() if settings.admin_token else None
    return hash_token(token.strip()), configured_admin(token.strip(), admin) is None


def open_watch(request: Request, kind: Kind, query: store.ListQuery) -> BoundedStream:
    """Admit one more watch of the caller's token (429 past the limits) and stream it."""
    params = request.query_params
    kube = request.app.state.settings.kube
    version = params.get("resourceVersion") or "0"
    start = None if version == "0" else parse_resource_version(version)
    watches = watches_of(request.app)
    key, checked = _token_of(request)
    ticket = watches.admit(key, checked=checked)
    stream = Stream(
        app=request.app,
        kind=kind,
        query=query,
        start=start,
        bookmarks=params.get("allowWatchBookmarks") in ("true", "1", "True"),
        as_table=wants_table(request.headers.get("accept", "")),
        include=params.get("includeObject", "Metadata"),
        timeout_s=timeout_of(params.get("timeoutSeconds"), kube),
        ticket=ticket,
    )
    return BoundedStream(
        stream.lines(),
        send_timeout_s=kube.watch_send_timeout_s,
        done=lambda: watches.release(ticket),
    )
