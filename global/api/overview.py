"""/api/v1/overview, /api/v1/scheduling/rounds and /api/v1/audit: the federation at a glance
and who changed it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from volcano_global.api.deps import Admin, Reader, Session
from volcano_global.schemas.common import GpuCapacity, error_responses
from volcano_global.schemas.overview import AuditList, AuditRecord, Overview, RoundList, RoundOut
from volcano_global.services import events, overview
from volcano_global.services.scheduling import rounds

router = APIRouter(prefix="/api/v1", tags=["overview"])


@router.get("/overview", operation_id="getOverview", responses=error_responses(401, 403))
async def get_overview(session: Session, _: Reader) -> Overview:
    """Jobs and clusters by state, GPUs by model over the federation."""
    models = overview.by_model(await overview.gpu_capacity(session))
    return Overview(
        jobs={s.value: n for s, n in (await overview.job_counts(session)).items()},
        clusters={s.value: n for s, n in (await overview.cluster_counts(session)).items()},
        gpus=[
            GpuCapacity(gpu_model=model, total=total, free=free, used=total - free)
            for model, (total, free) in models.items()
        ],
    )


@router.get(
    "/scheduling/rounds", operation_id="listSchedulingRounds", responses=error_responses(401, 403)
)
async def list_rounds(
    session: Session, _: Reader, limit: Annotated[int, Query(ge=1, le=1000)] = 20
) -> RoundList:
    """The most recent committed scheduling rounds, newest first."""
    rows = await rounds.recent_rounds(session, limit=limit)
    return RoundList(items=[RoundOut.model_validate(r) for r in rows])


@router.get("/audit", operation_id="listAudit", responses=error_responses(401, 403, 422))
async def list_audit(
    session: Session, _: Admin, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> AuditList:
    """Every mutating call by a valid token, newest first: who (the token's name and id),
    from which address, method and path; a refused one says DENIED and why."""
    rows = await events.audit_trail(session, limit=limit)
    return AuditList(items=[AuditRecord.model_validate(e) for e in rows])
