"""The store adapter of a kind the Global keeps as a checked document (Queues, PriorityClasses,
DataSources, DataSourceClaims): a change is a merge patch of the object as served, checked
as a whole document and written through the kind's service; a dry run (`kubectl diff`)
shows what it would make; `status` and the server's metadata are the Global's. A kind
declares its reader, its services and its messages; the steps are written once here."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.errors import Conflict, Invalid
from volcano_global.jobspec.object_metadata import drop_server_metadata, require_unchanged
from volcano_global.services.kube import cluster_scoped, store
from volcano_global.services.kube.feed import Change
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.settings import Settings

if TYPE_CHECKING:
    from volcano_global.api.kube.registry import Kind

D = TypeVar("D")  # the kind's checked definition


def written_document(document: dict[str, Any]) -> dict[str, Any]:
    """The document as the caller may write it: the server's metadata dropped."""
    document = copy.deepcopy(document)
    drop_server_metadata(document, also=("namespace",))
    return document


def merged_document(current: dict[str, Any], change: dict[str, Any], name: str) -> dict[str, Any]:
    document = store.merge_patch(current, change)
    if not isinstance(document, dict):
        raise Invalid.one("", "the patch must be a JSON object")
    document = written_document(document)
    require_unchanged(
        document,
        metadata={"name": name},
        top={key: current.get(key) for key in ("apiVersion", "kind")},
    )
    return document


def dry_run_result(current: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """What a patch would make of the object (`kubectl diff`): the document with the server's
    metadata and status of the current object."""
    shown = copy.deepcopy(document)
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        shown["metadata"][key] = current["metadata"][key]
    if "status" in current:
        shown["status"] = current["status"]
    return shown


def cluster_query(
    query: store.ListQuery, *, per_queue: bool = False
) -> cluster_scoped.ClusterScopedQuery:
    """The list query of a cluster-scoped kind; `per_queue`: names limited to a queue user's
    queues (the Queue kind)."""
    return cluster_scoped.ClusterScopedQuery(
        labels=query.labels,
        fields=query.fields,
        names=query.queues if per_queue else None,
        limit=query.limit,
        continue_token=query.continue_token,
    )


class DocumentAdapter(Generic[D]):
    """Create, patch (dry run too) and delete of a kind stored as a document; cluster-scoped
    and changed by admins unless a kind says otherwise. A kind gives `list`, `_object`,
    `_read`, `_name`, `_store` and `_remove`, and `_exists` to refuse a taken name itself."""

    resource = ""  # `plural.group`, as Kubernetes names the resource in messages

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        raise NotImplementedError

    async def _object(self, session: AsyncSession, namespace: str, name: str) -> dict[str, Any]:
        """The object as served; not found: the kind's NotFound."""
        raise NotImplementedError

    def _read(self, document: dict[str, Any]) -> D:
        """The written document checked (errors name its fields)."""
        raise NotImplementedError

    def _name(self, definition: D) -> tuple[str, str]:
        """The namespace ("" if cluster-scoped) and name of a definition."""
        raise NotImplementedError

    async def _store(self, session: AsyncSession, definition: D, *, create_only: bool) -> None:
        raise NotImplementedError

    async def _remove(
        self, session: AsyncSession, namespace: str, name: str, settings: Settings | None
    ) -> None:
        raise NotImplementedError

    async def _exists(self, session: AsyncSession, definition: D) -> bool:
        """Whether the name is taken; False: the service refuses a taken name itself."""
        return False

    async def _require_writer(
        self,
        session: AsyncSession,
        caller: Principal,
        *,
        namespace: str,
        settings: Settings | None,
    ) -> None:
        caller.require_admin()

    def _patched(
        self,
        current: dict[str, Any],
        document: dict[str, Any],
        *,
        namespace: str,
        subresource: str | None,
    ) -> dict[str, Any]:
        """The merged document as the kind writes it (the Global's parts set again)."""
        return document

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        return await self._object(session, namespace, name)

    async def check(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        caller.require_admin()
        self._read(written_document(document))
        return document

    async def create(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        caller.require_admin()
        definition = self._read(written_document(document))
        async with request.app.state.sessions() as session:
            return await self._created(session, definition)

    async def _created(self, session: AsyncSession, definition: D) -> dict[str, Any]:
        """Store a new object, committed; a taken name refused."""
        namespace, name = self._name(definition)
        if await self._exists(session, definition):
            raise Conflict(f'{self.resource} "{name}" already exists')
        await self._store(session, definition, create_only=True)
        await session.commit()
        return await self._object(session, namespace, name)

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
        await self._require_writer(session, caller, namespace=namespace, settings=settings)
        current = await self._object(session, namespace, name)
        document = merged_document(current, change, name)
        document = self._patched(current, document, namespace=namespace, subresource=subresource)
        definition = self._read(document)
        if dry_run:
            return dry_run_result(current, document)
        await self._store(session, definition, create_only=False)
        return await self._object(session, namespace, name)

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
        await self._require_writer(session, caller, namespace=namespace, settings=settings)
        current = await self._object(session, namespace, name)
        await self._remove(session, namespace, name, settings)
        return current

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        return None  # not watched (the kind serves no watch verb)
