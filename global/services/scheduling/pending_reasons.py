"""Step 3 of a round's commit for the jobs that only wait: their pending reasons, written in
one statement executed for every row (a round that considers the whole queue tells thousands
of jobs why they wait). A row whose reason did not change is not written: no new row version
on Postgres, no `updated_at` moved for the watches and the console."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy import bindparam, update
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Job, JobState

_JOBS = Job.__table__


async def write_reasons(session: AsyncSession, reasons: Mapping[uuid.UUID, str]) -> None:
    """Each job's pending reason, if it is still Pending (one cancelled while the round
    solved is left alone); in id order, as every writer of several job rows."""
    if not reasons:
        return
    statement = (
        update(_JOBS)
        .where(
            _JOBS.c.id == bindparam("job_id"),
            _JOBS.c.state == JobState.PENDING,
            _JOBS.c.pending_reason.is_distinct_from(bindparam("reason")),
        )
        .values(pending_reason=bindparam("reason"))
    )
    rows = [{"job_id": key, "reason": reasons[key]} for key in sorted(reasons)]
    await session.execute(statement, rows)
