"""Store adapters of the cluster-scoped kinds: Volcano Queues and Kubernetes PriorityClasses,
read and changed through the same tenancy services as `/api/v1/queues` and
`/api/v1/priorityclasses`, with the same roles (readers read, admins change).

A change is a merge patch of the object as served, checked as a whole document (the queue by
Volcano's rules, the class by Kubernetes'). A queue's `status` is the Global's: a patch or an
apply of the resource leaves its state alone (as the API server does with a status
subresource); `kubectl patch --subresource=status` Opens or Closes it."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.errors import Conflict, Invalid, NotFound
from volcano_global.jobspec.priority_classes import read_priority_class
from volcano_global.jobspec.queue_document import read_queue
from volcano_global.services.kube import cluster_scoped, store
from volcano_global.services.kube.feed import Change
from volcano_global.services.kube.selectors import Selector
from volcano_global.services.tenancy import priority_classes as classes
from volcano_global.services.tenancy import queues
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.settings import Settings

if TYPE_CHECKING:
    from volcano_global.api.kube.registry import Kind

_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
    "namespace",
)


def _query(query: store.ListQuery, *, per_queue: bool) -> cluster_scoped.ClusterScopedQuery:
    return cluster_scoped.ClusterScopedQuery(
        labels=query.labels,
        fields=query.fields,
        names=query.queues if per_queue else None,
        limit=query.limit,
        continue_token=query.continue_token,
    )


def written_document(document: dict[str, Any]) -> dict[str, Any]:
    """The document as the caller may write it: the server's metadata dropped."""
    document = copy.deepcopy(document)
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        raise Invalid.one("metadata", "must be an object")
    for key in _SERVER_METADATA:
        metadata.pop(key, None)
    return document


def merged_document(current: dict[str, Any], change: dict[str, Any], name: str) -> dict[str, Any]:
    document = store.merge_patch(current, change)
    if not isinstance(document, dict):
        raise Invalid.one("", "the patch must be a JSON object")
    document = written_document(document)
    if document["metadata"].get("name") != name:
        raise Invalid.one("metadata.name", f"may not change (is {name!r})")
    for key in ("apiVersion", "kind"):
        if document.get(key) != current.get(key):
            raise Invalid.one(key, f"may not change (is {current.get(key)!r})")
    return document


def _event(kind: Kind, change: Change, query: store.ListQuery) -> tuple[str, dict[str, Any]] | None:
    row = change.row
    if row["kind"] != kind.kind or "object" not in row:
        return None
    obj = row["object"]
    wanted = _query(query, per_queue=kind.kind == cluster_scoped.QUEUE)
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


def dry_run_result(current: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """What a patch would make of the object (`kubectl diff`): the document with the server's
    metadata and status of the current object."""
    shown = copy.deepcopy(document)
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        shown["metadata"][key] = current["metadata"][key]
    if "status" in current:
        shown["status"] = current["status"]
    return shown


class QueueAdapter:
    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        return cluster_scoped.page(
            await cluster_scoped.list_queues(session), _query(query, per_queue=True)
        )

    async def _object(self, session: AsyncSession, name: str) -> dict[str, Any]:
        queue = await queues.find_queue(session, name=name)
        if queue is None:
            raise NotFound(f'queues.scheduling.volcano.sh "{name}" not found')
        return (await cluster_scoped.queue_objects(session, [queue]))[0]

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        caller.require_queue(name)
        return await self._object(session, name)

    async def check(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        caller.require_admin()
        read_queue(written_document(document))
        return document

    async def create(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        caller.require_admin()
        definition = read_queue(written_document(document))
        async with request.app.state.sessions() as session:
            if await queues.find_queue(session, name=definition.name) is not None:
                raise Conflict(f'queues.scheduling.volcano.sh "{definition.name}" already exists')
            await queues.apply_queue(session, definition=definition, create_only=True)
            await session.commit()
            return await self._object(session, definition.name)

    async def patch(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        change: dict[str, Any],
        caller: Principal,
        settings: Settings,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        caller.require_admin()
        current = await self._object(session, name)
        document = merged_document(current, change, name)
        state = current["status"]["state"]
        if subresource == "status":
            # Only the state is the caller's to set (Volcano's `vcctl queue operate`); the
            # counts are the Global's.
            state = (document.get("status") or {}).get("state", state)
            document = written_document(current)
        document["status"] = {"state": state}
        definition = read_queue(document)
        if dry_run:
            return dry_run_result(current, document)
        await queues.apply_queue(session, definition=definition)
        return await self._object(session, name)

    async def delete(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        caller: Principal,
        settings: Settings | None = None,
    ) -> dict[str, Any]:
        caller.require_admin()
        current = await self._object(session, name)
        assert settings is not None
        await queues.delete_queue(
            session, name=name, default_queue=settings.scheduling.default_queue
        )
        return current

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        return _event(kind, change, query)


class PriorityClassAdapter:
    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        objects = await cluster_scoped.list_priority_classes(session)
        return cluster_scoped.page(objects, _query(query, per_queue=False))

    async def _object(self, session: AsyncSession, name: str) -> dict[str, Any]:
        row = await cluster_scoped.priority_class_row(session, name)
        if row is None:
            raise NotFound(f'priorityclasses.scheduling.k8s.io "{name}" not found')
        return cluster_scoped.priority_class_object(row)

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        return await self._object(session, name)

    @staticmethod
    def _read(document: dict[str, Any]) -> tuple[Any, classes.ClassMetadata]:
        document = written_document(document)
        metadata = document["metadata"]
        pc = read_priority_class(document)
        return pc, (
            cluster_scoped.string_map(metadata, "labels"),
            cluster_scoped.string_map(metadata, "annotations"),
        )

    async def check(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        caller.require_admin()
        self._read(document)
        return document

    async def create(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        caller.require_admin()
        pc, metadata = self._read(document)
        async with request.app.state.sessions() as session:
            if await cluster_scoped.priority_class_row(session, pc.name) is not None:
                raise Conflict(f'priorityclasses.scheduling.k8s.io "{pc.name}" already exists')
            await classes.create_priority_class(session, pc=pc, metadata=metadata)
            await session.commit()
            return await self._object(session, pc.name)

    async def patch(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        change: dict[str, Any],
        caller: Principal,
        settings: Settings,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        caller.require_admin()
        current = await self._object(session, name)
        document = merged_document(current, change, name)
        pc, metadata = self._read(document)
        if dry_run:
            return dry_run_result(current, document)
        await classes.replace_priority_class(session, pc=pc, metadata=metadata)
        return await self._object(session, name)

    async def delete(
        self,
        session: AsyncSession,
        *,
        kind: Kind,
        namespace: str,
        name: str,
        caller: Principal,
        settings: Settings | None = None,
    ) -> dict[str, Any]:
        caller.require_admin()
        current = await self._object(session, name)
        await classes.delete_priority_class(session, name=name)
        return current

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        return _event(kind, change, query)
