"""A round's copies that belong to no share (`RoundPlan.prefetch`: a waiting job's data
copied, without its GPUs, to the cluster expected to have room for it first;
`RoundPlan.replicas`: a popular dataset copied ahead of demand, for no job): written in the
round's commit as `data_copies` rows, each with its bandwidth as a link reservation of the
copy, planned by the round on what its starts and their staging left of the links - the same
books shares are planned on, so splits, share staging and these copies never oversubscribe a
link together. The destination's agent stream sends them (`grpc/agent_service.py`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import DataCopy, Job, JobState, LinkReservation
from volcano_global.services.data import source_uris
from volcano_global.services.data.copies import PREFETCH, REPLICA, described, stop_copies
from volcano_global.services.events import record_event
from volcano_global.services.scheduling.placing import staging_item
from volcano_global.services.scheduling.round_input import RoundContext
from volcano_global.services.wakeups import OUTBOX
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT, duration_text

log = logging.getLogger(__name__)


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
            rows.append(
                _write(
                    session,
                    copy,
                    context,
                    uris,
                    purpose=purpose,
                    namespace=job.namespace,
                    job=job.id,
                )
            )
    await _stored(session, rows)
    for row in rows:
        await record_event(
            session,
            job_id=row.job_id,
            reason="PrefetchStarted",
            message=f"copying {described(row)} while it waits (about {_lasts(row)})",
            fold=False,
        )
    return rows


async def write_replicas(
    session: AsyncSession, *, copies: Sequence[Copy], context: RoundContext, namespace: str
) -> list[DataCopy]:
    """The round's copies ahead of demand (`RoundPlan.replicas`) as rows of no job, their
    staging Jobs in `namespace` (`scheduling.data.replica_namespace`), with their link
    reservations; each an event on its destination cluster (a replica has no job to tell)."""
    if not copies:
        return []
    uris = await source_uris(session, names={c.data for c in copies})
    rows = [
        _write(session, copy, context, uris, purpose=REPLICA, namespace=namespace)
        for copy in copies
    ]
    await _stored(session, rows)
    for row in rows:
        log.info("replica %s: copying %s ahead of demand", row.id, described(row))
        await record_event(
            session,
            cluster_id=row.destination_cluster_id,
            reason="ReplicaStarted",
            message=f"copying {described(row)} ahead of demand (about {_lasts(row)})",
            fold=False,
        )
    return rows


async def _stored(session: AsyncSession, rows: Sequence[DataCopy]) -> None:
    """The rows written, their destinations' streams woken, their clusters loaded (the events
    name them)."""
    await session.flush()
    OUTBOX.wrote(session, {row.destination_cluster_id for row in rows})
    for row in rows:
        await session.refresh(row, ["source_cluster", "destination_cluster"])


def _lasts(row: DataCopy) -> str:
    return duration_text(row.bytes * 8 / (row.gbps * 1e9))


def _write(
    session: AsyncSession,
    copy: Copy,
    context: RoundContext,
    uris: Mapping[str, str],
    *,
    purpose: str,
    namespace: str,
    job: uuid.UUID | None = None,
) -> DataCopy:
    """The copy's row, for `job` (None: for no job), and its link reservation."""
    row_id = uuid.uuid4()
    # The uid names the path of a checkpoint only, which is always a job's.
    item = staging_item(copy, job_uid=job or row_id, uris=uris)
    row = DataCopy(
        id=row_id,
        job_id=job,
        job_uid=job,
        data_source=copy.data,
        source_cluster_id=context.cluster_ids[copy.source],
        destination_cluster_id=context.cluster_ids[copy.destination],
        bytes=copy.bytes,
        gbps=copy.gbps,
        purpose=purpose,
        namespace=namespace,
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
