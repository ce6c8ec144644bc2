"""The cluster-scoped kinds of the Kubernetes-compatible API: Volcano Queues and Kubernetes
PriorityClasses as the objects kubectl reads, read from their tables. Both tables are small
(tens of rows), so a list reads them whole and pages in name order, and the change feed finds
a deleted one by the ids that are gone (these rows are deleted, not marked)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import PriorityClassRow, Queue
from volcano_global.errors import Invalid
from volcano_global.jobspec.priority_classes import API_VERSION as PC_API_VERSION
from volcano_global.jobspec.priority_classes import KIND as PC_KIND
from volcano_global.jobspec.queue_document import API_VERSION as QUEUE_API_VERSION
from volcano_global.services.kube.objects import resource_version, timestamp
from volcano_global.services.kube.selectors import Selector
from volcano_global.services.tenancy import queues as queue_service
from volcano_global.services.tenancy.queue_shares import current_shares

QUEUE = "Queue"
PRIORITY_CLASS = PC_KIND


@dataclass(frozen=True)
class ClusterScopedQuery:
    labels: Selector
    fields: Selector
    names: tuple[str, ...] | None = None  # a queue user's queues; None: any
    limit: int | None = None
    continue_token: str | None = None


def _metadata(row: Queue | PriorityClassRow) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": row.name,
        "uid": str(row.id),
        "resourceVersion": resource_version(row.updated_at),
        "generation": 1,
        "creationTimestamp": timestamp(row.created_at),
    }
    if row.labels:
        metadata["labels"] = dict(row.labels)
    if row.annotations:
        metadata["annotations"] = dict(row.annotations)
    return metadata


async def queue_objects(session: AsyncSession, rows: list[Queue]) -> list[dict[str, Any]]:
    """Queues with Volcano's status: state, jobs by phase as the Global knows them (pending,
    running: admitted and not finished), and the GPUs allocated and deserved now."""
    if not rows:
        return []
    usage = await queue_service.queue_usage(session, queue_ids=[q.id for q in rows])
    shares = await current_shares(session)
    out = []
    for queue in rows:
        used = usage.get(queue.id, queue_service.QueueUsage())
        status: dict[str, Any] = {
            "pending": used.pending_jobs,
            "running": used.active_jobs - used.pending_jobs,
            "allocated": {"nvidia.com/gpu": str(used.allocated_gpus)},
        }
        share = shares.get(queue.name)
        if share is not None:
            status["deservedGpus"] = share.deserved
        document = queue_service.document_of(queue, status)
        document["metadata"] = _metadata(queue)
        out.append(document)
    return out


def priority_class_object(row: PriorityClassRow) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": PC_API_VERSION,
        "kind": PC_KIND,
        "metadata": _metadata(row),
        "value": row.value,
        "preemptionPolicy": row.preemption_policy,
    }
    if row.global_default:
        document["globalDefault"] = True
    if row.description:
        document["description"] = row.description
    return document


def matches(obj: Mapping[str, Any], query: ClusterScopedQuery) -> bool:
    metadata = obj["metadata"]
    return (
        (query.names is None or metadata["name"] in query.names)
        and query.labels.matches(metadata.get("labels") or {})
        and query.fields.matches({"metadata.name": metadata["name"]})
    )


def page(
    objects: list[dict[str, Any]], query: ClusterScopedQuery
) -> tuple[list[dict[str, Any]], str | None]:
    """The matching objects after the continue token's name, `limit` of them, and the token
    of the next page (None on the last)."""
    after = _decode(query.continue_token) if query.continue_token else None
    found = [
        o
        for o in sorted(objects, key=lambda o: o["metadata"]["name"])
        if (after is None or o["metadata"]["name"] > after) and matches(o, query)
    ]
    if query.limit is None or len(found) <= query.limit:
        return found, None
    shown = found[: query.limit]
    return shown, base64.urlsafe_b64encode(shown[-1]["metadata"]["name"].encode()).decode()


def _decode(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise Invalid.one("continue", "not a continue token of this server") from exc


async def list_queues(session: AsyncSession) -> list[dict[str, Any]]:
    return await queue_objects(session, await queue_service.list_queues(session))


async def list_priority_classes(session: AsyncSession) -> list[dict[str, Any]]:
    rows = await session.execute(select(PriorityClassRow).order_by(PriorityClassRow.name))
    return [priority_class_object(r) for r in rows.scalars()]


async def watermark(session: AsyncSession) -> datetime | None:
    """The newest change of a queue or a class."""
    newest = [
        (await session.execute(select(func.max(table.updated_at)))).scalar_one_or_none()
        for table in (Queue, PriorityClassRow)
    ]
    present = [n for n in newest if n is not None]
    return max(present) if present else None


def change_row(
    kind: str, obj: dict[str, Any], updated_at: datetime, *, deleted: bool = False
) -> dict[str, Any]:
    """A change feed row for a queue or a class: the object as kubectl sees it, built when it
    is read (the watches' filters are synchronous)."""
    return {
        "kind": kind,
        "id": uuid.UUID(obj["metadata"]["uid"]),
        "updated_at": updated_at,
        "deleted": deleted,
        "object": obj,
    }


async def changed_since(session: AsyncSession, *, since: datetime) -> list[dict[str, Any]]:
    """Queues and classes changed after `since`, as change rows, oldest first."""
    queues = list((await session.execute(select(Queue).where(Queue.updated_at > since))).scalars())
    classes = list(
        (
            await session.execute(
                select(PriorityClassRow).where(PriorityClassRow.updated_at > since)
            )
        ).scalars()
    )
    found = [
        change_row(QUEUE, obj, q.updated_at)
        for q, obj in zip(queues, await queue_objects(session, queues), strict=True)
    ]
    found += [change_row(PC_KIND, priority_class_object(c), c.updated_at) for c in classes]
    return sorted(found, key=lambda r: (r["updated_at"], r["id"]))


async def present_ids(session: AsyncSession) -> dict[uuid.UUID, tuple[str, str]]:
    """Every queue's and class's id, with its kind and name: a delete is an id gone."""
    found: dict[uuid.UUID, tuple[str, str]] = {}
    for kind, table in ((QUEUE, Queue), (PC_KIND, PriorityClassRow)):
        for uid, name in await session.execute(select(table.id, table.name)):
            found[uid] = (kind, name)
    return found


def gone(kind: str, uid: uuid.UUID, name: str, at: datetime) -> dict[str, Any]:
    """The change row of a queue or class deleted (its last state is not kept: the object
    names it)."""
    api_version = PC_API_VERSION if kind == PC_KIND else QUEUE_API_VERSION
    obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "uid": str(uid), "resourceVersion": resource_version(at)},
    }
    return change_row(kind, obj, at, deleted=True)


async def priority_class_row(session: AsyncSession, name: str) -> PriorityClassRow | None:
    found = await session.execute(select(PriorityClassRow).where(PriorityClassRow.name == name))
    return found.scalar_one_or_none()


def string_map(metadata: Mapping[str, Any], key: str) -> dict[str, str]:
    """`metadata.labels` or `.annotations`, checked as Kubernetes checks them: strings."""
    value = metadata.get(key) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise Invalid.one(f"metadata.{key}", "must be a map of strings to strings")
    return dict(value)
