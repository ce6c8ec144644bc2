"""What people see of data in motion (docs/data.md, "Seen by people"): the shares whose data is
being copied into their cluster now, the copies that belong to no share (prefetch), and one
job's data: what it needs, where each dataset is, its shares' staging and its copies. Reads
only."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    RUNNING_COPY,
    Cluster,
    ClusterShare,
    DataCopy,
    Job,
    Placement,
    Queue,
)
from volcano_global.db.models.placements import PlacementState
from volcano_global.errors import NotFound
from volcano_global.rpc.shares import SharePhase, StagingItem
from volcano_global.services.data.needs import data_needs
from volcano_global.solver.data import DataNeeds


@dataclass(frozen=True)
class ShareStaging:
    """One share's copies: the job it belongs to, its cluster (where the data goes), its phase
    and the agent's last word (the copy's progress while Staging), when its placement was
    made, when its agent last reported and when the copy ended (None: not yet)."""

    job_uid: uuid.UUID
    namespace: str
    name: str
    queue: str
    cluster: str
    phase: SharePhase
    message: str
    items: tuple[StagingItem, ...]
    placed_at: datetime
    reported_at: datetime | None
    staged_at: datetime | None


@dataclass(frozen=True)
class JobData:
    queue: str  # for the caller's check: a queue user reads its queues' jobs only
    needs: DataNeeds
    staging: list[ShareStaging]
    copies: list[CopyView]


_COLUMNS = (
    Job.id.label("job_uid"),
    Job.namespace,
    Job.name,
    Queue.name.label("queue"),
    Cluster.name.label("cluster"),
    ClusterShare.phase,
    ClusterShare.message,
    ClusterShare.staging,
    Placement.created_at.label("placed_at"),
    ClusterShare.reported_at,
    ClusterShare.staged_at,
)


def _shares() -> Any:
    return (
        select(*_COLUMNS)
        .select_from(ClusterShare)
        .join(Placement, Placement.id == ClusterShare.placement_id)
        .join(Job, Job.id == Placement.job_id)
        .join(Queue, Queue.id == Job.queue_id)
        .join(Cluster, Cluster.id == ClusterShare.cluster_id)
    )


def _share(row: Row[Any]) -> ShareStaging:
    return ShareStaging(
        job_uid=row.job_uid,
        namespace=row.namespace,
        name=row.name,
        queue=row.queue,
        cluster=row.cluster,
        phase=row.phase,
        message=row.message,
        items=tuple(StagingItem.from_payload(item) for item in row.staging or ()),
        placed_at=row.placed_at,
        reported_at=row.reported_at,
        staged_at=row.staged_at,
    )


async def staging_in_progress(
    session: AsyncSession, *, queues: tuple[str, ...] | None = None
) -> list[ShareStaging]:
    """The shares being staged now (phase Staging, of an Active placement: a withdrawn or
    released placement's share keeps its last phase but copies nothing more), oldest
    placement first. `queues`: only the jobs of these (a queue user's; None: every job)."""
    # From the few Active placements (their partial index), not a scan of every share ever
    # made: a Nominated placement has dispatched nothing, so copies nothing.
    query = _shares().where(
        Placement.state == PlacementState.ACTIVE, ClusterShare.phase == SharePhase.STAGING
    )
    if queues is not None:
        query = query.where(Queue.name.in_(queues))
    query = query.order_by(Placement.created_at, Job.namespace, Job.name, ClusterShare.rank_offset)
    return [_share(row) for row in (await session.execute(query)).all()]


async def job_data(session: AsyncSession, *, job_id: uuid.UUID) -> JobData:
    """The job's data needs (`data_needs`: its claims and declaration, each dataset's size and
    the clusters that hold it, its checkpoint) and the staging of its latest placement's shares
    (those given copies, whatever their phase now: a copy that ended shows when)."""
    queue = (
        await session.execute(
            select(Queue.name).join(Job, Job.queue_id == Queue.id).where(Job.id == job_id)
        )
    ).scalar_one_or_none()
    if queue is None:
        raise NotFound(f"job {job_id} not found")
    needs = (await data_needs(session, job_ids=[job_id]))[job_id]
    # The latest placement is the active one while there is one: a new placement is made only
    # after the previous one was withdrawn or released.
    latest = (
        select(Placement.id)
        .where(Placement.job_id == job_id)
        .order_by(Placement.created_at.desc(), Placement.generation.desc())
        .limit(1)
        .scalar_subquery()
    )
    rows = await session.execute(
        _shares().where(ClusterShare.placement_id == latest).order_by(ClusterShare.rank_offset)
    )
    # Picked here, not in SQL: a share without copies may hold JSON null or SQL NULL.
    shares = [_share(row) for row in rows.all()]
    staging = [s for s in shares if s.items or s.phase is SharePhase.STAGING]
    copies = await copies_in_progress(session, job_id=job_id)
    return JobData(queue=queue, needs=needs, staging=staging, copies=copies)


@dataclass(frozen=True)
class CopyView:
    """A copy that belongs to no share (`data_copies`) as people see it."""

    uid: uuid.UUID
    purpose: str
    job_uid: uuid.UUID | None
    namespace: str
    name: str | None  # its job's (None: made for no job)
    queue: str | None
    data_source: str
    bytes: int
    source_cluster: str
    cluster: str  # where the data goes
    gbps: float
    state: str
    staged_bytes: int
    message: str
    reason: str
    created_at: datetime
    reported_at: datetime | None
    ended_at: datetime | None


async def copies_in_progress(
    session: AsyncSession, *, queues: tuple[str, ...] | None = None, job_id: uuid.UUID | None = None
) -> list[CopyView]:
    """The copies that belong to no share and run now (or every one made for `job_id`),
    oldest first. `queues`: only those made for the jobs of these queues (one made for no job,
    or for a job since deleted, names a namespace and data of someone's: admins only)."""
    query = (
        select(DataCopy, Job.name, Queue.name.label("queue"))
        .outerjoin(Job, Job.id == DataCopy.job_id)
        .outerjoin(Queue, Queue.id == Job.queue_id)
        .order_by(DataCopy.created_at, DataCopy.id)
    )
    query = (
        query.where(DataCopy.job_id == job_id)
        if job_id is not None
        else query.where(DataCopy.state.in_(RUNNING_COPY))
    )
    if queues is not None:
        query = query.where(Queue.name.in_(queues))
    return [_copy(c, name, queue) for c, name, queue in (await session.execute(query)).all()]


def _copy(c: DataCopy, name: str | None, queue: str | None) -> CopyView:
    return CopyView(
        uid=c.id,
        purpose=c.purpose,
        job_uid=c.job_id,
        namespace=c.namespace,
        name=name,
        queue=queue,
        data_source=c.data_source,
        bytes=c.bytes,
        source_cluster=c.source_cluster.name,
        cluster=c.destination_cluster.name,
        gbps=c.gbps,
        state=c.state.value,
        staged_bytes=c.staged_bytes,
        message=c.message,
        reason=c.reason,
        created_at=c.created_at,
        reported_at=c.reported_at,
        ended_at=c.ended_at,
    )
