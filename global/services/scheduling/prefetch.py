"""A round's copies that belong to no share (`RoundPlan.prefetch`: a waiting job's data
copied, without its GPUs, to the cluster expected to have room for it first): written in the
round's commit as `data_copies` rows, each with its bandwidth as a link reservation of the
copy, planned by the round on what its starts and their staging left of the links - the same
books shares are planned on, so splits, share staging and these copies never oversubscribe a
link together. The destination's agent stream sends them (`grpc/agent_service.py`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import DataCopy, Job, JobState, LinkReservation
from volcano_global.services.data import source_uris
from volcano_global.services.data.copies import PREFETCH, described, stop_copies
from volcano_global.services.events import record_event
from volcano_global.services.scheduling.placing import staging_item
from volcano_global.services.scheduling.round_input import RoundContext
from volcano_global.services.wakeups import OUTBOX
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT, duration_text


async def write_copies(
    session: AsyncSession,
    *,
    copies: Mapping[str, Sequence[Copy]],
    context: RoundContext,
    purpose: str = PREFETCH,
    skip: set[str] | frozenset[str] = frozenset(),
) -> list[DataCopy]:
    """The copies (by the job they are made for) as rows with their link reservations; a
    job no longer waiting, or in `skip` (started or deferred by this commit), gets none. The
    commit has locked the jobs (`round_apply._acted_on`): the state read here holds until
    it commits."""
    wanted = {k: v for k, v in copies.items() if v and k not in skip and k in context.jobs}
    if not wanted:
        return []
    ids = [context.jobs[k] for k in wanted]
    jobs = {
        row.id: row
        for row in await session.execute(
            select(Job.id, Job.namespace, Job.name, Job.state).where(Job.id.in_(ids))
        )
    }
    names = {c.data for group in wanted.values() for c in group} - {CHECKPOINT}
    uris = await source_uris(session, names=names)
    rows = []
    for key, group in wanted.items():
        job = jobs.get(context.jobs[key])
        if job is None or job.state is not JobState.PENDING:
            continue
        for copy in group:
            rows.append(_write(session, copy, job, context, purpose, uris))
    await session.flush()
    OUTBOX.wrote(session, {row.destination_cluster_id for row in rows})
    for row in rows:
        await session.refresh(row, ["source_cluster", "destination_cluster"])
        await record_event(
            session,
            job_id=row.job_id,
            reason="PrefetchStarted",
            message=f"copying {described(row)} while it waits "
            f"(about {duration_text(row.bytes * 8 / (row.gbps * 1e9))})",
            fold=False,
        )
    return rows


def _write(
    session: AsyncSession,
    copy: Copy,
    job: object,
    context: RoundContext,
    purpose: str,
    uris: Mapping[str, str],
) -> DataCopy:
    job_id: uuid.UUID = job.id  # type: ignore[attr-defined]
    item = staging_item(copy, job_uid=job_id, uris=uris)
    row = DataCopy(
        id=uuid.uuid4(),
        data_source=copy.data,
        source_cluster_id=context.cluster_ids[copy.source],
        destination_cluster_id=context.cluster_ids[copy.destination],
        bytes=copy.bytes,
        gbps=copy.gbps,
        job_id=job_id,
        job_uid=job_id,
        purpose=purpose,
        namespace=job.namespace,  # type: ignore[attr-defined]
        item=item.to_payload(),
    )
    session.add(row)
    key = (copy.source, copy.destination)
    link_id = context.link_ids[key if key in context.link_ids else key[::-1]]
    session.add(LinkReservation(link_id=link_id, gbps=copy.gbps, copy_id=row.id))
    return row


async def stop_for_starts(
    session: AsyncSession, *, starts: Sequence[tuple[str, Sequence[str]]], context: RoundContext
) -> None:
    """The copies made for jobs that now start (job id, its clusters) stop, unless they go
    to a cluster the job starts in: a copy for nobody would hold bandwidth other jobs'
    staging waits for, and a copy half done is no data anywhere. One query for them all."""
    keep = {
        context.jobs[key]: {context.cluster_ids[c] for c in clusters}
        for key, clusters in starts
        if key in context.jobs
    }
    await stop_copies(
        session, job_ids=list(keep), reason="its job started in other clusters", keep=keep
    )
