"""The job state machine: which state may follow which, the timestamps of each, locking jobs
before changing them, and the lifecycle the parser stored with each job."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer, lazyload

from volcano_global.db.base import utcnow
from volcano_global.db.models import Job, JobState
from volcano_global.db.parts import parts
from volcano_global.errors import Conflict
from volcano_global.jobspec import Lifecycle
from volcano_global.jobspec.lifecycle import lifecycle_of_document

# Which state may follow which. Placed/Dispatched fall back to Pending when a placement is
# withdrawn (a share could not start); Running does when a lost share requeues the job.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.PLACED, JobState.FAILED, JobState.CANCELLED}),
    JobState.PLACED: frozenset(
        {JobState.DISPATCHED, JobState.PENDING, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.DISPATCHED: frozenset(
        {JobState.RUNNING, JobState.PENDING, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.PENDING, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


def transition(job: Job, to: JobState, *, message: str = "") -> None:
    """Move a job along its state machine, stamping the time of the new state."""
    if to not in TRANSITIONS[job.state]:
        raise Conflict(f"job {job.namespace}/{job.name} cannot go from {job.state} to {to}")
    now = utcnow()
    job.state = to
    job.state_message = message
    if to is JobState.PENDING:
        job.placed_at = job.dispatched_at = job.started_at = None
    elif to is JobState.PLACED:
        job.placed_at = now
        job.pending_reason = None
    elif to is JobState.DISPATCHED:
        job.dispatched_at = now
    elif to is JobState.RUNNING:
        job.started_at = now
    else:
        job.finished_at = now


# What the parser derived for placing a job, and the text it came from: a job's state,
# times and lifecycle change without them.
_DOCUMENT = (Job.source, Job.gang, Job.communication, Job.split_policy)
LOCKED_PER_READ = 100  # jobs locked and loaded by one statement (`lock_jobs`)


async def lock_jobs(
    session: AsyncSession, job_ids: list[uuid.UUID], *, documents: bool = True
) -> dict[uuid.UUID, Job]:
    """The jobs, locked for the transaction in id order (as every locker of several jobs
    must, against deadlocks), as they are now, `LOCKED_PER_READ` a statement: each job is
    loaded (its models validated) as the statement's rows are buffered, with nothing to
    await, and a round locks hundreds. `documents=False`: without the job document's text and
    the gang and split the parser derived from it (each a model validated as it is read), for
    a writer that only moves jobs through their lifecycle; reading one of them then raises
    instead of querying."""
    query = (
        select(Job)
        .order_by(Job.id)
        .options(lazyload(Job.queue))
        .with_for_update(of=Job)
        .execution_options(populate_existing=True)
    )
    if not documents:
        query = query.options(*(defer(column, raiseload=True) for column in _DOCUMENT))
    ordered = sorted(set(job_ids))  # Postgres orders uuids as Python does: by their bytes
    jobs: dict[uuid.UUID, Job] = {}
    for part in parts(ordered, LOCKED_PER_READ):
        locked = (await session.execute(query.where(Job.id.in_(part)))).scalars()
        jobs.update((job.id, job) for job in locked)
    return jobs


def lifecycle_of(job: Job) -> Lifecycle:
    """The job's lifecycle as the parser read it at submission. A job stored by a replica of
    before the lifecycle columns (NULL: during a rolling upgrade both serve) has its document
    read again instead."""
    if job.running_estimate_seconds is None or job.max_retry is None:
        return lifecycle_of_document(job.manifest)
    # Built without validation: the columns were written from a validated Lifecycle (and the
    # policies are read back as models).
    return Lifecycle.model_construct(
        running_estimate_seconds=job.running_estimate_seconds,
        policies=job.lifecycle_policies or [],
        max_retry=job.max_retry,
        gang_start_timeout_seconds=job.gang_start_timeout_seconds,
    )
