"""The dispatch outbox: share assignments and cancellations written in the same transaction
as the decision that causes them, delivered over the agent streams until the agent reports
on them (at least once; agents apply them idempotently by placement id)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection

from sqlalchemy import func, select, tuple_, type_coerce, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    ClusterShare,
    Job,
    OutboxKind,
    OutboxMessage,
    Placement,
    Queue,
)
from volcano_global.jobspec.members import member_job_name, ranks_gpu_model, rendezvous_address
from volcano_global.jobspec.queue_document import queue_document
from volcano_global.rpc.shares import ShareAssignment, ShareCancellation, StagingItem
from volcano_global.services.lifecycle.jobs import lifecycle_of
from volcano_global.services.wakeups import OUTBOX


def enqueue_assignments(
    session: AsyncSession,
    *,
    job: Job,
    placement: Placement,
    shares: list[ClusterShare],
    job_token: str = "",
    queue: Queue | None = None,
) -> None:
    """One assignment per share. The job token rides in the payload until the agent
    acknowledges it (then it is scrubbed: only its hash stays, in api_tokens). `queue`: the
    job's, whose Volcano Queue document goes along (the agent makes it exist in its cluster)."""
    duration = lifecycle_of(job).running_estimate_seconds
    member = member_job_name(job.name, str(placement.id), manifest=job.manifest)
    ordered = sorted(shares, key=lambda s: s.rank_offset)
    rendezvous = rendezvous_address(
        job.manifest, member=member, namespace=job.namespace, split=len(ordered) > 1
    )
    OUTBOX.wrote(session, [share.cluster_id for share in ordered])
    manifest = json.dumps(job.manifest)
    queue_json = (
        json.dumps(
            queue_document(
                name=queue.name,
                spec=queue.spec or {},
                labels=queue.labels or {},
                annotations=queue.annotations or {},
                state=queue.state,
            )
        )
        if queue is not None
        else ""
    )
    for index, share in enumerate(ordered):
        assignment = ShareAssignment(
            placement_id=str(placement.id),
            generation=placement.generation,
            job_uid=str(job.id),
            job_name=job.name,
            namespace=job.namespace,
            pods=share.pods,
            rank_offset=share.rank_offset,
            world_pods=sum(s.pods for s in ordered),  # the width placed (elastic: may be less)
            cluster_index=index,
            cluster_count=len(ordered),
            rendezvous_address=rendezvous,
            member_job_name=member,
            manifest_json=manifest,
            gpus_per_pod=share.gpus // share.pods if share.pods else 0,
            gpu_model=_model(job, share),
            domains={k: int(v) for k, v in (share.domains or {}).items()},
            duration_seconds=duration,
            job_token=job_token,
            queue_json=queue_json,
            staging=tuple(StagingItem.from_payload(item) for item in share.staging or ()),
        )
        session.add(
            OutboxMessage(
                cluster_id=share.cluster_id,
                placement_id=placement.id,
                kind=OutboxKind.ASSIGN,
                payload=assignment.to_payload(),
            )
        )


def _model(job: Job, share: ClusterShare) -> str:
    """The GPU model the share's pods run on (`books.share_model`): its own, or - a share
    written before it had one - its job's or its ranks' children's; "" when none names one."""
    return (
        share.gpu_model
        or job.gpu_model
        or ranks_gpu_model(job.gang, share.rank_offset, share.pods)
        or ""
    )


async def enqueue_cancellations(
    session: AsyncSession, *, placement: Placement, reason: str
) -> None:
    """Tell every cluster holding a share of the placement to remove it."""
    OUTBOX.wrote(session, [share.cluster_id for share in placement.shares])
    cancellation = ShareCancellation(
        placement_id=str(placement.id), job_uid=str(placement.job_id), reason=reason
    )
    for share in placement.shares:
        session.add(
            OutboxMessage(
                cluster_id=share.cluster_id,
                placement_id=placement.id,
                kind=OutboxKind.CANCEL,
                payload=cancellation.to_payload(),
            )
        )


async def acknowledge(
    session: AsyncSession, *, delivered: Collection[tuple[uuid.UUID, uuid.UUID, OutboxKind]]
) -> None:
    """The messages (cluster, placement, kind) an agent reported on are delivered: no longer
    sent, and an assignment's job token leaves the table (only its hash stays, in
    api_tokens). One statement for them all, without reading the rows (their payloads carry
    whole job documents)."""
    if not delivered:
        return
    payload = OutboxMessage.payload
    scrubbed = (
        type_coerce(payload, JSONB()).delete_path(["job_token"])  # jsonb #- '{job_token}'
        if session.get_bind().dialect.name == "postgresql"
        else func.json_remove(payload, "$.job_token")
    )
    message = tuple_(OutboxMessage.cluster_id, OutboxMessage.placement_id, OutboxMessage.kind)
    unacked = OutboxMessage.acked_at.is_(None)
    # Locked in id order first: an UPDATE alone locks rows in its plan's scan order, and two
    # replicas acknowledging overlapping messages (a stream taken over mid-batch) in two orders
    # would deadlock. The sort comes before the lock in a locking subquery.
    locked = (
        select(OutboxMessage.id)
        .where(message.in_(sorted(delivered)), unacked)
        .order_by(OutboxMessage.id)
        .with_for_update(key_share=True)
    )
    await session.execute(
        update(OutboxMessage)
        .where(OutboxMessage.id.in_(locked.scalar_subquery()), unacked)
        .values(acked_at=utcnow(), payload=scrubbed)
        # this is the one writer of acked_at; no session holds outbox rows it would change
        .execution_options(synchronize_session=False)
    )


async def unacknowledged_ids(
    session: AsyncSession, *, cluster_id: uuid.UUID, limit: int
) -> list[uuid.UUID]:
    """The ids of the oldest `limit` messages to the cluster not yet acknowledged, oldest
    first: ids alone, so that a stream reading them on every wake-up does not load again, with
    their job documents, the messages it sent and the agent has not reported on yet."""
    rows = await session.execute(
        select(OutboxMessage.id)
        .where(OutboxMessage.cluster_id == cluster_id, OutboxMessage.acked_at.is_(None))
        .order_by(OutboxMessage.created_at, OutboxMessage.id)
        .limit(limit)
    )
    return list(rows.scalars())


async def clusters_unacknowledged(
    session: AsyncSession, *, cluster_ids: Collection[uuid.UUID]
) -> set[uuid.UUID]:
    """Those of the clusters with a message not yet acknowledged."""
    rows = await session.scalars(
        select(OutboxMessage.cluster_id)
        .where(OutboxMessage.cluster_id.in_(cluster_ids), OutboxMessage.acked_at.is_(None))
        .distinct()
    )
    return set(rows)


async def undelivered(session: AsyncSession, *, ids: Collection[uuid.UUID]) -> list[OutboxMessage]:
    """Those of the messages not acknowledged (since their ids were read), oldest first."""
    rows = await session.execute(
        select(OutboxMessage)
        .where(OutboxMessage.id.in_(ids), OutboxMessage.acked_at.is_(None))
        .order_by(OutboxMessage.created_at, OutboxMessage.id)
    )
    return list(rows.scalars())
