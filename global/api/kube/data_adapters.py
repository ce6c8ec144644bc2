"""Store adapters of Volcano Global's DataDependency kinds: DataSources (cluster-scoped,
admins change them) and DataSourceClaims (namespaced, written in a namespace the caller's
queues may use), read and changed through the same services as `/api/v1/apply`
(`services/data`). A change is a merge patch of the object as served, checked as a whole
document; `status` is the Global's (a claim's binding, a source's count of claims).

A queue user reading claims through kubectl sees the namespaces its queues' annotations
grant, or the queue's own (the shipped default) — never more than the REST API shows it."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.api.jobs import read_tenancy
from volcano_global.api.kube.document_adapters import (
    DocumentAdapter,
    Steps,
    cluster_query,
    written_document,
)
from volcano_global.errors import Invalid, NotFound
from volcano_global.jobspec.data_sources import (
    DataSourceClaimDefinition,
    DataSourceDefinition,
    read_data_source,
    read_data_source_claim,
)
from volcano_global.jobspec.tenancy import TenancyDefaults, TenancyRules
from volcano_global.services.data import claims, copies, sources
from volcano_global.services.kube import cluster_scoped, store
from volcano_global.services.kube.data_objects import claim_objects, data_source_objects
from volcano_global.services.tenancy.boundary import tenancy_rules
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.settings import Settings

if TYPE_CHECKING:
    from volcano_global.api.kube.registry import Kind


async def _source(session: AsyncSession, namespace: str, name: str) -> dict[str, Any]:
    row = await sources.get_data_source(session, name=name)
    return (await data_source_objects(session, [row]))[0]


class DataSourceAdapter(DocumentAdapter[DataSourceDefinition]):
    """Cluster-scoped; the service refuses a taken name and names a missing one."""

    steps = Steps(
        resource="datasources.datadependency.volcano.sh",
        read=read_data_source,
        find=_source,
        store=sources.apply_data_source,
        remove=lambda session, namespace, name, settings: copies.delete_source(session, name=name),
    )

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        rows = await sources.list_data_sources(session)
        return cluster_scoped.page(await data_source_objects(session, rows), cluster_query(query))


async def _rules(session: AsyncSession, settings: Settings | None) -> TenancyRules:
    """The tenancy rules; without the server's settings, the shipped defaults (a queue's own
    namespace): what a queue user may then do is never more than with them."""
    if settings is not None:
        return await read_tenancy(session, settings)
    return await tenancy_rules(session, defaults=TenancyDefaults())


async def _claim(session: AsyncSession, namespace: str, name: str) -> dict[str, Any]:
    row = await claims.get_claim(session, namespace=namespace, name=name)
    return (await claim_objects(session, [row]))[0]


async def _claim_writer(
    session: AsyncSession, caller: Principal, namespace: str, settings: Settings | None
) -> None:
    claims.require_claim_writer(caller, await _rules(session, settings), namespace=namespace)


def _in_namespace(
    current: dict[str, Any], document: dict[str, Any], namespace: str, subresource: str | None
) -> dict[str, Any]:
    document["metadata"]["namespace"] = namespace
    return document


class DataSourceClaimAdapter(DocumentAdapter[DataSourceClaimDefinition]):
    """Namespaced; written by whoever may write in the namespace (not only admins)."""

    steps = Steps(
        resource="datasourceclaims.datadependency.volcano.sh",
        read=read_data_source_claim,
        key=lambda definition: (definition.namespace, definition.name),
        find=_claim,
        store=claims.apply_claim,
        remove=lambda session, namespace, name, settings: claims.delete_claim(
            session, namespace=namespace, name=name
        ),
        writer=_claim_writer,
        patched=_in_namespace,
    )

    async def list(
        self, session: AsyncSession, *, kind: Kind, query: store.ListQuery
    ) -> tuple[list[dict[str, Any]], str | None]:
        allowed = None
        if query.queues is not None:
            rules = await _rules(session, None)
            allowed = {n for q in query.queues for n in rules.policy(q).namespaces}
        rows = await claims.list_claims(session, namespace=query.namespace, namespaces=allowed)
        objects = await claim_objects(session, rows)
        return _page(objects, cluster_query(query))

    async def get(
        self, session: AsyncSession, *, kind: Kind, namespace: str, name: str, caller: Principal
    ) -> dict[str, Any]:
        visible = caller.visible_queues()
        if visible is not None:
            rules = await _rules(session, None)
            if not any(namespace in rules.policy(q).namespaces for q in visible):
                raise NotFound(f'{self.steps.resource} "{name}" not found')
        return await _claim(session, namespace, name)

    async def _checked(
        self, request: Request, document: dict[str, Any], caller: Principal
    ) -> DataSourceClaimDefinition:
        """Any caller who may write claims in the claim's namespace."""
        definition = read_data_source_claim(_written_claim(document))
        async with request.app.state.sessions() as session:
            await _claim_writer(session, caller, definition.namespace, request.app.state.settings)
        return definition


def _written_claim(document: dict[str, Any]) -> dict[str, Any]:
    """As `written_document`, keeping the namespace the request gave the object."""
    namespace = (document.get("metadata") or {}).get("namespace")
    written = written_document(document)
    if namespace is not None:
        written["metadata"]["namespace"] = namespace
    return written


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def _page(
    objects: list[dict[str, Any]], query: cluster_scoped.ClusterScopedQuery
) -> tuple[list[dict[str, Any]], str | None]:
    """Claims of several namespaces, matching the selectors, paged in `namespace/name` order
    (names repeat across namespaces)."""
    after = None
    if query.continue_token:
        try:
            after = base64.urlsafe_b64decode(query.continue_token.encode()).decode()
        except (ValueError, UnicodeDecodeError) as exc:
            raise Invalid.one("continue", "not a continue token of this server") from exc
    found = [
        o
        for o in sorted(objects, key=_key)
        if (after is None or _key(o) > after) and cluster_scoped.matches(o, query)
    ]
    if query.limit is None or len(found) <= query.limit:
        return found, None
    shown = found[: query.limit]
    return shown, base64.urlsafe_b64encode(_key(shown[-1]).encode()).decode()
