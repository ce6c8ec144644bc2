"""Watches as kube-apiserver's watch cache serves them: a bounded history of events per resource
type (a resourceVersion older than what it still holds gets 410 Expired, as an in-stream ERROR
event on HTTP 200 like the cacher, or as an HTTP 410 when asked to), BOOKMARK events for
watches that allow them (every `bookmark_interval_s` and `bookmark_before_deadline_s` before
the watch's timeout, like the cacher's heartbeat and pre-timeout bookmarks), an object leaving
a watch's selector sent as DELETED with the object as it was, and injectable faults.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.k8s_emulator.selectors import Predicate

GVR = tuple[str, str, str]


@dataclass
class Event:
    rv: int
    gvr: GVR
    type: str
    obj: dict[str, Any]
    old: dict[str, Any] | None


_CLOSE = Event(-1, ("", "", ""), "CLOSE", {}, None)


@dataclass
class Watcher:
    gvr: GVR
    matches: Predicate
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)


@dataclass
class WatchFaults:
    """Faults a test injects: the next `silent` watches send their headers and then nothing
    (what the agent sees of a half-open connection or a stuck proxy); `expired_as_http` answers
    a too-old resourceVersion with HTTP 410 instead of an ERROR event."""

    silent: int = 0
    expired_as_http: bool = False


class WatchCache:
    def __init__(
        self,
        *,
        capacity: int,
        start_rv: int,
        bookmark_interval_s: float = 60.0,
        bookmark_before_deadline_s: float = 2.0,
    ) -> None:
        self.capacity = capacity
        self.histories: dict[GVR, deque[Event]] = {}
        self.floor: dict[GVR, int] = {}  # watches from below this get 410
        self.compacted_rv = start_rv
        self.latest_rv = start_rv
        self.watchers: list[Watcher] = []
        self.faults = WatchFaults()
        self.bookmark_interval_s = bookmark_interval_s
        self.bookmark_before_deadline_s = bookmark_before_deadline_s

    def add(self, event: Event) -> None:
        history = self.histories.setdefault(event.gvr, deque())
        history.append(event)
        if len(history) > self.capacity:
            self.floor[event.gvr] = history.popleft().rv
        self.latest_rv = event.rv
        for watcher in self.watchers:
            if watcher.gvr == event.gvr:
                watcher.queue.put_nowait(event)

    def compact(self, rv: int) -> None:
        """etcd compaction: no history before `rv` for any resource type."""
        self.histories.clear()
        self.floor.clear()
        self.compacted_rv = rv

    def end_watches(self) -> None:
        """End every open watch normally, as the server does at a watch's timeout."""
        for watcher in self.watchers:
            watcher.queue.put_nowait(_CLOSE)

    def too_old(self, gvr: GVR, since: int) -> int | None:
        """The oldest version still served when `since` is older than that, else None."""
        floor = max(self.compacted_rv, self.floor.get(gvr, 0))
        return floor if since < floor else None

    async def serve(
        self,
        request: web.Request,
        gvr: GVR,
        matches: Predicate,
        *,
        objects: dict[tuple[str, str], dict[str, Any]],
        kind: str,
        api_version: str,
    ) -> web.StreamResponse:
        query = request.query
        since = query.get("resourceVersion") or "0"
        from_version = since != "0"
        floor = self.too_old(gvr, int(since)) if from_version else None
        expired = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "reason": "Expired",
            "message": f"too old resource version: {since} ({floor})",
            "code": 410,
        }
        if floor is not None and self.faults.expired_as_http:
            return web.json_response(expired, status=410)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        watcher = Watcher(gvr, matches)
        self.watchers.append(watcher)  # before the headers: a client that has them is watching
        try:
            await response.prepare(request)
            await response.write(b"")  # the API server flushes the headers before any event
            if self.faults.silent > 0:
                self.faults.silent -= 1
                while (await watcher.queue.get()) is not _CLOSE:
                    pass
                return response
            if floor is not None:
                await _send(response, "ERROR", expired)
                return response
            await self._stream(
                response,
                watcher,
                since=int(since) if from_version else None,
                objects=objects,
                lasts_s=float(query.get("timeoutSeconds") or 1800),
                bookmarks=query.get("allowWatchBookmarks") in ("1", "true", "True"),
                bookmark={"kind": kind, "apiVersion": api_version},
            )
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watchers.remove(watcher)
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        watcher: Watcher,
        *,
        since: int | None,
        objects: dict[tuple[str, str], dict[str, Any]],
        lasts_s: float,
        bookmarks: bool,
        bookmark: dict[str, Any],
    ) -> None:
        loop = asyncio.get_running_loop()
        if since is None:
            sent = self.latest_rv
            for _, obj in sorted(objects.items()):
                if watcher.matches(obj):
                    await _send(response, "ADDED", obj)
        else:
            sent = since
            for event in list(self.histories.get(watcher.gvr, ())):
                if event.rv > sent:
                    await _deliver(response, event, watcher.matches)
                    sent = event.rv
        deadline = loop.time() + lasts_s
        heartbeat = loop.time() + self.bookmark_interval_s
        pre_timeout = deadline - self.bookmark_before_deadline_s
        while True:
            now = loop.time()
            wake = min(deadline, heartbeat, pre_timeout if pre_timeout > now else deadline)
            if not bookmarks:
                wake = deadline
            try:
                event = await asyncio.wait_for(watcher.queue.get(), timeout=max(wake - now, 0))
            except TimeoutError:
                if loop.time() >= deadline:
                    return
                # Deliver what is queued first: a bookmark promises nothing older is pending.
                while not watcher.queue.empty():
                    event = watcher.queue.get_nowait()
                    if event is _CLOSE:
                        return
                    if event.rv > sent:
                        await _deliver(response, event, watcher.matches)
                        sent = event.rv
                marker = copy.deepcopy(bookmark)
                marker["metadata"] = {"resourceVersion": str(self.latest_rv)}
                await _send(response, "BOOKMARK", marker)
                now = loop.time()
                if now >= heartbeat:
                    heartbeat = now + self.bookmark_interval_s
                if now >= pre_timeout:
                    pre_timeout = deadline  # sent; none again before the end
                continue
            if event is _CLOSE:
                return
            if event.rv > sent:
                await _deliver(response, event, watcher.matches)
                sent = event.rv


async def _deliver(response: web.StreamResponse, event: Event, matches: Predicate) -> None:
    was = event.old is not None and matches(event.old)
    now = event.type != "DELETED" and matches(event.obj)
    if event.type == "DELETED":
        if was:
            await _send(response, "DELETED", event.obj)
    elif was and now:
        await _send(response, "MODIFIED", event.obj)
    elif now:
        await _send(response, "ADDED", event.obj)
    elif was and event.old is not None:
        # It no longer matches the selector: the cacher sends the object as it last matched,
        # at the version of the change.
        gone = copy.deepcopy(event.old)
        gone["metadata"]["resourceVersion"] = str(event.rv)
        await _send(response, "DELETED", gone)


async def _send(response: web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
    await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
