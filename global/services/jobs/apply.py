"""`apply` of a Volcano Job or HyperJob document: idempotent by namespace/name.

A job is identified as kubectl identifies it, by namespace and name. Applying a document whose
job is alive (not finished) with the same document again changes nothing ("unchanged"); with a
different document it is refused (409): Volcano lets a Job's spec change only in its replicas,
minAvailable and priorityClassName, and the Global does not resize a placed gang, so the job
must be cancelled (or finish) first. A name whose job finished is free: applying it submits a
new job, as `submit` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.models import Job
from volcano_global.db.models.jobs import TERMINAL_JOB_STATES
from volcano_global.errors import Conflict, Invalid
from volcano_global.services.jobs import submission as submissions
from volcano_global.services.jobs.writer import JobWriter

Outcome = Literal["created", "unchanged"]


@dataclass(frozen=True)
class Applied:
    outcome: Outcome
    job_id: uuid.UUID


async def apply_job(
    document: dict[str, Any],
    submission: submissions.Submission,
    *,
    sessions: async_sessionmaker[AsyncSession],
    submitted_by: str,
    writer: JobWriter,
    events: Sequence[dict[str, Any]] = (),
) -> Applied:
    """Create the job the document describes unless the same document's job is alive.
    `submission` carries the rules (its body is replaced by the document's JSON)."""
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    if not metadata.get("name"):
        # kubectl refuses it too: a generated name can never be applied again.
        raise Invalid.one("metadata.name", "required by apply (generateName cannot be applied)")
    body = orjson.dumps(document)
    submission = replace(submission, body=body, fmt="json")
    _, job, _ = submissions.read_submission(submission)  # every field checked first
    wanted = orjson.loads(body)
    for _attempt in range(2):
        existing = await _alive(sessions, namespace=job.namespace, name=job.name)
        if existing is not None:
            if existing.manifest == wanted:
                return Applied("unchanged", existing.id)
            raise Conflict(
                f"job {job.namespace}/{job.name} exists (state {existing.state.value}) with a "
                "different document; a submitted job's spec does not change: cancel it first "
                "or apply under another name"
            )
        try:
            row = await submissions.submit_job(
                submission, submitted_by=submitted_by, writer=writer, events=events
            )
        except Conflict:
            continue  # applied at the same time by another caller: compare with theirs
        return Applied("created", row["id"])
    raise Conflict(f"job {job.namespace}/{job.name} is being created by another request")


async def _alive(
    sessions: async_sessionmaker[AsyncSession], *, namespace: str, name: str
) -> Job | None:
    """The job of that name that has not finished (at most one: a partial unique index)."""
    async with sessions() as session:
        return (
            await session.scalars(
                select(Job).where(
                    Job.namespace == namespace,
                    Job.name == name,
                    Job.state.not_in(TERMINAL_JOB_STATES),
                )
            )
        ).first()
