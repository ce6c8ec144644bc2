"""Level-triggered reconciliation of one cluster's shares: what the cluster holds (its agent's
`ShareInventory`, read from the cluster) against what the Global's active placements say it
should hold, compared in one transaction whatever was sent or acknowledged before.

- A share the Global assigned whose pods never started (Assigned, Staging or Accepted) and that the
  cluster does not hold is sent again (a new assignment in the outbox, unless one is still
  unacknowledged: then it is on its way).
- A share the Global believes started (Running) that the cluster no longer holds is lost: the
  job's gang fails through the same path as any share failure (`share_lost`: withdrawn before
  the job runs, else the job's policy for `PodEvicted`, within `maxRetry`), an event names the
  cluster, and the placement's capacity returns. This is the only way the Global lets go of a
  share it believes running: the books never count its GPUs and the GPUs the returned cluster
  reports free at once.
- A share the cluster holds that no active placement has in this cluster (an unknown or ended
  placement) is cancelled there, unless it has ended in the cluster too (Succeeded, Failed:
  it holds nothing, and its Volcano Jobs stay for their logs) or a cancellation is on its way.

Races: on one stream the Global reads the agent's messages in order, and the agent lists what
it has received but not applied; an assignment written after the agent built its list is still
unacknowledged (left alone); a Succeeded share gone from the cluster has done its work."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    EventType,
    Job,
    OutboxKind,
    OutboxMessage,
    Placement,
    PlacementState,
)
from volcano_global.rpc.shares import ShareCancellation, SharePhase
from volcano_global.services.dispatch.reports import lock_placements
from volcano_global.services.dispatch.supervision import share_lost
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle.jobs import lock_jobs
from volcano_global.services.lifecycle.outbox import OUTBOX

log = logging.getLogger(__name__)
# Pods never ran. (A share Staging that the cluster lost is sent again: its agent finds the
# staging Job there, or starts the copy anew.)
NOT_STARTED = frozenset({SharePhase.ASSIGNED, SharePhase.STAGING, SharePhase.ACCEPTED})
ENDED_IN_CLUSTER = frozenset({SharePhase.SUCCEEDED, SharePhase.FAILED, SharePhase.CANCELLED})


@dataclass(frozen=True)
class Held:
    """One share the cluster holds (or is applying), as its agent listed it."""

    placement_id: uuid.UUID
    phase: SharePhase
    job_uid: str = ""


@dataclass
class Reconciled:
    resent: list[uuid.UUID] = field(default_factory=list)  # placements assigned again
    lost: list[uuid.UUID] = field(default_factory=list)  # placements whose gang failed
    # To send on the stream now: a placement the Global may not know has no outbox row.
    cancellations: list[ShareCancellation] = field(default_factory=list)


async def reconcile_cluster(
    session: AsyncSession, *, cluster: Cluster, held: list[Held], why: str = ""
) -> Reconciled:
    """Converge the Global's books for `cluster` with what it holds (see the module)."""
    placements = await _active_here(session, cluster.id)
    jobs = await lock_jobs(session, sorted({p.job_id for p in placements}))
    unacked = await _unacked(session, cluster.id)
    holds = {h.placement_id: h for h in held}
    result = Reconciled()
    for placement in placements:
        if placement.id in holds:
            continue
        share = next(s for s in placement.shares if s.cluster_id == cluster.id)
        job = jobs.get(placement.job_id)
        if job is None or job.is_terminal:
            continue
        if share.phase in NOT_STARTED:
            if (placement.id, OutboxKind.ASSIGN) not in unacked:
                await _resend(session, share)
            result.resent.append(placement.id)
        elif share.phase is SharePhase.RUNNING:
            await _lose(
                session, cluster=cluster, placement=placement, share=share, job=job, why=why
            )
            result.lost.append(placement.id)
    ours = {p.id for p in placements}
    for h in held:
        if h.placement_id in ours or h.phase in ENDED_IN_CLUSTER:
            continue
        if (h.placement_id, OutboxKind.CANCEL) in unacked:
            continue  # the Global's cancellation is on its way
        reason = "no active placement of the Global has this share in this cluster"
        result.cancellations.append(
            ShareCancellation(placement_id=str(h.placement_id), job_uid=h.job_uid, reason=reason)
        )
    await session.flush()
    return result


async def _active_here(session: AsyncSession, cluster_id: uuid.UUID) -> list[Placement]:
    """The active placements with a share in the cluster, locked."""
    here = select(ClusterShare.placement_id).where(ClusterShare.cluster_id == cluster_id)
    return await lock_placements(
        session, Placement.state == PlacementState.ACTIVE, Placement.id.in_(here)
    )


async def _unacked(session: AsyncSession, cluster_id: uuid.UUID) -> set[tuple[uuid.UUID, str]]:
    rows = await session.execute(
        select(OutboxMessage.placement_id, OutboxMessage.kind).where(
            OutboxMessage.cluster_id == cluster_id, OutboxMessage.acked_at.is_(None)
        )
    )
    return {(placement_id, kind) for placement_id, kind in rows}


async def _resend(session: AsyncSession, share: ClusterShare) -> None:
    """The share's last assignment, queued again. Its job token was scrubbed from the outbox
    when it was first acknowledged: a Kubernetes cluster that still has the share's Volcano
    Jobs keeps the one they carry; a share built anew runs without one (its measurements are
    refused; a new token is the job service's to issue, which dispatch does not import)."""
    last = (
        await session.execute(
            select(OutboxMessage)
            .where(
                OutboxMessage.cluster_id == share.cluster_id,
                OutboxMessage.placement_id == share.placement_id,
                OutboxMessage.kind == OutboxKind.ASSIGN,
            )
            .order_by(OutboxMessage.created_at.desc())
            .limit(1)
        )
    ).scalar_one_or_none()
    if last is None:
        return
    share.phase, share.message = SharePhase.ASSIGNED, "sent again: the cluster did not hold it"
    OUTBOX.wrote(session, [share.cluster_id])
    session.add(
        OutboxMessage(
            cluster_id=share.cluster_id,
            placement_id=share.placement_id,
            kind=OutboxKind.ASSIGN,
            payload=dict(last.payload),
        )
    )


async def _lose(
    session: AsyncSession,
    *,
    cluster: Cluster,
    placement: Placement,
    share: ClusterShare,
    job: Job,
    why: str,
) -> None:
    message = (
        f"cluster {cluster.name} no longer holds its share ({share.pods} pods, "
        f"{share.gpus} GPUs) of this job: its agent's list of the shares it holds"
        + (f" ({why})" if why else "")
        + " lacks it (agent restarted, or its workloads were deleted in the cluster)"
    )
    share.phase, share.message = SharePhase.FAILED, "lost: not held by the cluster"
    await record_event(
        session,
        cluster_id=cluster.id,
        type=EventType.WARNING,
        reason="ShareLost",
        message=f"job {job.namespace}/{job.name}: {message}",
        fold=False,
    )
    await share_lost(session, placement=placement, job=job, event="PodEvicted", message=message)
    log.warning("%s/%s: %s", job.namespace, job.name, message)
