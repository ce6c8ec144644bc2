"""DataSources and DataSourceClaims as the objects kubectl and the REST API read: the document
as written, the server's metadata, the locality as it is now (documents, staging and agents'
reports), and a status in Volcano Global's terms (a claim `Bound` to its DataSource, a
DataSource's count of bound claims)."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import DataSourceClaimRow, DataSourceRow
from volcano_global.services.kube.objects import resource_version, timestamp

Key = tuple[str, str, str]  # (system, type, name): how a claim names its DataSource


def _metadata(row: DataSourceRow | DataSourceClaimRow, document: dict[str, Any]) -> dict[str, Any]:
    return {
        **copy.deepcopy(document.get("metadata") or {}),
        "name": row.name,
        "uid": str(row.id),
        "resourceVersion": resource_version(row.updated_at),
        "generation": 1,
        "creationTimestamp": timestamp(row.created_at),
    }


def data_source_object(row: DataSourceRow, *, bound_claims: int = 0) -> dict[str, Any]:
    obj = copy.deepcopy(row.document)
    obj["metadata"] = _metadata(row, row.document)
    # The spec as applied; where the data is now (what the spec said, and the clusters staging
    # and agents added) is the Global's observation, in status, as Kubernetes keeps what a
    # controller observed out of the spec: a patch of the served object or a GitOps tool's
    # comparison then sees the spec its author wrote.
    obj["status"] = {"boundClaims": bound_claims, "locality": {"clusterNames": list(row.clusters)}}
    return obj


def claim_object(row: DataSourceClaimRow, *, bound_to: str | None) -> dict[str, Any]:
    obj = copy.deepcopy(row.document)
    obj["metadata"] = _metadata(row, row.document) | {"namespace": row.namespace}
    status: dict[str, Any] = {"phase": "Bound" if bound_to else "Pending"}
    if bound_to:
        status["boundDataSource"] = bound_to
    obj["status"] = status
    return obj


def claim_key(row: DataSourceClaimRow) -> Key:
    return row.system, row.data_source_type, row.data_source_name


async def data_source_objects(
    session: AsyncSession, rows: list[DataSourceRow]
) -> list[dict[str, Any]]:
    """The DataSources with the number of claims each binds (one read of the claims)."""
    if not rows:
        return []
    found = await session.execute(
        select(
            DataSourceClaimRow.system,
            DataSourceClaimRow.data_source_type,
            DataSourceClaimRow.data_source_name,
        )
    )
    counts = Counter(tuple(r) for r in found.all())
    return [
        data_source_object(r, bound_claims=counts[(r.system, r.type, r.source_name)]) for r in rows
    ]


async def claim_objects(
    session: AsyncSession, rows: list[DataSourceClaimRow]
) -> list[dict[str, Any]]:
    """The claims with the DataSource each is bound to, if one is stored."""
    if not rows:
        return []
    sources = await session.execute(
        select(
            DataSourceRow.name, DataSourceRow.system, DataSourceRow.type, DataSourceRow.source_name
        ).order_by(DataSourceRow.name.desc())  # the first by name wins where several match
    )
    by_key = {(s.system, s.type, s.source_name): s.name for s in sources.all()}
    return [claim_object(r, bound_to=by_key.get(claim_key(r))) for r in rows]
