"""Store adapters of the cluster-scoped kinds: Volcano Queues and Kubernetes PriorityClasses,
read and changed through the same tenancy services as `/api/v1/queues` and
`/api/v1/priorityclasses`, with the same roles (readers read, admins change).

A change is a merge patch of the object as served, checked as a whole document (the queue by
Volcano's rules, the class by Kubernetes'). A queue's `status` is the Global's: a patch or an
apply of the resource leaves its state alone (as the API server does with a status
subresource); `kubectl patch --subresource=status` Opens or Closes it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.api.kube.document_adapters import (
    DocumentAdapter,
    Steps,
    cluster_query,
    written_document,
)
from volcano_global.errors import NotFound
from volcano_global.jobspec.priority_classes import PriorityClass, read_priority_class
from volcano_global.jobspec.queue_document import QueueDefinition, read_queue
from volcano_global.services.kube import cluster_scoped, store
from volcano_global.services.kube.feed import Change
from volcano_global.services.kube.selectors import Selector
from volcano_global.services.tenancy import priority_classes as classes
from volcano_global.services.tenancy import queues
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.settings import Settings

if TYPE_CHECKING:
    from volcano_global.api.kube.registry import Kind

_Class = tuple[PriorityClass, classes.ClassMetadata]  # a checked class, its labels and annotations


def _event(kind: Kind, change: Change, query: store.ListQuery) -> tuple[str, dict[str, Any]] | None:
    row = change.row
    if row["kind"] != kind.kind or "object" not in row:
        return None
    obj = row["object"]
    wanted = cluster_query(query, per_queue=kind.kind == cluster_scoped.QUEUE)
    if row["deleted"]:
        # The labels of a deleted row are not kept: a label selector lets its delete through,
        # the caller's queues and field selectors do not.
        unlabelled = cluster_scoped.ClusterScopedQuery(
            labels=Selector(), fields=wanted.fields, names=wanted.names
        )
        return ("DELETED", obj) if cluster_scoped.matches(obj, unlabelled) else None
    if not cluster_scoped.matches(obj, wanted):
        return None
    return "MODIFIED", obj


async def _queue(session: AsyncSession, namespace: str, name: str) -> dict[str, Any]:
    queue = await queues.find_queue(session, name=name)
    if queue is None:
        raise NotFound(f'queues.scheduling.volcano.sh "{name}" not found')
    return (await cluster_scoped.queue_objects(session, [queue]))[0]


async def _queue_taken(session: AsyncSession, definition: QueueDefinition) -> bool:
    return await queues.find_queue(session, name=definition.name) is not None


async def _delete_queue(
    session: AsyncSession, namespace: str, name: str, settings: Settings | None
) -> None:
    assert settings is not None
    await queues.delete_queue(session, name=name, default_queue=settings.scheduling.default_queue)


def _queue_state(
    current: dict[str, Any], document: dict[str, Any], namespace: str, subresource: str | None
) -> dict[str, Any]:
    """The queue's state is the Global's, but for a patch of the status subresource."""
    state = current["status"]["state"]
    if subresource == "status":
        # Only the state is the caller's to set (Volcano's `vcctl queue operate`); the
        # counts are the Global's.
        state = (document.get("status") or {}).get("state", state)
        document = written_document(current)
    document["status"] = {"state": state}
    return document


class QueueAdapter(DocumentAdapter[QueueDefinition]):
    steps = Steps(
        resource="queues.scheduling.volcano.sh",
        read=read_queue,
        find=_queue,
        store=queues.apply_queue,
        remove=_delete_queue,
        taken=_queue_taken,
        patched=_queue_state,
    )

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        return cluster_scoped.page(
            await cluster_scoped.list_queues(session), cluster_query(query, per_queue=True)
        )

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        caller.require_queue(name)
        return await _queue(session, namespace, name)

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        return _event(kind, change, query)


async def _class(session: AsyncSession, namespace: str, name: str) -> dict[str, Any]:
    row = await cluster_scoped.priority_class_row(session, name)
    if row is None:
        raise NotFound(f'priorityclasses.scheduling.k8s.io "{name}" not found')
    return cluster_scoped.priority_class_object(row)


def _read_class(document: dict[str, Any]) -> _Class:
    metadata = document["metadata"]
    return read_priority_class(document), (
        cluster_scoped.string_map(metadata, "labels"),
        cluster_scoped.string_map(metadata, "annotations"),
    )


async def _class_taken(session: AsyncSession, definition: _Class) -> bool:
    return await cluster_scoped.priority_class_row(session, definition[0].name) is not None


async def _store_class(session: AsyncSession, *, definition: _Class, create_only: bool) -> None:
    pc, metadata = definition
    write = classes.create_priority_class if create_only else classes.replace_priority_class
    await write(session, pc=pc, metadata=metadata)


class PriorityClassAdapter(DocumentAdapter[_Class]):
    steps = Steps(
        resource="priorityclasses.scheduling.k8s.io",
        read=_read_class,
        key=lambda definition: ("", definition[0].name),
        find=_class,
        store=_store_class,
        remove=lambda session, namespace, name, settings: classes.delete_priority_class(
            session, name=name
        ),
        taken=_class_taken,
    )

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        objects = await cluster_scoped.list_priority_classes(session)
        return cluster_scoped.page(objects, cluster_query(query))

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        return _event(kind, change, query)
