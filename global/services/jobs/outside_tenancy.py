"""Jobs stored before the tenancy rules existed (or before an admin narrowed a queue's grants)
that break them: each start of the server cancels the waiting ones, naming the rules, so that
none of them ever reaches a member cluster. Jobs already placed or running are left to the
agents' namespace guard and RBAC (SECURITY.md)."""

from __future__ import annotations

import logging
import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Job, JobState, Queue
from volcano_global.jobspec.tenancy import TenancyRules, tenancy_refusals
from volcano_global.services.jobs.cancel import cancel_job

log = logging.getLogger(__name__)
PAGE = 200  # manifests read at a time


async def cancel_waiting_outside_tenancy(session: AsyncSession, *, rules: TenancyRules) -> int:
    """Cancel every Pending job that breaks its queue's rules; returns how many."""
    cancelled, after = 0, uuid.UUID(int=0)
    while True:
        page = (
            await session.execute(
                select(Job.id, Job.namespace, Job.priority_class_name, Job.manifest, Queue.name)
                .join(Queue, Queue.id == Job.queue_id)
                .where(Job.state == JobState.PENDING, Job.id > after)
                .order_by(Job.id)
                .limit(PAGE)
            )
        ).all()
        if not page:
            return cancelled
        for job_id, namespace, priority_class, manifest, queue in page:
            refusals = tenancy_refusals(
                manifest,
                namespace=namespace,
                priority_class=priority_class,
                policy=rules.policy(queue),
                rules=rules,
            )
            if refusals:
                why = "; ".join(str(r) for r in refusals)
                log.warning("job %s breaks the tenancy rules of queue %s: %s", job_id, queue, why)
                await cancel_job(
                    session, uid=job_id, by=f"the tenancy rules of queue {queue!r}: {why}"[:900]
                )
                cancelled += 1
        after = page[-1][0]
