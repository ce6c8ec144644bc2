"""The store adapter of a kind the Global keeps as a checked document (Queues, PriorityClasses,
DataSources, DataSourceClaims): a change is a merge patch of the object as served, checked
as a whole document and written through the kind's service; a dry run (`kubectl diff`)
shows what it would make; `status` and the server's metadata are the Global's. A kind
declares its reader, its services and its messages; the steps are written once here."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

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
D_in = TypeVar("D_in", contravariant=True)


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


async def require_admin(
    session: AsyncSession, caller: Principal, namespace: str, settings: Settings | None
) -> None:
    caller.require_admin()


def as_merged(
    current: dict[str, Any], document: dict[str, Any], namespace: str, subresource: str | None
) -> dict[str, Any]:
    return document


def cluster_key(definition: Any) -> tuple[str, str]:
    """A cluster-scoped definition's key: no namespace, its `name`."""
    return "", definition.name


class Store(Protocol[D_in]):
    """The kind's service that creates (`create_only`: a taken name refused) or replaces."""

    def __call__(
        self, session: AsyncSession, *, definition: D_in, create_only: bool
    ) -> Awaitable[Any]: ...


async def name_free(session: AsyncSession, definition: Any) -> bool:
    """The service refuses a taken name itself."""
    return False


@dataclass(frozen=True)
class Steps(Generic[D]):
    """What a kind stored as a document is checked, read and written through."""

    resource: str  # `plural.group`, as Kubernetes names the resource in messages
    read: Callable[[dict[str, Any]], D]  # the written document checked (errors name fields)
    # The object as served, by (session, namespace, name); not found: the kind's NotFound.
    find: Callable[[AsyncSession, str, str], Awaitable[dict[str, Any]]]
    store: Store[D]
    remove: Callable[[AsyncSession, str, str, Settings | None], Awaitable[Any]]
    key: Callable[[D], tuple[str, str]] = cluster_key  # namespace ("": cluster-scoped), name
    # Whether a new definition's name is taken (a Conflict before the service is called).
    taken: Callable[[AsyncSession, D], Awaitable[bool]] = name_free
    # Who may patch and delete, by (session, caller, namespace, settings): admins by default.
    writer: Callable[[AsyncSession, Principal, str, Settings | None], Awaitable[None]] = (
        require_admin
    )
    # The merged document as the kind writes it, by (current, merged, namespace, subresource).
    patched: Callable[[dict[str, Any], dict[str, Any], str, str | None], dict[str, Any]] = as_merged


class DocumentAdapter(Generic[D]):
    """Get, create (dry run too), patch (dry run too) and delete of a kind stored as a
    document, by the kind's `steps`; cluster-scoped and created by admins unless a kind says
    otherwise. A kind gives `steps` and `list`."""

    steps: Steps[D]

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        raise NotImplementedError

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        return await self.steps.find(session, namespace, name)

    async def check(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        await self._checked(request, document, caller)
        return document

    async def create(
        self, request: Request, *, kind: Kind, document: dict[str, Any], caller: Principal
    ) -> dict[str, Any]:
        """Store a new object, committed; a taken name refused."""
        definition = await self._checked(request, document, caller)
        namespace, name = self.steps.key(definition)
        async with request.app.state.sessions() as session:
            if await self.steps.taken(session, definition):
                raise Conflict(f'{self.steps.resource} "{name}" already exists')
            await self.steps.store(session, definition=definition, create_only=True)
            await session.commit()
            return await self.steps.find(session, namespace, name)

    async def _checked(self, request: Request, document: dict[str, Any], caller: Principal) -> D:
        """A new object's definition, checked, if the caller may create it (admins)."""
        caller.require_admin()
        return self.steps.read(written_document(document))

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
        await self.steps.writer(session, caller, namespace, settings)
        current = await self.steps.find(session, namespace, name)
        document = merged_document(current, change, name)
        document = self.steps.patched(current, document, namespace, subresource)
        definition = self.steps.read(document)
        if dry_run:
            return dry_run_result(current, document)
        await self.steps.store(session, definition=definition, create_only=False)
        return await self.steps.find(session, namespace, name)

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
        await self.steps.writer(session, caller, namespace, settings)
        current = await self.steps.find(session, namespace, name)
        await self.steps.remove(session, namespace, name, settings)
        return current

    def event(
        self, kind: Kind, change: Change, query: store.ListQuery
    ) -> tuple[str, dict[str, Any]] | None:
        return None  # not watched (the kind serves no watch verb)
