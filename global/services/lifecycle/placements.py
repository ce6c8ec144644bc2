"""The end of a placement: withdrawn before its job started, or released after (finished,
requeued, cancelled). Ending it frees the capacity and link bandwidth it held and revokes the
job token of its run; the clusters still running a share are told to remove it."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import Placement, PlacementState
from volcano_global.services.lifecycle.outbox import enqueue_cancellations
from volcano_global.services.tenancy.tokens import revoke_job_tokens
from volcano_global.services.wakeups import room_may_have_changed


async def end_placement(
    session: AsyncSession,
    *,
    placement: Placement,
    state: PlacementState,
    cancel_reason: str | None,
) -> None:
    """End an active placement in `state` (Withdrawn or Released). With `cancel_reason`,
    every cluster holding a share gets a cancellation saying it; without, none (every share
    has already ended where it ran)."""
    placement.state, placement.ended_at = state, utcnow()
    await revoke_job_tokens(session, job_id=placement.job_id, ended_at=placement.ended_at)
    room_may_have_changed(session)
    if cancel_reason is not None:
        await enqueue_cancellations(session, placement=placement, reason=cancel_reason)
