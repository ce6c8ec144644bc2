"""Reading one job for a change, and cancelling it."""

from __future__ import annotations

import uuid

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import raiseload, selectinload

from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    Job,
    JobState,
    Placement,
    PlacementState,
)
from volcano_global.db.models.placements import HOLDING
from volcano_global.errors import Conflict, NotFound
from volcano_global.services.data.copies import stop_copies
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle.jobs import lock_jobs, transition
from volcano_global.services.lifecycle.placements import end_placement
from volcano_global.services.wakeups import room_may_have_changed


async def get_job(session: AsyncSession, *, uid: uuid.UUID) -> Job:
    job = await session.get(Job, uid)
    if job is None:
        raise NotFound(f"job {uid} not found")
    return job


async def cancel_job(session: AsyncSession, *, uid: uuid.UUID, by: str) -> Job:
    """Cancel a job; cancelling a cancelled job changes nothing. Its active placement is
    released, which frees its capacity and link bandwidth, and the copies made for it while
    it waited are stopped."""
    await get_job(session, uid=uid)
    # Locked placement first, then the job (the order of the rounds and the agents' reports),
    # and both read again as they are now: a nomination started, or a round's placement made,
    # since the first read is what gets ended (else its shares would run for a cancelled job).
    await session.execute(_ACTIVE_PLACEMENT.with_for_update(of=Placement), {"job_id": uid})
    job = (await lock_jobs(session, [uid]))[uid]
    if job.state is JobState.CANCELLED:
        return job
    if job.is_terminal:
        raise Conflict(f"job {job.namespace}/{job.name} already {job.state}")
    active = (
        await session.execute(
            _ACTIVE_PLACEMENT.execution_options(populate_existing=True), {"job_id": uid}
        )
    ).scalar_one_or_none()
    transition(job, JobState.CANCELLED, message=f"cancelled by {by}")
    job.pending_reason = None
    room_may_have_changed(session)  # what it holds, or the place in line it was owed
    if active is not None:
        nominated = active.state is PlacementState.NOMINATED  # nothing was dispatched
        await end_placement(
            session,
            placement=active,
            state=PlacementState.WITHDRAWN if nominated else PlacementState.RELEASED,
            cancel_reason=None if nominated else f"cancelled by {by}",
        )
    # A copy made for it while it waited is for nobody now: its bandwidth returns.
    await stop_copies(session, job_ids=[job.id], reason=f"its job was cancelled by {by}")
    await record_event(session, job_id=job.id, reason="Cancelled", message=f"cancelled by {by}")
    await session.flush()
    return job


# The job's active (or, for a preemptor, nominated) placement with its shares and their
# clusters (not the clusters' GPU capacities: what releasing it needs).
_ACTIVE_PLACEMENT = (
    select(Placement)
    .where(Placement.job_id == bindparam("job_id"), Placement.state.in_(HOLDING))
    .options(
        selectinload(Placement.shares)
        .joinedload(ClusterShare.cluster)
        .raiseload(Cluster.capacities),
        raiseload(Placement.link_reservations),
    )
)
