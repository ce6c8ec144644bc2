"""Queues: weight, GPU quota, priority, and their current usage."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    TERMINAL_JOB_STATES,
    Cluster,
    ClusterGpuCapacity,
    ClusterState,
    Job,
    JobState,
    Queue,
)
from volcano_global.errors import Conflict, NotFound
from volcano_global.solver.queue_order import deserved

HOLDING_STATES = (JobState.PLACED, JobState.DISPATCHED, JobState.RUNNING)


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
        session.add(queue)
        await session.flush()
    return queue


async def create_queue(
    session: AsyncSession, *, name: str, weight: int, gpu_quota: int | None, priority: int
) -> Queue:
    if await _find(session, name) is not None:
        raise Conflict(f"queue {name!r} already exists")
    queue = Queue(name=name, weight=weight, gpu_quota=gpu_quota, priority=priority)
    session.add(queue)
    await session.flush()
    return queue


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
    """Apply the given fields (`weight`, `gpu_quota`, `priority`); `gpu_quota=None` lifts the
    quota."""
    queue = await get_queue(session, name=name)
    for key, value in changes.items():
        if key not in {"weight", "gpu_quota", "priority"}:
            raise ValueError(f"not a queue field: {key}")
        setattr(queue, key, value)
    await session.flush()
    return queue


async def delete_queue(session: AsyncSession, *, name: str, default_queue: str) -> None:
    queue = await get_queue(session, name=name)
    if name == default_queue:
        raise Conflict(f"queue {name!r} is the default queue and cannot be deleted")
    usage = (await queue_usage(session, queue_ids=[queue.id])).get(queue.id, QueueUsage())
    if usage.active_jobs:
        raise Conflict(f"queue {name!r} has {usage.active_jobs} unfinished jobs")
    jobs_left = await session.execute(select(Job.id).where(Job.queue_id == queue.id).limit(1))
    if jobs_left.first() is not None:
        raise Conflict(f"queue {name!r} still holds finished jobs' history")
    await session.delete(queue)
    await session.flush()


async def queue_usage(
    session: AsyncSession, *, queue_ids: list[uuid.UUID]
) -> dict[uuid.UUID, QueueUsage]:
    rows = await session.execute(
        select(
            Job.queue_id,
            func.sum(case((Job.state.in_(HOLDING_STATES), Job.total_gpus), else_=0)),
            func.sum(case((Job.state == JobState.PENDING, 1), else_=0)),
            func.sum(case((Job.state.not_in(TERMINAL_JOB_STATES), 1), else_=0)),
            func.sum(case((Job.state == JobState.PENDING, Job.total_gpus), else_=0)),
        )
        .where(Job.queue_id.in_(queue_ids))
        .group_by(Job.queue_id)
    )
    return {
        qid: QueueUsage(int(gpus or 0), int(pending or 0), int(active or 0), int(wanted or 0))
        for qid, gpus, pending, active, wanted in rows
    }


async def _find(session: AsyncSession, name: str) -> Queue | None:
    return (await session.execute(select(Queue).where(Queue.name == name))).scalar_one_or_none()


async def deserved_gpus(
    session: AsyncSession, *, rows: list[Queue], usage: dict[uuid.UUID, QueueUsage]
) -> dict[uuid.UUID, int]:
    """Each queue's deserved share of the Ready clusters' GPUs (see solver/queue_order.deserved)."""
    capacity = (
        await session.execute(
            select(func.coalesce(func.sum(ClusterGpuCapacity.total_gpus), 0))
            .join(Cluster, Cluster.id == ClusterGpuCapacity.cluster_id)
            .where(Cluster.state == ClusterState.READY)
        )
    ).scalar_one()
    wants = {}
    for q in rows:
        used = usage.get(q.id, QueueUsage())
        wants[str(q.id)] = (q.weight, used.allocated_gpus + used.pending_gpus, q.gpu_quota)
    shares = deserved(int(capacity), wants)
    return {q.id: shares[str(q.id)] for q in rows}
