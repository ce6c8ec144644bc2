"""The first of preemption's two steps on the server: evicting (`solver.preemption` chose the
victims). In the caller's transaction, for one eviction: each victim's active placement ends
and its shares are cancelled through the outbox, and the victim is requeued through its
Volcano `policies` as a lost share is (`PodEvicted`; its attempt count goes on, up to
`maxRetry`), with an event naming the preemptor; the preemptor's pending reason says what was
evicted and why.

Not built yet (issue 22): calling this from the round, the nomination that keeps the freed
capacity for the preemptor, the wait for every victim's share to be reported gone before the
preemptor starts, and the failpoint between the two steps.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Job, Placement, PlacementState
from volcano_global.services.dispatch.supervision import GangOutcome, share_lost
from volcano_global.services.lifecycle.jobs import lock_jobs
from volcano_global.solver.preemption import Eviction

EVENT = "PodEvicted"  # what Volcano's policies see when a job's pods are evicted


def preempted_by(preemptor: Job) -> str:
    return f"Preempted by {preemptor.namespace}/{preemptor.name} (priority {preemptor.priority})"


async def evict(session: AsyncSession, eviction: Eviction) -> list[GangOutcome]:
    """Evict `eviction.victims` for `eviction.preemptor` (ids are job ids). A victim that no
    longer holds an active placement (it ended meanwhile) is skipped."""
    preemptor_id = uuid.UUID(eviction.preemptor)
    ids = [uuid.UUID(v.id) for v in eviction.victims]
    jobs = await lock_jobs(session, [preemptor_id, *ids])
    preemptor = jobs[preemptor_id]
    message = preempted_by(preemptor)
    placements = (
        await session.execute(
            select(Placement)
            .where(Placement.job_id.in_(ids), Placement.state == PlacementState.ACTIVE)
            .with_for_update()
        )
    ).scalars()
    outcomes = []
    for placement in placements:
        victim = jobs[placement.job_id]
        outcomes.append(
            await share_lost(session, placement=placement, job=victim, event=EVENT, message=message)
        )
    preemptor.pending_reason = eviction.reason
    await session.flush()
    return outcomes
