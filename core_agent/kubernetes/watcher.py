"""A Kubernetes watcher in three small functions: an outer loop that reconnects with backoff;
list-then-watch from the listed resourceVersion, listing again on 410; one watch stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from core_agent.kubernetes.adapter import Gone, Kind, KubeApi, Missing
from volcano_global.backoff import Backoff

log = logging.getLogger(__name__)

Store = dict[str, dict[str, Any]]  # "namespace/name" -> object


async def watch_forever(
    api: KubeApi,
    kind: Kind,
    store: Store,
    on_change: Callable[[], None],
    *,
    page_size: int = 500,
    watch_timeout_s: int = 300,
    iterations: int | None = None,
) -> None:
    """Keep `store` equal to the cluster's objects of `kind`. `iterations` bounds the number of
    list-then-watch rounds (tests)."""
    backoff = Backoff(initial=0.2, cap=30.0, jitter=0.5)
    rounds = 0
    while iterations is None or rounds < iterations:
        rounds += 1
        try:
            await list_then_watch(
                api, kind, store, on_change, page_size=page_size, watch_timeout_s=watch_timeout_s
            )
            backoff.reset()
        except Missing:
            # Discovery does not list the type (a 404 on a type it lists is Transient, below):
            # the objects are gone with it. Watch it once it is installed (a CRD added later).
            log.info("%s: resource type not served by this cluster", kind.name)
            store.clear()
            on_change()
            await api.wait_until_served(kind)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # the API server is down, a connection dropped, ...
            delay = backoff.next_delay()
            log.warning("%s watch failed (%s); retrying in %.1f s", kind.name, exc, delay)
            await asyncio.sleep(delay)


async def list_then_watch(
    api: KubeApi,
    kind: Kind,
    store: Store,
    on_change: Callable[[], None],
    *,
    page_size: int,
    watch_timeout_s: int,
) -> None:
    """List every page, replace the store, then watch from the list's resourceVersion until the
    watch times out; on 410 Gone, list again."""
    while True:
        listed: Store = {}
        token: str | None = None
        version = ""
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
        on_change()
        try:
            await stream(
                api, kind, store, on_change, resource_version=version, timeout_s=watch_timeout_s
            )
            return
        except Gone:
            log.info("%s: resourceVersion %s expired; listing again", kind.name, version)


async def stream(
    api: KubeApi,
    kind: Kind,
    store: Store,
    on_change: Callable[[], None],
    *,
    resource_version: str,
    timeout_s: int,
) -> None:
    async for event_type, obj in api.watch(
        kind, resource_version=resource_version, timeout_s=timeout_s
    ):
        if event_type in ("ADDED", "MODIFIED"):
            store[_key(obj)] = obj
        elif event_type == "DELETED":
            store.pop(_key(obj), None)
        else:
            continue  # BOOKMARK
        on_change()


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta['name']}"
