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
    D,
    DocumentAdapter,
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


class _WatchedAdapter(DocumentAdapter[D]):
    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        return _event(kind, change, query)


class QueueAdapter(_WatchedAdapter[QueueDefinition]):
    resource = "queues.scheduling.volcano.sh"

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        return cluster_scoped.page(
            await cluster_scoped.list_queues(session), cluster_query(query, per_queue=True)
        )

    async def _object(self, session: AsyncSession, namespace: str, name: str) -> dict[str, Any]:
        queue = await queues.find_queue(session, name=name)
        if queue is None:
            raise NotFound(f'{self.resource} "{name}" not found')
        return (await cluster_scoped.queue_objects(session, [queue]))[0]

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        caller.require_queue(name)
        return await self._object(session, namespace, name)

    def _read(self, document: dict[str, Any]) -> QueueDefinition:
        return read_queue(document)

    def _name(self, definition: QueueDefinition) -> tuple[str, str]:
        return "", definition.name

    async def _exists(self, session: AsyncSession, definition: QueueDefinition) -> bool:
        return await queues.find_queue(session, name=definition.name) is not None

    async def _store(
        self, session: AsyncSession, definition: QueueDefinition, *, create_only: bool
    ) -> None:
        await queues.apply_queue(session, definition=definition, create_only=create_only)

    async def _remove(
        self, session: AsyncSession, namespace: str, name: str, settings: Settings | None
    ) -> None:
        assert settings is not None
        await queues.delete_queue(
            session, name=name, default_queue=settings.scheduling.default_queue
        )

    def _patched(
        self,
        current: dict[str, Any],
        document: dict[str, Any],
        *,
        namespace: str,
        subresource: str | None,
    ) -> dict[str, Any]:
        state = current["status"]["state"]
        if subresource == "status":
            # Only the state is the caller's to set (Volcano's `vcctl queue operate`); the
            # counts are the Global's.
            state = (document.get("status") or {}).get("state", state)
            document = written_document(current)
        document["status"] = {"state": state}
        return document


class PriorityClassAdapter(_WatchedAdapter[_Class]):
    resource = "priorityclasses.scheduling.k8s.io"

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        objects = await cluster_scoped.list_priority_classes(session)
        return cluster_scoped.page(objects, cluster_query(query))

    async def _object(self, session: AsyncSession, namespace: str, name: str) -> dict[str, Any]:
        row = await cluster_scoped.priority_class_row(session, name)
        if row is None:
            raise NotFound(f'{self.resource} "{name}" not found')
        return cluster_scoped.priority_class_object(row)

    def _read(self, document: dict[str, Any]) -> _Class:
        metadata = document["metadata"]
        return read_priority_class(document), (
            cluster_scoped.string_map(metadata, "labels"),
            cluster_scoped.string_map(metadata, "annotations"),
        )

    def _name(self, definition: _Class) -> tuple[str, str]:
        return "", definition[0].name

    async def _exists(self, session: AsyncSession, definition: _Class) -> bool:
        return await cluster_scoped.priority_class_row(session, definition[0].name) is not None

    async def _store(
        self,
        session: AsyncSession,
        definition: _Class,
        *,
        create_only: bool,
    ) -> None:
        pc, metadata = definition
        write = classes.create_priority_class if create_only else classes.replace_priority_class
        await write(session, pc=pc, metadata=metadata)

    async def _remove(
        self, session: AsyncSession, namespace: str, name: str, settings: Settings | None
    ) -> None:
        await classes.delete_priority_class(session, name=name)
