"""A job's name, as Kubernetes holds it: taken by the newest job of that namespace/name until
it is deleted, finished or not (an unfinished one is also refused by the database's unique
index). `POST /api/v1/jobs` and `kubectl create` therefore answer the same 409, and
`DELETE /api/v1/jobs/{uid}` (`vglobal delete`) frees the name as `kubectl delete` does; the
deleted jobs stay readable by UID (their history)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import Job
from volcano_global.errors import Conflict
from volcano_global.services.events import record_event
from volcano_global.services.jobs.cancel import cancel_job, get_job


def finished_holder(namespace: str, name: str, state: str | None) -> Conflict:
    """The refusal of a name a finished job not deleted holds (the job writer finds it)."""
    return Conflict(
        f"job {namespace}/{name} already exists ({state}): delete it first "
        f"(vglobal delete {namespace}/{name}) or choose another name"
    )


def unfinished_holder(namespace: str, name: str) -> Conflict:
    """The refusal of a name a job that has not finished holds."""
    return Conflict(f"job {namespace}/{name} already exists and has not finished")


async def delete_job(session: AsyncSession, *, uid: uuid.UUID, by: str) -> Job:
    """Cancel the job if it has not finished, and free its name: it and every older job of
    the name are marked deleted (as `kubectl delete` does)."""
    job = await get_job(session, uid=uid)
    if not job.is_terminal:
        job = await cancel_job(session, uid=uid, by=by)
    now = utcnow()
    same_name = await session.execute(
        select(Job).where(
            Job.namespace == job.namespace, Job.name == job.name, Job.deleted_at.is_(None)
        )
    )
    for held in same_name.scalars():
        if held.is_terminal:
            held.deleted_at = now
    await record_event(session, job_id=job.id, reason="Deleted", message=f"deleted by {by}")
    await session.flush()
    return job


async def refuse_taken(session: AsyncSession, *, namespace: str, name: str) -> None:
    """Conflict, as the submission would answer, if a job not deleted holds the name (a
    preview says so too: `kubectl create --dry-run=server` of a taken name is a 409)."""
    held = (
        await session.scalars(
            select(Job)
            .where(Job.namespace == namespace, Job.name == name, Job.deleted_at.is_(None))
            .limit(1)
        )
    ).first()
    if held is None:
        return
    if held.is_terminal:
        raise finished_holder(namespace, name, held.state.value)
    raise unfinished_holder(namespace, name)
