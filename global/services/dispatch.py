"""The lifecycle the agents' reports drive. A split job is Dispatched when every share is
accepted, Running only when every share reports all its pods started (cross-cluster gang), and
Succeeded when every share has. A share that fails is handed to gang supervision: before the
job runs the whole placement is withdrawn and the job requeued; after, the job's policy
decides."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global import failpoints
from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    EventType,
    Job,
    JobState,
    OutboxKind,
    OutboxMessage,
    Placement,
    PlacementState,
)
from volcano_global.services.events import record_event
from volcano_global.services.gang import share_lost
from volcano_global.services.lifecycle import transition

WARNING_PREFIX = "warning: "  # a report message the job's events should show as a Warning
# How far a share has come; a report never moves a share back (Failed/Cancelled: 9, always taken).
_PROGRESS = {"Assigned": 0, "Accepted": 1, "Running": 2, "Succeeded": 3}


async def report(
    session: AsyncSession,
    *,
    cluster_id: uuid.UUID,
    placement_id: uuid.UUID,
    phase: str,
    message: str = "",
) -> None:
    """Apply an agent's report about its share of a placement (idempotent)."""
    kind = OutboxKind.CANCEL if phase == "Cancelled" else OutboxKind.ASSIGN
    acked = await session.execute(
        select(OutboxMessage).where(
            OutboxMessage.cluster_id == cluster_id,
            OutboxMessage.placement_id == placement_id,
            OutboxMessage.kind == kind,
            OutboxMessage.acked_at.is_(None),
        )
    )
    for delivered in acked.scalars():
        delivered.acked_at = utcnow()
        if "job_token" in delivered.payload:  # the secret need not stay in the table
            delivered.payload = {k: v for k, v in delivered.payload.items() if k != "job_token"}
    placement = (
        await session.execute(
            select(Placement).where(Placement.id == placement_id).with_for_update()
        )
    ).scalar_one_or_none()
    if placement is None or placement.state is not PlacementState.ACTIVE:
        return  # a report about a withdrawn or finished placement: acknowledged, nothing else
    share = next((s for s in placement.shares if s.cluster_id == cluster_id), None)
    if share is None or _PROGRESS.get(phase, 9) < _PROGRESS.get(share.phase, 0):
        return  # unknown share, or an older report resent after a newer one was stored
    share.phase, share.reported_at, share.message = phase, utcnow(), message[:1000]
    job = await session.get(
        Job, placement.job_id, with_for_update={"of": Job}, populate_existing=True
    )
    if job is None or job.is_terminal:
        return
    phases = {s.phase for s in placement.shares}
    where = f"{share.cluster.name}: {phase}" + (f" ({message})" if message else "")
    if message.startswith(WARNING_PREFIX):  # the share runs, but the user should know
        await record_event(
            session,
            job_id=job.id,
            type=EventType.WARNING,
            reason="ClusterWarning",
            message=f"{share.cluster.name}: {message.removeprefix(WARNING_PREFIX)}",
        )
    if phase in ("Failed", "Cancelled"):
        # Cancelled here means the share was removed in its cluster without our asking.
        await share_lost(
            session,
            placement=placement,
            job=job,
            event="PodFailed",
            message=f"share in {where}",
        )
        return
    if job.state is JobState.PLACED and phases <= {"Accepted", "Running", "Succeeded"}:
        transition(job, JobState.DISPATCHED, message="every share accepted")
        await record_event(
            session, job_id=job.id, reason="Dispatched", message="every cluster accepted its share"
        )
    if job.state is JobState.DISPATCHED and phases <= {"Running", "Succeeded"}:
        transition(job, JobState.RUNNING, message="every share running")
        clusters = ", ".join(s.cluster.name for s in placement.shares)
        await record_event(
            session, job_id=job.id, reason="Running", message=f"all pods started in {clusters}"
        )
    if job.state is JobState.RUNNING and phases == {"Succeeded"}:
        transition(job, JobState.SUCCEEDED, message="every share succeeded")
        placement.state, placement.ended_at = PlacementState.RELEASED, utcnow()
        await record_event(
            session, job_id=job.id, reason="Succeeded", message="every share completed"
        )
    await session.flush()
    failpoints.hit("report-commit")
