"""The tenancy boundary's rules as stored: each queue's annotations and the priority classes
an admin restricted, read for a submission to be checked against (jobspec/tenancy.py)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import PriorityClassRow, Queue
from volcano_global.jobspec.tenancy import RESTRICTED_CLASS, TenancyDefaults, TenancyRules


async def tenancy_rules(session: AsyncSession, *, defaults: TenancyDefaults) -> TenancyRules:
    """Read afresh for every submission, as the priority classes are: an annotation an admin
    changed a moment ago (on any replica) applies to the next job."""
    queues = await session.execute(select(Queue.name, Queue.annotations))
    classes = await session.execute(select(PriorityClassRow.name, PriorityClassRow.annotations))
    return TenancyRules(
        annotations={name: annotations or {} for name, annotations in queues},
        restricted_classes=frozenset(
            name
            for name, annotations in classes
            if str((annotations or {}).get(RESTRICTED_CLASS, "")).lower() == "true"
        ),
        defaults=defaults,
    )
