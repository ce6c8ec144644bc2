"""What cancelling a share removes from the member cluster: everything the agent made for the
placement, found by its label rather than remembered (so an agent restarted since finds it
too): the ServiceExports, the Services, the staging Job, then the Volcano Jobs (their pods go
with them). The
agent deletes the Service and ServiceExport itself instead of leaving them to the garbage
collector, which may lag or, for a ServiceExport whose owner was never resolved, not act."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from core_agent.kubernetes.adapter import BATCH_JOBS, Gone, Kind, KubeApi, Missing
from volcano_global.jobspec.members import PLACEMENT_LABEL

log = logging.getLogger(__name__)


class Persist(Protocol):
    """Run a call until it is answered (MemberJobs._persist, for a cancellation)."""

    async def __call__(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any: ...


async def remove_placement(api: KubeApi, pid: str, *, page_size: int, persist: Persist) -> None:
    selector = f"{PLACEMENT_LABEL}={pid}"
    deleters: list[tuple[str, Callable[[str, str], Awaitable[bool]]]] = [
        ("serviceexports", api.delete_service_export),
        ("services", api.delete_service),
        (BATCH_JOBS, api.delete_batch_job),  # a staging copy still running stops
        ("vcjobs", api.delete_volcano_job),
    ]
    for kind, delete in deleters:
        try:
            found = await every(
                api, Kind(kind, label_selector=selector), page_size=page_size, persist=persist
            )
        except Missing:
            continue  # e.g. no Multi-Cluster Services here: nothing of that kind was made
        for namespace, name in found:
            await persist(
                f"deleting {kind} {namespace}/{name}", functools.partial(delete, namespace, name)
            )


async def every(
    api: KubeApi, kind: Kind, *, page_size: int, persist: Persist
) -> list[tuple[str, str]]:
    """(namespace, name) of every object of `kind`, page after page (`limit`/`continue`); a
    continue token that expired (410) starts the list again, as client-go's pager does."""
    while True:
        found: list[tuple[str, str]] = []
        token: str | None = None
        try:
            while True:
                page = await persist(
                    f"listing {kind.name}",
                    functools.partial(api.list_page, kind, limit=page_size, token=token),
                )
                found += [
                    (o["metadata"].get("namespace", ""), o["metadata"]["name"])
                    for o in page.get("items", [])
                ]
                token = page["metadata"].get("continue") or None
                if not token:
                    return found
        except Gone:
            log.info("listing %s: the continue token expired; listing again", kind.name)
