"""Queues as Volcano's Queue documents (weight, capability, deserved, guarantee, reclaimable,
parent, state), the older REST shape (weight, GPU quota, priority) mapped onto them, and their
current usage."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.locks import QUEUE_TREE_LOCK_KEY, advisory_xact_lock
from volcano_global.db.models import (
    TERMINAL_JOB_STATES,
    ClusterShare,
    Job,
    JobState,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.errors import Conflict, Invalid, NotFound
from volcano_global.jobspec.queue_document import (
    QueueDefinition,
    gpus_of,
    queue_document,
    read_queue,
)
from volcano_global.services.wakeups import room_may_have_changed

HOLDING_STATES = (JobState.PLACED, JobState.DISPATCHED, JobState.RUNNING)
# Pending and not a preemptor waiting for its victims: its nomination holds its place (and
# its GPUs count as held). Correlated: the (job_id, state) index answers it, where NOT IN
# would scan the placements.
WAITING = and_(
    Job.state == JobState.PENDING,
    ~exists().where(Placement.job_id == Job.id, Placement.state == PlacementState.NOMINATED),
)


@dataclass(frozen=True)
class QueueUsage:
    allocated_gpus: int = 0
    pending_jobs: int = 0
    active_jobs: int = 0
    pending_gpus: int = 0


async def ensure_queue(session: AsyncSession, *, name: str) -> Queue:
    queue = await _find(session, name)
    if queue is None:
        queue = Queue(name=name)
        _store(queue, read_queue(legacy_document(name, 1, None, 0)))
        session.add(queue)
        await session.flush()
    return queue


async def create_queue(
    session: AsyncSession, *, name: str, weight: int, gpu_quota: int | None, priority: int
) -> Queue:
    """The older REST shape: a Volcano Queue whose capability is the GPU quota."""
    return await apply_queue(
        session,
        definition=read_queue(legacy_document(name, weight, gpu_quota, priority)),
        create_only=True,
    )


def legacy_document(name: str, weight: int, gpu_quota: int | None, priority: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": True}
    if gpu_quota is not None:
        spec["capability"] = {"nvidia.com/gpu": gpu_quota}
    if priority:
        spec["priority"] = priority
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


async def apply_queue(
    session: AsyncSession, *, definition: QueueDefinition, create_only: bool = False
) -> Queue:
    """Create the queue, or replace its document (`create_only`: a Conflict if it exists).
    Checks what needs the other queues, as Volcano's webhook does: the parent exists (an
    ancestor the `volcano.sh/hierarchy` annotation names is made, with its weight), is not the
    queue itself or below it, and holds no unfinished jobs (jobs run only in leaves)."""
    queue = await _find(session, definition.name)
    if queue is not None and create_only:
        raise Conflict(f"queue {definition.name!r} already exists")
    parent = definition.parent
    if parent is not None:
        # Replicas change the tree one at a time: two queues made each other's parent at
        # once would both pass the cycle check (or deadlock on each other's rows).
        await advisory_xact_lock(session, QUEUE_TREE_LOCK_KEY)
        await _ensure_ancestors(session, definition)
        await _check_parent(session, definition.name, parent)
    if queue is None:
        queue = Queue(name=definition.name)
        session.add(queue)
    _store(queue, definition)
    room_may_have_changed(session)  # a quota, share or state other jobs may be placed under
    await session.flush()
    return queue


def store_definition(queue: Queue, d: QueueDefinition) -> None:
    """Set the queue's document and the columns read from it."""
    _store(queue, d)


def _store(queue: Queue, d: QueueDefinition) -> None:
    queue.spec, queue.labels, queue.annotations = d.spec, d.labels, d.annotations
    queue.weight, queue.priority, queue.state, queue.parent = (
        d.weight,
        d.priority,
        d.state,
        d.parent,
    )
    queue.gpu_quota, queue.deserved_gpus = d.capability_gpus, d.deserved_gpus
    queue.guarantee_gpus, queue.reclaimable = d.guarantee_gpus, d.reclaimable


async def _ensure_ancestors(session: AsyncSession, d: QueueDefinition) -> None:
    """Queues on the annotations' path that do not exist yet are made (Volcano's hierarchy
    reads them from the path alone)."""
    above: str | None = None
    for name, weight in d.hierarchy[1:-1]:
        if await _find(session, name) is None:
            spec: dict[str, Any] = {"weight": max(1, round(weight))}
            if above is not None:
                spec["parent"] = above
            doc = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": spec,
            }
            session.add(q := Queue(name=name))
            _store(q, read_queue(doc))
            await session.flush()
        above = name


async def _check_parent(session: AsyncSession, name: str, parent: str) -> None:
    # Locked: a job inserted into the parent holds a key-share lock on its row until it
    # commits, so the count of its jobs below sees every submission that got in first.
    found = await _find(session, parent, lock=True)
    if found is None:
        raise Invalid.one("spec.parent", f"parent queue {parent!r} does not exist")
    ancestor: Queue | None = found
    while ancestor is not None:  # the parent must not be the queue itself or below it
        if ancestor.name == name:
            raise Invalid.one("spec.parent", f"queue {parent!r} is below {name!r}: a cycle")
        ancestor = await _find(session, ancestor.parent) if ancestor.parent else None
    usage = (await queue_usage(session, queue_ids=[found.id])).get(found.id, QueueUsage())
    if usage.active_jobs:
        raise Conflict(
            f"queue {parent!r} cannot be the parent of {name!r}: it has {usage.active_jobs} "
            "unfinished jobs (jobs run only in leaf queues)"
        )


def document_of(queue: Queue, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The queue as its Volcano Queue document (what was applied, unchanged)."""
    return queue_document(
        name=queue.name,
        spec=queue.spec or {},
        labels=queue.labels or {},
        annotations=queue.annotations or {},
        state=queue.state,
        status=status,
    )


async def get_queue(session: AsyncSession, *, name: str) -> Queue:
    queue = await _find(session, name)
    if queue is None:
        raise NotFound(f"queue {name!r} not found")
    return queue


async def find_queue(session: AsyncSession, *, name: str) -> Queue | None:
    return await _find(session, name)


async def list_queues(session: AsyncSession) -> list[Queue]:
    return list((await session.execute(select(Queue).order_by(Queue.name))).scalars())


async def update_queue(session: AsyncSession, *, name: str, changes: dict[str, Any]) -> Queue:
    """Apply the given fields (`weight`, `gpu_quota`, `priority`, `state`) to the queue's
    document; `gpu_quota=None` lifts the GPU capability."""
    queue = await get_queue(session, name=name)
    doc = document_of(queue)
    spec = doc["spec"]
    for key, value in changes.items():
        if key == "weight":
            spec["weight"] = value
        elif key == "priority":
            spec["priority"] = value
        elif key == "gpu_quota":
            capability = {
                k: v for k, v in (spec.get("capability") or {}).items() if gpus_of({k: v}) is None
            }
            if value is not None:
                capability["nvidia.com/gpu"] = value
            if capability:
                spec["capability"] = capability
            else:
                spec.pop("capability", None)
        elif key == "state":
            doc["status"]["state"] = value
        else:
            raise ValueError(f"not a queue field: {key}")
    return await apply_queue(session, definition=read_queue(doc))


async def set_state(session: AsyncSession, *, name: str, state: str) -> Queue:
    """Open or Close a queue (`vcctl queue operate`): a Closed queue refuses new jobs and keeps
    the ones it has."""
    return await update_queue(session, name=name, changes={"state": state})


async def delete_queue(session: AsyncSession, *, name: str, default_queue: str) -> None:
    queue = await get_queue(session, name=name)
    if name == default_queue:
        raise Conflict(f"queue {name!r} is the default queue and cannot be deleted")
    usage = (await queue_usage(session, queue_ids=[queue.id])).get(queue.id, QueueUsage())
    if usage.active_jobs:
        raise Conflict(f"queue {name!r} has {usage.active_jobs} unfinished jobs")
    child = await session.execute(select(Queue.name).where(Queue.parent == name).limit(1))
    if (found := child.first()) is not None:
        raise Conflict(f"queue {name!r} is the parent of queue {found[0]!r}")
    jobs_left = await session.execute(select(Job.id).where(Job.queue_id == queue.id).limit(1))
    if jobs_left.first() is not None:
        raise Conflict(f"queue {name!r} still holds finished jobs' history")
    await session.delete(queue)
    await session.flush()


async def queue_usage(
    session: AsyncSession, *, queue_ids: list[uuid.UUID]
) -> dict[uuid.UUID, QueueUsage]:
    """Per queue: the GPUs its jobs hold (their active placements' shares: an elastic job
    holds the width placed, not its document's; a preemptor, its nomination's), its Pending
    jobs, and the GPUs its waiting jobs ask for (not a nominated preemptor's: they are held)."""
    held = dict(
        (
            await session.execute(
                select(Job.queue_id, func.sum(ClusterShare.gpus))
                .join(Placement, Placement.job_id == Job.id)
                .join(ClusterShare, ClusterShare.placement_id == Placement.id)
                .where(
                    Job.queue_id.in_(queue_ids),
                    or_(
                        and_(
                            Job.state.in_(HOLDING_STATES),
                            Placement.state == PlacementState.ACTIVE,
                        ),
                        Placement.state == PlacementState.NOMINATED,
                    ),
                )
                .group_by(Job.queue_id)
            )
        ).all()
    )
    rows = await session.execute(
        select(
            Job.queue_id,
            func.sum(case((Job.state == JobState.PENDING, 1), else_=0)),
            func.sum(case((Job.state.not_in(TERMINAL_JOB_STATES), 1), else_=0)),
            func.sum(case((WAITING, Job.total_gpus), else_=0)),
        )
        .where(Job.queue_id.in_(queue_ids))
        .group_by(Job.queue_id)
    )
    return {
        qid: QueueUsage(
            int(held.get(qid) or 0), int(pending or 0), int(active or 0), int(wanted or 0)
        )
        for qid, pending, active, wanted in rows
    }


async def _find(session: AsyncSession, name: str, *, lock: bool = False) -> Queue | None:
    query = select(Queue).where(Queue.name == name)
    if lock:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()
