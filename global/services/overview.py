"""Federation-wide figures: jobs by state, clusters by state, GPUs by model. Read by the
overview endpoint, the console and the metrics scrape."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    Cluster,
    ClusterGpuCapacity,
    ClusterState,
    Job,
    JobState,
)


async def job_counts(session: AsyncSession) -> dict[JobState, int]:
    rows = await session.execute(select(Job.state, func.count()).group_by(Job.state))
    counts: dict[Any, int] = {state: count for state, count in rows}
    return {state: int(counts.get(state, 0)) for state in JobState}


async def cluster_counts(session: AsyncSession) -> dict[ClusterState, int]:
    rows = await session.execute(select(Cluster.state, func.count()).group_by(Cluster.state))
    counts: dict[Any, int] = {state: count for state, count in rows}
    return {state: int(counts.get(state, 0)) for state in ClusterState}


async def gpu_capacity(session: AsyncSession) -> list[tuple[str, str, int, int]]:
    """(cluster, GPU model, total, free) of every cluster."""
    rows = await session.execute(
        select(
            Cluster.name,
            ClusterGpuCapacity.gpu_model,
            ClusterGpuCapacity.total_gpus,
            ClusterGpuCapacity.free_gpus,
        )
        .join(ClusterGpuCapacity, ClusterGpuCapacity.cluster_id == Cluster.id)
        .order_by(Cluster.name, ClusterGpuCapacity.gpu_model)
    )
    return [(name, model, int(total), int(free)) for name, model, total, free in rows]


def by_model(capacity: list[tuple[str, str, int, int]]) -> dict[str, tuple[int, int]]:
    """GPU model -> (total, free) over all clusters."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for _, model, total, free in capacity:
        totals[model][0] += total
        totals[model][1] += free
    return {model: (t, f) for model, (t, f) in sorted(totals.items())}
