"""/api/v1/queues."""

from __future__ import annotations

from fastapi import APIRouter, Response

from volcano_global.api.deps import Admin, AppSettings, Reader, Session
from volcano_global.db.models import Queue
from volcano_global.errors import Invalid
from volcano_global.schemas.common import error_responses
from volcano_global.schemas.queues import QueueCreate, QueueList, QueueOut, QueuePatch, QueueUsage
from volcano_global.services.tenancy import queues

router = APIRouter(prefix="/api/v1/queues", tags=["queues"])


@router.post(
    "", status_code=201, operation_id="createQueue", responses=error_responses(401, 403, 409, 422)
)
async def create_queue(body: QueueCreate, session: Session, _: Admin) -> QueueOut:
    queue = await queues.create_queue(
        session,
        name=body.name,
        weight=body.weight,
        gpu_quota=body.gpu_quota,
        priority=body.priority,
    )
    return (await present_queues(session, [queue]))[0]


@router.get("", operation_id="listQueues", responses=error_responses(401, 403))
async def list_queues(session: Session, caller: Reader) -> QueueList:
    """Every queue (a queue user sees its own)."""
    rows = await queues.list_queues(session)
    visible = caller.visible_queues()
    if visible is not None:
        rows = [q for q in rows if q.name in visible]
    return QueueList(items=await present_queues(session, rows))


@router.get("/{name}", operation_id="getQueue", responses=error_responses(401, 403, 404))
async def get_queue(name: str, session: Session, caller: Reader) -> QueueOut:
    caller.require_queue(name)
    return (await present_queues(session, [await queues.get_queue(session, name=name)]))[0]


@router.patch("/{name}", operation_id="updateQueue", responses=error_responses(401, 403, 404, 422))
async def update_queue(name: str, body: QueuePatch, session: Session, _: Admin) -> QueueOut:
    """Change the fields given; `"gpuQuota": null` lifts the quota, a field left out stays."""
    changes = body.model_dump(include=body.model_fields_set)
    for key in ("weight", "priority"):
        if key in changes and changes[key] is None:
            raise Invalid.one(key, "must not be null")
    queue = await queues.update_queue(session, name=name, changes=changes)
    return (await present_queues(session, [queue]))[0]


@router.delete(
    "/{name}",
    status_code=204,
    operation_id="deleteQueue",
    responses=error_responses(401, 403, 404, 409),
)
async def delete_queue(name: str, session: Session, settings: AppSettings, _: Admin) -> Response:
    await queues.delete_queue(session, name=name, default_queue=settings.scheduling.default_queue)
    return Response(status_code=204)


async def present_queues(session: Session, rows: list[Queue]) -> list[QueueOut]:
    usage = await queues.queue_usage(session, queue_ids=[q.id for q in rows])
    fair = await queues.deserved_gpus(session, rows=rows, usage=usage)
    return [
        QueueOut(
            name=q.name,
            weight=q.weight,
            gpu_quota=q.gpu_quota,
            priority=q.priority,
            usage=QueueUsage.model_validate(usage.get(q.id, queues.QueueUsage())),
            fair_share_gpus=fair[q.id],
            created_at=q.created_at,
            updated_at=q.updated_at,
        )
        for q in rows
    ]
