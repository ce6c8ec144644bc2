"""The end of a placement: withdrawn before its job started, or released after (finished,
requeued, demoted, evicted, resized, cancelled). Ending it frees the capacity and link
bandwidth it held and revokes the job token of its run; the clusters still running a share are
told to remove it; the GPU-seconds the run received are added to the job's attained service
(time-sharing orders by it), however the run ended."""

from __future__ import annotations

from sqlalchemy import func, inspect, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import ClusterShare, Job, Placement, PlacementState
from volcano_global.services.lifecycle.outbox import enqueue_cancellations
from volcano_global.services.tenancy.tokens import revoke_job_tokens
from volcano_global.services.wakeups import room_may_have_changed


async def end_placement(
    session: AsyncSession,
    *,
    placement: Placement,
    state: PlacementState,
    cancel_reason: str | None,
    revoke_tokens: bool = True,
) -> None:
    """End an active placement in `state` (Withdrawn or Released). With `cancel_reason`,
    every cluster holding a share gets a cancellation saying it; without, none (every share
    has already ended where it ran). `revoke_tokens=False`: the caller revokes the run's job
    tokens itself, with other placements' in one statement (`revoke_job_tokens`), in the same
    transaction."""
    placement.state, placement.ended_at = state, utcnow()
    await _attain(session, placement)
    if revoke_tokens:
        await revoke_job_tokens(session, job_ids=[placement.job_id], ended_at=placement.ended_at)
    room_may_have_changed(session)
    if cancel_reason is not None:
        await enqueue_cancellations(session, placement=placement, reason=cancel_reason)


async def _attain(session: AsyncSession, placement: Placement) -> None:
    """The run's GPUs x its time running, added to the job's attained service. Its job and
    shares as the session holds them, if it does: a query would flush the session's pending
    changes first, once per placement of a batch."""
    job = await session.get(Job, placement.job_id)
    if job is None or job.started_at is None or placement.ended_at is None:
        return
    if "shares" in inspect(placement).unloaded:
        gpus = (
            await session.execute(
                select(func.coalesce(func.sum(ClusterShare.gpus), 0)).where(
                    ClusterShare.placement_id == placement.id
                )
            )
        ).scalar_one()
    else:
        gpus = sum(share.gpus for share in placement.shares)
    ran = max((placement.ended_at - job.started_at).total_seconds(), 0.0)
    job.attained_gpu_s = (job.attained_gpu_s or 0.0) + int(gpus) * ran
