"""Jobs held back after their placements were withdrawn, so that a gang a cluster refuses at
once (its agent reports the share Failed before it runs) is not placed and withdrawn again
every round: the first withdrawal is retried in the next round (a gang timeout or a lost
cluster says nothing against another try), the second after FIRST_WAIT_S, each further one
after twice the wait before it, never more than MAX_WAIT_S."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Job, JobState, Placement, PlacementState

FIRST_WAIT_S = 5.0
MAX_WAIT_S = 300.0


def wait_after(withdrawals: int) -> float:
    """Seconds a job waits after its `withdrawals`-th withdrawal."""
    if withdrawals < 2:
        return 0.0
    return min(FIRST_WAIT_S * 2 ** (withdrawals - 2), MAX_WAIT_S)


async def held_back(
    session: AsyncSession, *, job_ids: Collection[uuid.UUID], now: datetime
) -> set[uuid.UUID]:
    """Those of `job_ids` still waiting out the backoff of their last withdrawal."""
    if not job_ids:
        return set()
    rows = await session.execute(
        select(Placement.job_id, func.count(), func.max(Placement.ended_at))
        .where(Placement.job_id.in_(list(job_ids)), Placement.state == PlacementState.WITHDRAWN)
        .group_by(Placement.job_id)
    )
    return {
        job_id
        for job_id, count, last in rows
        if last is not None and _aware(last) + timedelta(seconds=wait_after(count)) > now
    }


async def backing_off(session: AsyncSession, *, now: datetime) -> set[uuid.UUID]:
    """Every waiting job still waiting out the backoff of its last withdrawal (as `held_back`,
    without naming the jobs: a round that reads the whole queue asks once)."""
    rows = await session.execute(
        select(Placement.job_id, func.count(), func.max(Placement.ended_at))
        .join(Job, Job.id == Placement.job_id)
        .where(Job.state == JobState.PENDING, Placement.state == PlacementState.WITHDRAWN)
        .group_by(Placement.job_id)
    )
    return {
        job_id
        for job_id, count, last in rows
        if last is not None and _aware(last) + timedelta(seconds=wait_after(count)) > now
    }


def _aware(moment: datetime) -> datetime:
    """Timestamps are stored in UTC; an aggregate may come back naive on SQLite."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
