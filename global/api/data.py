"""/api/v1/datasources and /api/v1/datasourceclaims: Volcano Global's DataSources (where each
dataset is, how large) and DataSourceClaims (which job reads which), read and deleted here;
created and replaced through `/api/v1/apply`, `vglobal apply -f` or kubectl (docs/data.md).
/api/v1/staging and /api/v1/jobs/{uid}/data: the data in motion and one job's data, read.

Who writes: DataSources are the federation's inventory, so admins only (as queues and
clusters); a claim, an admin or a queue user in a namespace one of its queues may use (as its
jobs). Who reads: every reader; a queue user sees the claims of its queues' namespaces."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request, Response

from volcano_global.api import audit
from volcano_global.api.deps import AppSettings, Reader, Session, Submitter
from volcano_global.api.jobs import read_tenancy
from volcano_global.jobspec.data_sources import read_data_source, read_data_source_claim
from volcano_global.jobspec.manifests import Manifest
from volcano_global.schemas.common import error_responses
from volcano_global.schemas.data import (
    CheckpointNeedOut,
    DataCopyOut,
    DatasetNeedOut,
    DataSourceClaimList,
    DataSourceClaimOut,
    DataSourceList,
    DataSourceOut,
    JobDataOut,
    ShareStagingOut,
    StagingList,
    StagingOut,
    WorkloadOut,
)
from volcano_global.services.data import claims, copies, sources, views
from volcano_global.services.kube.data_objects import claim_objects, data_source_objects
from volcano_global.services.tenancy.tokens import Principal

router = APIRouter(prefix="/api/v1", tags=["data"])


def _source_out(row: sources.DataSourceRow, obj: dict[str, Any]) -> DataSourceOut:
    return DataSourceOut(
        name=row.name,
        system=row.system,
        type=row.type,
        source_name=row.source_name,
        clusters=list(row.clusters),
        size_bytes=row.size_bytes,
        bound_claims=obj["status"]["boundClaims"],
        created_at=row.created_at,
        updated_at=row.updated_at,
        object=obj,
    )


def _claim_out(row: claims.DataSourceClaimRow, obj: dict[str, Any]) -> DataSourceClaimOut:
    return DataSourceClaimOut(
        namespace=row.namespace,
        name=row.name,
        data_source_name=row.data_source_name,
        workload=WorkloadOut(kind=row.workload_kind, name=row.workload_name),  # type: ignore[arg-type]
        read_gbps=row.read_gbps,
        bound_data_source=obj["status"].get("boundDataSource"),
        created_at=row.created_at,
        updated_at=row.updated_at,
        object=obj,
    )


@router.get("/datasources", operation_id="listDataSources", responses=error_responses(401, 403))
async def list_data_sources(session: Session, _: Reader) -> DataSourceList:
    """Every DataSource, by name, with the clusters that hold it now."""
    rows = await sources.list_data_sources(session)
    objects = await data_source_objects(session, rows)
    return DataSourceList(items=[_source_out(r, o) for r, o in zip(rows, objects, strict=True)])


@router.get(
    "/datasources/{name}", operation_id="getDataSource", responses=error_responses(401, 403, 404)
)
async def get_data_source(name: str, session: Session, _: Reader) -> DataSourceOut:
    row = await sources.get_data_source(session, name=name)
    return _source_out(row, (await data_source_objects(session, [row]))[0])


@router.delete(
    "/datasources/{name}",
    status_code=204,
    operation_id="deleteDataSource",
    responses=error_responses(401, 403, 404),
)
async def delete_data_source(name: str, session: Session, caller: Submitter) -> Response:
    caller.require_admin()
    await copies.delete_source(session, name=name)
    return Response(status_code=204)


@router.get(
    "/datasourceclaims", operation_id="listDataSourceClaims", responses=error_responses(401, 403)
)
async def list_claims(
    session: Session, settings: AppSettings, caller: Reader, namespace: str | None = None
) -> DataSourceClaimList:
    """Claims by namespace and name (`namespace`: only its); a queue user sees those of the
    namespaces its queues may use."""
    allowed = None  # an admin or a reader reads the federation
    if caller.visible_queues() is not None:
        allowed = claims.claim_namespaces(caller, await read_tenancy(session, settings))
    rows = await claims.list_claims(session, namespace=namespace, namespaces=allowed)
    objects = await claim_objects(session, rows)
    return DataSourceClaimList(items=[_claim_out(r, o) for r, o in zip(rows, objects, strict=True)])


@router.delete(
    "/datasourceclaims/{namespace}/{name}",
    status_code=204,
    operation_id="deleteDataSourceClaim",
    responses=error_responses(401, 403, 404),
)
async def delete_claim(
    namespace: str, name: str, session: Session, settings: AppSettings, caller: Submitter
) -> Response:
    claims.require_claim_writer(caller, await read_tenancy(session, settings), namespace=namespace)
    await claims.delete_claim(session, namespace=namespace, name=name)
    return Response(status_code=204)


@router.get("/staging", operation_id="listStaging", responses=error_responses(401, 403))
async def list_staging(session: Session, caller: Reader) -> StagingList:
    """The shares whose data is being copied into their cluster now, oldest placement first,
    with the agent's progress, and the copies that belong to no share running now (prefetch);
    a queue user sees its queues' jobs."""
    queues = caller.visible_queues()
    rows = await views.staging_in_progress(session, queues=queues)
    copies = await views.copies_in_progress(session, queues=queues)
    return StagingList(
        items=[StagingOut.model_validate(r) for r in rows],
        copies=[DataCopyOut.model_validate(c) for c in copies],
    )


@router.get(
    "/jobs/{uid}/data", operation_id="getJobData", responses=error_responses(401, 403, 404, 422)
)
async def get_job_data(uid: uuid.UUID, session: Session, caller: Reader) -> JobDataOut:
    """The datasets the job reads (from its DataSourceClaims and its communication
    declaration) with their size and the clusters that hold them, its checkpoint, and the
    staging of its latest placement's shares."""
    found = await views.job_data(session, job_id=uid)
    caller.require_queue(found.queue)
    return JobDataOut(
        datasets=[DatasetNeedOut.model_validate(d) for d in found.needs.datasets],
        checkpoint=CheckpointNeedOut.model_validate(found.needs.checkpoint)
        if found.needs.checkpoint
        else None,
        staging=[ShareStagingOut.model_validate(s) for s in found.staging],
        copies=[DataCopyOut.model_validate(c) for c in found.copies],
    )


async def apply_data_source(
    request: Request, caller: Principal, manifest: Manifest
) -> tuple[str, uuid.UUID | None]:
    """A DataSource document of `/api/v1/apply`: admins only."""
    caller.require_admin()
    definition = read_data_source(manifest.document)
    async with request.app.state.sessions() as session:
        row, outcome = await sources.apply_data_source(session, definition=definition)
        if outcome != "unchanged":
            await audit.record_accepted(session, request, caller)
            await session.commit()
        return outcome, row.id


async def apply_claim(
    request: Request, caller: Principal, manifest: Manifest
) -> tuple[str, uuid.UUID | None]:
    """A DataSourceClaim document of `/api/v1/apply`: in a namespace the caller may use."""
    definition = read_data_source_claim(manifest.document)
    async with request.app.state.sessions() as session:
        rules = await read_tenancy(session, request.app.state.settings)
        claims.require_claim_writer(caller, rules, namespace=definition.namespace)
        row, outcome = await claims.apply_claim(session, definition=definition)
        if outcome != "unchanged":
            await audit.record_accepted(session, request, caller)
            await session.commit()
        return outcome, row.id
