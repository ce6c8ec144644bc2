"""core/v1 `events` under /k8s: a job's event log, which `kubectl describe` lists with a
fieldSelector on `involvedObject` (its `Events:` section)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from volcano_global.api.deps import Reader, Session
from volcano_global.api.kube.registry import PREFIX
from volcano_global.services.kube.job_events import job_events, parse_query

router = APIRouter(prefix=PREFIX, tags=["kubernetes"], include_in_schema=False)
EVENTS_RESOURCE = {
    "name": "events",
    "singularName": "event",
    "namespaced": True,
    "kind": "Event",
    "verbs": ["list"],
    "shortNames": ["ev"],
}
_MAX_EVENTS = 1000  # kubectl describe asks for pages of 500; one page holds a job's log


@router.get("/api/v1/events")
async def all_events(request: Request, session: Session, caller: Reader) -> dict[str, Any]:
    return await _list(request, session, caller, namespace=None)


@router.get("/api/v1/namespaces/{namespace}/events")
async def namespace_events(
    namespace: str, request: Request, session: Session, caller: Reader
) -> dict[str, Any]:
    return await _list(request, session, caller, namespace=namespace)


async def _list(
    request: Request, session: Session, caller: Reader, *, namespace: str | None
) -> dict[str, Any]:
    """The events of the job the fieldSelector names; an empty list without one (the
    Global keeps no other objects' events)."""
    query = parse_query(namespace, request.query_params.get("fieldSelector"))
    items = await job_events(
        session, query=query, queues=caller.visible_queues(), limit=_MAX_EVENTS
    )
    return {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items}
