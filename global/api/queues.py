"""/api/v1/queues: Volcano Queue documents (YAML or JSON, unchanged), and the older shape
(name, weight, gpuQuota, priority) mapped onto them."""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from volcano_global.api.deps import Admin, AppSettings, Reader, Session
from volcano_global.api.documents import document_body, read_document, render_document
from volcano_global.db.models import Queue
from volcano_global.errors import Invalid, NotFound
from volcano_global.jobspec.queue_document import read_queue
from volcano_global.schemas.common import error_responses
from volcano_global.schemas.queues import QueueCreate, QueueList, QueueOut, QueuePatch, QueueUsage
from volcano_global.services.tenancy import queues
from volcano_global.services.tenancy.queue_shares import current_shares

router = APIRouter(prefix="/api/v1/queues", tags=["queues"])
_BODY = document_body(
    "A Volcano Queue (scheduling.volcano.sh/v1beta1), or {name, weight, gpuQuota, priority}"
)


@router.post(
    "",
    status_code=201,
    operation_id="createQueue",
    responses=error_responses(401, 403, 409, 413, 415, 422),
    openapi_extra=_BODY,
)
async def create_queue(request: Request, session: Session, _: Admin) -> QueueOut:
    """Create a queue from a Volcano Queue document, or from the older shape."""
    doc = await read_document(request)
    if isinstance(doc, dict) and ("kind" in doc or "apiVersion" in doc):
        queue = await queues.apply_queue(session, definition=read_queue(doc), create_only=True)
    else:
        try:
            body = QueueCreate.model_validate(doc)
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
            ) from None
        queue = await queues.create_queue(
            session,
            name=body.name,
            weight=body.weight,
            gpu_quota=body.gpu_quota,
            priority=body.priority,
        )
    return await present_queue(session, queue)


@router.put(
    "/{name}",
    operation_id="applyQueue",
    responses=error_responses(401, 403, 413, 415, 422),
    openapi_extra=_BODY,
)
async def apply_queue(name: str, request: Request, session: Session, _: Admin) -> QueueOut:
    """Create or replace the queue from its Volcano Queue document."""
    definition = read_queue(await read_document(request))
    if definition.name != name:
        raise Invalid.one("metadata.name", f"must be {name!r}, the queue in the path")
    queue = await queues.apply_queue(session, definition=definition)
    return await present_queue(session, queue)


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
    return await present_queue(session, await queues.get_queue(session, name=name))


@router.get(
    "/{name}/document",
    operation_id="getQueueDocument",
    responses=error_responses(401, 403, 404),
)
async def get_queue_document(
    name: str, request: Request, session: Session, caller: Reader
) -> Response:
    """The queue as its Volcano Queue document (YAML when asked with Accept:
    application/yaml), with its status (state, and the GPUs it holds and deserves)."""
    caller.require_queue(name)
    queue = await queues.get_queue(session, name=name)
    share = (await current_shares(session)).get(name)
    status: dict[str, Any] = {}
    if share is not None:
        status["allocated"] = {"nvidia.com/gpu": str(share.allocated)}
    return render_document(request, queues.document_of(queue, status))


@router.patch("/{name}", operation_id="updateQueue", responses=error_responses(401, 403, 404, 422))
async def update_queue(name: str, body: QueuePatch, session: Session, _: Admin) -> QueueOut:
    """Change the fields given; `"gpuQuota": null` lifts the quota, a field left out stays;
    `"state": "Closed"` closes the queue (it refuses new jobs and keeps its own)."""
    changes = body.model_dump(include=body.model_fields_set)
    for key in ("weight", "priority", "state"):
        if key in changes and changes[key] is None:
            raise Invalid.one(key, "must not be null")
    queue = await queues.update_queue(session, name=name, changes=changes)
    return await present_queue(session, queue)


@router.delete(
    "/{name}",
    status_code=204,
    operation_id="deleteQueue",
    responses=error_responses(401, 403, 404, 409),
)
async def delete_queue(name: str, session: Session, settings: AppSettings, _: Admin) -> Response:
    await queues.delete_queue(session, name=name, default_queue=settings.scheduling.default_queue)
    return Response(status_code=204)


async def present_queue(session: Session, queue: Queue) -> QueueOut:
    """One queue as the API shows it; deleted since it was read (`present_queues`): not found."""
    shown = await present_queues(session, [queue])
    if not shown:
        raise NotFound(f"queue {queue.name!r} not found")
    return shown[0]


async def present_queues(session: Session, rows: list[Queue]) -> list[QueueOut]:
    """The queues as the API shows them. A read sees each statement's own snapshot (GETs run in
    autocommit, `db.engine.autocommit`): a queue deleted after `rows` were read has no share in
    the later read, and is left out - it is gone (it was a KeyError: a 500 that ended
    `vglobal get queues -w` when a queue was deleted under it)."""
    usage = await queues.queue_usage(session, queue_ids=[q.id for q in rows])
    shares = await current_shares(session)
    parents = {q.parent for q in await queues.list_queues(session)}
    out = []
    for q in rows:
        share = shares.get(q.name)
        if share is None:
            continue
        out.append(
            QueueOut(
                name=q.name,
                weight=q.weight,
                gpu_quota=q.gpu_quota,
                priority=q.priority,
                state=q.state,  # type: ignore[arg-type]
                parent=q.parent,
                leaf=q.name not in parents,
                reclaimable=q.reclaimable,
                guarantee_gpus=q.guarantee_gpus,
                spec=q.spec or {},
                usage=QueueUsage.model_validate(usage.get(q.id, queues.QueueUsage())),
                fair_share_gpus=share.deserved,
                deserved_gpus=share.deserved,
                allocated_gpus=share.allocated,
                share=None if math.isinf(share.share) else round(share.share, 4),
                created_at=q.created_at,
                updated_at=q.updated_at,
            )
        )
    return out
