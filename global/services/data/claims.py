"""DataSourceClaims as the Global keeps them: applied unchanged (created, replaced or
unchanged), before or after the job they name, read, deleted. Who may write one: an admin, or
a queue user in a namespace one of its queues may use (the namespace rule of jobs,
`jobspec/tenancy.py`); reserved namespaces never."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import DataSourceClaimRow, TokenRole
from volcano_global.errors import Conflict, Forbidden, NotFound
from volcano_global.jobspec.data_sources import DataSourceClaimDefinition
from volcano_global.jobspec.tenancy import TenancyRules, is_reserved
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.services.wakeups import room_may_have_changed

Outcome = Literal["created", "configured", "unchanged"]


def claim_namespaces(caller: Principal, rules: TenancyRules) -> frozenset[str] | None:
    """The namespaces whose claims the caller may write (None: any, an admin's)."""
    if caller.role is TokenRole.ADMIN:
        return None
    return frozenset(
        namespace
        for queue in caller.visible_queues() or ()
        for namespace in rules.policy(queue).namespaces
    )


def require_claim_writer(caller: Principal, rules: TenancyRules, *, namespace: str) -> None:
    """Refuse (403) a caller who may not write claims in `namespace`."""
    caller.require_submitter()
    if is_reserved(namespace, rules.defaults):
        raise Forbidden(
            f"metadata.namespace: {namespace!r} is reserved (kube-* and the Global's and "
            "agents' own namespaces)"
        )
    allowed = claim_namespaces(caller, rules)
    if allowed is not None and namespace not in allowed:
        listed = ", ".join(sorted(allowed)) or "none"
        raise Forbidden(
            f"metadata.namespace: {caller.name} may not write claims in {namespace!r}, not a "
            f"namespace of its queues (allowed: {listed})"
        )


async def find_claim(
    session: AsyncSession, *, namespace: str, name: str
) -> DataSourceClaimRow | None:
    found = await session.execute(
        select(DataSourceClaimRow).where(
            DataSourceClaimRow.namespace == namespace, DataSourceClaimRow.name == name
        )
    )
    return found.scalar_one_or_none()


async def get_claim(session: AsyncSession, *, namespace: str, name: str) -> DataSourceClaimRow:
    row = await find_claim(session, namespace=namespace, name=name)
    if row is None:
        raise NotFound(f'datasourceclaims.datadependency.volcano.sh "{name}" not found')
    return row


async def list_claims(
    session: AsyncSession,
    *,
    namespace: str | None = None,
    namespaces: Collection[str] | None = None,
) -> list[DataSourceClaimRow]:
    """Claims in `namespace` (None: every namespace), among `namespaces` when given (a queue
    user's), in namespace and name order."""
    query = select(DataSourceClaimRow).order_by(
        DataSourceClaimRow.namespace, DataSourceClaimRow.name
    )
    if namespace is not None:
        query = query.where(DataSourceClaimRow.namespace == namespace)
    if namespaces is not None:
        query = query.where(DataSourceClaimRow.namespace.in_(list(namespaces)))
    return list((await session.execute(query)).scalars())


async def apply_claim(
    session: AsyncSession, *, definition: DataSourceClaimDefinition, create_only: bool = False
) -> tuple[DataSourceClaimRow, Outcome]:
    """Create the claim, replace it by the document, or leave it as it is. Its job need not
    exist: a claim binds by namespace, workload kind and name whenever a round reads it."""
    row = await find_claim(session, namespace=definition.namespace, name=definition.name)
    if row is not None and create_only:
        raise Conflict(
            f'datasourceclaims.datadependency.volcano.sh "{definition.name}" already exists'
        )
    if row is not None and row.document == definition.document:
        return row, "unchanged"
    outcome: Outcome = "configured" if row is not None else "created"
    if row is None:
        row = DataSourceClaimRow(name=definition.name, namespace=definition.namespace)
        session.add(row)
    row.system = definition.system
    row.data_source_type = definition.data_source_type
    row.data_source_name = definition.data_source_name
    row.workload_kind = definition.workload.kind
    row.workload_name = definition.workload.name
    row.read_gbps = definition.read_gbps
    row.document = definition.document
    room_may_have_changed(session)  # a waiting job's needs changed: the next round reads them
    await session.flush()
    return row, outcome


async def delete_claim(session: AsyncSession, *, namespace: str, name: str) -> DataSourceClaimRow:
    row = await get_claim(session, namespace=namespace, name=name)
    await session.delete(row)
    await session.flush()
    return row
