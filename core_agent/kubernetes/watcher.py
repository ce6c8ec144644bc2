"""A Kubernetes watcher as client-go's reflector, in three small functions: an outer loop that
lists again, with backoff, when a list fails; list-then-watch, which watches from the listed
resourceVersion and, whenever a watch ends (the server's timeout, a dropped or silent
connection, a refused request), watches again from the last version it saw (an event's or a
BOOKMARK's), listing again only on 410 Gone; one watch stream.

Where it differs from client-go: after a watch that failed (rather than timed out) the
reflector lists again, from its watch cache; this watcher watches again from the last version
and lists only if that version has expired, so a network blip costs no list of 50,000 pods."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from core_agent.kubernetes.adapter import Gone, Kind, KubeApi, Missing, Transient
from volcano_global.backoff import Backoff

log = logging.getLogger(__name__)

Store = dict[str, dict[str, Any]]  # "namespace/name" -> object

# A watch that ends this soon with nothing in it was not the server's timeout (client-go's
# "very short watch"): wait the backoff before watching again rather than spin.
SHORT_WATCH_S = 1.0


@dataclass
class Progress:
    """Where a watcher is (the version it would watch from) and what it has cost so far."""

    version: str = ""
    lists: int = 0
    watches: int = 0
    events: int = 0


async def watch_forever(
    api: KubeApi,
    kind: Kind,
    store: Store,
    on_change: Callable[[], None],
    *,
    page_size: int = 500,
    watch_timeout_s: int = 300,
    progress: Progress | None = None,
    watches: int | None = None,
    rng: random.Random | None = None,
) -> None:
    """Keep `store` equal to the cluster's objects of `kind`. Each watch asks the server to end
    it after between `watch_timeout_s` and twice that, at random (client-go's minWatchTimeout,
    300 s, so that watchers started together do not come back together). `watches` bounds the
    number of watch requests (tests)."""
    progress = progress or Progress()
    backoff = Backoff(initial=0.2, cap=30.0, jitter=0.5)
    while True:
        try:
            await list_then_watch(
                api,
                kind,
                store,
                on_change,
                page_size=page_size,
                watch_timeout_s=watch_timeout_s,
                progress=progress,
                watches=watches,
                rng=rng,
            )
            return  # `watches` ran out
        except Missing:
            # Discovery does not list the type (a 404 on a type it lists is Transient, below):
            # the objects are gone with it. Watch it once it is installed (a CRD added later).
            log.info("%s: resource type not served by this cluster", kind.name)
            store.clear()
            on_change()
            await api.wait_until_served(kind)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # the list failed: the API server is down, ...
            delay = _delay(backoff, exc)
            log.warning("%s list failed (%s); retrying in %.1f s", kind.name, exc, delay)
            await asyncio.sleep(delay)


async def list_then_watch(
    api: KubeApi,
    kind: Kind,
    store: Store,
    on_change: Callable[[], None],
    *,
    page_size: int,
    watch_timeout_s: int,
    progress: Progress,
    watches: int | None = None,
    rng: random.Random | None = None,
) -> None:
    """List every page into the store, then watch from the list's version and from each last
    seen version after it; list again only when the server says that version is gone (410).
    Returns only once `watches` watch requests have been made."""
    uniform = (rng or random).random
    loop = asyncio.get_running_loop()
    backoff = Backoff(initial=0.2, cap=30.0, jitter=0.5)
    await _relist(api, kind, store, on_change, page_size=page_size, progress=progress)
    while watches is None or progress.watches < watches:
        started, seen = loop.time(), progress.events
        try:
            await stream(
                api,
                kind,
                store,
                on_change,
                progress=progress,
                timeout_s=int(watch_timeout_s * (1 + uniform())),
            )
        except Gone:
            log.info("%s: resourceVersion %s expired; listing again", kind.name, progress.version)
            await _relist(api, kind, store, on_change, page_size=page_size, progress=progress)
            continue
        except (Missing, asyncio.CancelledError):
            raise
        except Exception as exc:  # dropped, silent past its timeout, refused, 429, 5xx
            delay = _delay(backoff, exc)
            log.warning(
                "%s watch from %s ended with %r; watching again in %.1f s",
                kind.name,
                progress.version,
                exc,
                delay,
            )
            await asyncio.sleep(delay)
            continue
        if progress.events == seen and loop.time() - started < SHORT_WATCH_S:
            await asyncio.sleep(backoff.next_delay())
        else:
            backoff.reset()


async def _relist(
    api: KubeApi,
    kind: Kind,
    store: Store,
    on_change: Callable[[], None],
    *,
    page_size: int,
    progress: Progress,
) -> None:
    listed: Store = {}
    token: str | None = None
    version = ""
    progress.lists += 1
    while True:
        page = await api.list_page(kind, limit=page_size, token=token)
        version = version or page["metadata"].get("resourceVersion", "")
        for obj in page.get("items", []):
            listed[_key(obj)] = obj
        token = page["metadata"].get("continue") or None
        if not token:
            break
    store.clear()
    store.update(listed)
    progress.version = version
    on_change()


async def stream(
    api: KubeApi,
    kind: Kind,
    store: Store,
    on_change: Callable[[], None],
    *,
    progress: Progress,
    timeout_s: int,
) -> None:
    """One watch from `progress.version`, which follows every event, bookmarks included."""
    progress.watches += 1
    events = api.watch(kind, resource_version=progress.version, timeout_s=timeout_s)
    async with aclosing(events):  # a watch left midway closes its connection now
        async for event_type, obj in events:
            progress.events += 1
            if event_type in ("ADDED", "MODIFIED"):
                store[_key(obj)] = obj
                on_change()
            elif event_type == "DELETED":
                store.pop(_key(obj), None)
                on_change()
            version = obj.get("metadata", {}).get("resourceVersion")
            if version:
                progress.version = version


def _delay(backoff: Backoff, exc: Exception) -> float:
    """The backoff's next delay, or longer when the server said when to come back (429)."""
    retry_after = exc.retry_after if isinstance(exc, Transient) else None
    return max(backoff.next_delay(), retry_after or 0.0)


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta['name']}"
