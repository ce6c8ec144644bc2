"""What Prometheus is told about each queue, as Kueue tells it per ClusterQueue: how many jobs
wait in it and how long the oldest has waited (read at scrape time), and how long each job
waited before a round placed it (observed by the scheduling loop)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Job, JobState, Queue


async def waiting_by_queue(session: AsyncSession) -> list[tuple[str, int, datetime | None]]:
    """Every queue with its pending jobs and the oldest one's submission time (None: none
    waits), in name order: a queue with nothing waiting reports 0 rather than vanishing."""
    pending = (
        select(
            Job.queue_id,
            func.count().label("pending"),
            func.min(Job.submitted_at).label("oldest"),
        )
        .where(Job.state == JobState.PENDING)
        .group_by(Job.queue_id)
        .subquery()
    )
    rows = await session.execute(
        select(Queue.name, func.coalesce(pending.c.pending, 0), pending.c.oldest)
        .outerjoin(pending, pending.c.queue_id == Queue.id)
        .order_by(Queue.name)
    )
    return [(name, int(count), oldest) for name, count, oldest in rows]


async def placement_waits(session: AsyncSession, ids: list[str]) -> list[tuple[str, float]]:
    """For jobs just placed: their queue and how long they waited, submission to placement."""
    if not ids:
        return []
    rows = await session.execute(
        select(Queue.name, Job.submitted_at, Job.placed_at)
        .join(Queue, Queue.id == Job.queue_id)
        .where(Job.id.in_([uuid.UUID(i) for i in ids]), Job.placed_at.is_not(None))
    )
    return [(name, (placed - submitted).total_seconds()) for name, submitted, placed in rows]
