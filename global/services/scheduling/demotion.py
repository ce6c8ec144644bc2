"""A running job demoted by time-sharing (`solver.timesharing`) on the server: its placement
ends (its shares cancelled through the outbox, as an eviction's) and it waits again, told why in
numbers. Not through its Volcano `policies`, as a lost share is: yielding to less-served work
of its class is no failure, and must not use up the job's `maxRetry`."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Job, JobState, Placement, PlacementState
from volcano_global.services.dispatch.supervision import GangOutcome
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle.jobs import transition
from volcano_global.services.lifecycle.placements import end_placement

EVENT = "Demoted"


async def demote(
    session: AsyncSession, *, placement: Placement, job: Job, message: str
) -> GangOutcome:
    """End the running job's placement and requeue it (`message`: what the rule says, in
    numbers); its attained service is kept on the job row by the caller."""
    await end_placement(
        session, placement=placement, state=PlacementState.RELEASED, cancel_reason=message
    )
    transition(job, JobState.PENDING, message=message)
    job.pending_reason = message
    await record_event(session, job_id=job.id, reason=EVENT, message=message)
    await session.flush()
    return GangOutcome(f"{job.namespace}/{job.name}", "Requeued", message)
