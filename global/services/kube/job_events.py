"""A job's event log as core/v1 Events, for `kubectl describe` (it lists `events` with a
fieldSelector on `involvedObject`) and `kubectl get events --field-selector`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Event, Job, Queue
from volcano_global.errors import BadRequest
from volcano_global.services.events import list_events
from volcano_global.services.kube.objects import timestamp

# The kinds whose events are served, with the apiVersion kubectl names them by.
API_VERSIONS = {"Job": "batch.volcano.sh/v1alpha1", "HyperJob": "training.volcano.sh/v1alpha1"}
FIELDS = (
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.kind",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "metadata.namespace",
)
SOURCE = "volcano-global"


@dataclass(frozen=True)
class EventQuery:
    """Which job's events: kubectl describe names the job's name, namespace, kind and uid."""

    namespace: str | None
    name: str | None = None
    kind: str | None = None
    uid: str | None = None

    @property
    def names_a_job(self) -> bool:
        return self.uid is not None or self.name is not None


def parse_query(namespace: str | None, field_selector: str | None) -> EventQuery:
    """The fieldSelector's equalities (`a=b,c==d`); any other field or operator is refused
    naming it, as the API server refuses a field label it does not support."""
    fields: dict[str, str] = {}
    for term in (field_selector or "").split(","):
        if not term.strip():
            continue
        key, equals, value = term.replace("==", "=").partition("=")
        key = key.strip()  # `a!=b` leaves `a!`: not a field
        if key not in FIELDS or not equals:
            raise BadRequest.one(
                "fieldSelector",
                f"{term[:80]!r}: events take only equalities on {', '.join(FIELDS)}",
            )
        fields[key] = value.strip()
    wanted_namespace = fields.get("involvedObject.namespace") or fields.get("metadata.namespace")
    if namespace and wanted_namespace and wanted_namespace != namespace:
        return EventQuery(namespace=namespace)  # two namespaces: names no job
    return EventQuery(
        namespace=namespace or wanted_namespace,
        name=fields.get("involvedObject.name"),
        kind=fields.get("involvedObject.kind"),
        uid=fields.get("involvedObject.uid"),
    )


async def job_events(
    session: AsyncSession, *, query: EventQuery, queues: tuple[str, ...] | None, limit: int
) -> list[dict[str, Any]]:
    """The events of the job the query names (the newest live job of the name, or the one of
    the uid), oldest first, as core/v1 Events; none when it names no job the caller sees."""
    if not query.names_a_job or (query.kind is not None and query.kind not in API_VERSIONS):
        return []
    statement = select(Job.id, Job.name, Job.namespace, Job.kind).join(
        Queue, Queue.id == Job.queue_id
    )
    if query.uid is not None:
        try:
            statement = statement.where(Job.id == uuid.UUID(query.uid))
        except ValueError:
            return []
    else:
        statement = statement.where(Job.deleted_at.is_(None))
    for column, value in ((Job.name, query.name), (Job.namespace, query.namespace)):
        if value is not None:
            statement = statement.where(column == value)
    if query.kind is not None:
        statement = statement.where(Job.kind == query.kind)
    if queues is not None:
        statement = statement.where(Queue.name.in_(queues))
    statement = statement.order_by(Job.submitted_at.desc()).limit(1)
    job = (await session.execute(statement)).mappings().one_or_none()
    if job is None:
        return []
    rows = await list_events(session, job_id=job["id"], limit=limit)
    return [event_object(job, row) for row in reversed(rows)]


def event_object(job: Mapping[str, Any], event: Event) -> dict[str, Any]:
    kind = job["kind"]
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": f"{job['name']}.{event.id.hex[:16]}",
            "namespace": job["namespace"],
            "uid": str(event.id),
            "creationTimestamp": timestamp(event.first_seen_at),
        },
        "involvedObject": {
            "kind": kind,
            "apiVersion": API_VERSIONS.get(kind, ""),
            "namespace": job["namespace"],
            "name": job["name"],
            "uid": str(job["id"]),
        },
        "reason": event.reason,
        "message": event.message,
        "type": event.type.value,
        "count": event.count,
        "firstTimestamp": timestamp(event.first_seen_at),
        "lastTimestamp": timestamp(event.last_seen_at),
        "source": {"component": SOURCE},
        "reportingComponent": SOURCE,
    }
