"""The queue tree as the fair share sees it: every queue with its weight, capability,
deserved, guarantee and the GPUs its jobs hold and wait for, and the Ready clusters' GPUs it
divides (`solver/fair_share.py`)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Cluster, ClusterGpuCapacity, ClusterState, Queue
from volcano_global.services.tenancy.queues import QueueUsage, queue_usage
from volcano_global.solver.fair_share import QueueNode, QueueShare, fair_shares


async def fleet_gpus(session: AsyncSession) -> int:
    """The Ready clusters' GPUs: what the root queue divides."""
    total = await session.execute(
        select(func.coalesce(func.sum(ClusterGpuCapacity.total_gpus), 0))
        .join(Cluster, Cluster.id == ClusterGpuCapacity.cluster_id)
        .where(Cluster.state == ClusterState.READY)
    )
    return int(total.scalar_one())


def queue_node(queue: Queue, *, held: int, pending: int) -> QueueNode:
    return QueueNode(
        name=queue.name,
        parent=queue.parent,
        weight=queue.weight,
        capability=queue.gpu_quota,
        deserved=queue.deserved_gpus,
        guarantee=queue.guarantee_gpus or 0,
        held=held,
        pending=pending,
    )


async def queue_tree(session: AsyncSession) -> dict[str, QueueNode]:
    """Every queue, with the GPUs its own jobs hold (Placed, Dispatched, Running) and ask for
    (Pending)."""
    rows = list((await session.execute(select(Queue))).scalars())
    usage = await queue_usage(session, queue_ids=[q.id for q in rows])
    out = {}
    for q in rows:
        used = usage.get(q.id, QueueUsage())
        out[q.name] = queue_node(q, held=used.allocated_gpus, pending=used.pending_gpus)
    return out


async def current_shares(session: AsyncSession) -> dict[str, QueueShare]:
    """Every queue's deserved GPUs, allocation and share now."""
    return fair_shares(await fleet_gpus(session), await queue_tree(session))
