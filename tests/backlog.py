"""A tenant's backlog in seconds: copies of one stored job inserted in bulk (as if submitted
one after another), for tests and benchmarks of what a round reads."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import transaction
from volcano_global.db.models import Job

PER_INSERT = 500  # rows per INSERT: well under the bind-parameter limits


async def clone_jobs(
    sessions: async_sessionmaker[AsyncSession],
    job_id: str | uuid.UUID,
    count: int,
    *,
    queue_id: uuid.UUID | None = None,
) -> None:
    """`count` copies of the stored job `job_id` (new ids and names, in its queue or the
    queue `queue_id`), submitted a millisecond apart before it, so the copies stand ahead of
    it in its queue's line."""
    async with transaction(sessions) as session:
        row = (
            (await session.execute(select(Job.__table__).where(Job.id == uuid.UUID(str(job_id)))))
            .mappings()
            .one()
        )
        copies = [
            {
                **row,
                "id": uuid.uuid4(),
                "queue_id": queue_id or row["queue_id"],
                "name": f"{row['name'][:50]}-{n}",
                "submitted_at": row["submitted_at"] - timedelta(milliseconds=count - n),
            }
            for n in range(count)
        ]
        for start in range(0, count, PER_INSERT):
            await session.execute(insert(Job.__table__), copies[start : start + PER_INSERT])
