"""Where a job's newest checkpoint is: the cluster it was written in and its size, from the
job's checkpoint reports (`POST /api/v1/jobs/{uid}/checkpoints`, the SDK's
`Runtime.checkpointed`). A restore elsewhere moves that many bytes, so placement prefers the
cluster that holds it (read by `needs.data_needs`)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    JobCheckpointLocation,
    Placement,
    PlacementState,
)
from volcano_global.errors import Invalid


async def record_location(
    session: AsyncSession,
    *,
    job_id: uuid.UUID,
    step: int | None,
    size_bytes: int | None,
    cluster: str | None = None,
    cluster_index: int | None = None,
) -> JobCheckpointLocation:
    """Keep this checkpoint as the job's newest. Its cluster: the one named, else the one of
    the share at `cluster_index` (the share's `VGLOBAL_CLUSTER_INDEX`, as the SDK sends it),
    else the job's only cluster when its active placement has one; None when none of these
    tells (a split job's report without its index)."""
    where = await _cluster(session, job_id=job_id, cluster=cluster, cluster_index=cluster_index)
    row = await session.get(JobCheckpointLocation, job_id)
    if row is None:
        row = JobCheckpointLocation(job_id=job_id)
        session.add(row)
    row.cluster, row.size_bytes, row.step, row.reported_at = where, size_bytes, step, utcnow()
    await session.flush()
    return row


async def find_location(
    session: AsyncSession, *, job_id: uuid.UUID
) -> JobCheckpointLocation | None:
    return await session.get(JobCheckpointLocation, job_id)


async def _cluster(
    session: AsyncSession, *, job_id: uuid.UUID, cluster: str | None, cluster_index: int | None
) -> str | None:
    if cluster is not None:
        if await session.scalar(select(Cluster.id).where(Cluster.name == cluster)) is None:
            raise Invalid.one("cluster", f"no cluster named {cluster!r} is registered")
        return cluster
    shares = (
        await session.execute(
            select(Cluster.name)
            .join(ClusterShare, ClusterShare.cluster_id == Cluster.id)
            .join(Placement, Placement.id == ClusterShare.placement_id)
            .where(Placement.job_id == job_id, Placement.state == PlacementState.ACTIVE)
            .order_by(ClusterShare.rank_offset)
        )
    ).scalars()
    clusters = list(shares)
    if cluster_index is not None:
        if not 0 <= cluster_index < len(clusters):
            raise Invalid.one(
                "clusterIndex",
                f"the job's active placement has {len(clusters)} shares (index 0 to "
                f"{len(clusters) - 1})",
            )
        return clusters[cluster_index]
    return clusters[0] if len(clusters) == 1 else None
