"""Preemption and reclaim on the server, in two steps (`solver.preemption` chose the victims).

1. Evict, in the round's transaction (`nominate`): each victim's active placement ends, its
   shares are cancelled through the outbox, and the victim is requeued through its Volcano
   `policies` as a lost share is (`PodEvicted`; its attempt count goes on, up to `maxRetry`),
   with an event naming the preemptor. The preemptor's placement is written Nominated: it
   holds the GPUs and link bandwidth it will use (no round gives them to another job), but
   nothing is dispatched; its pending reason says what was evicted and why.
2. Start, in a sweep of its own (`start_nominated`, before every round): a nomination whose
   victims' cancellations every Ready cluster has acknowledged (the agent removed the share)
   and whose shares fit what the clusters' inventories now show free (the victims' pods are
   gone) becomes Active and is dispatched. One not started within the timeout is withdrawn
   and the job waits as any other.

A demotion by time-sharing (`solver.timesharing`, an eviction of kind TIMESHARE) goes the
same two steps, but its victim is requeued as time-sharing's own act, not through its Volcano
`policies`: it is no failure, and does not use up `maxRetry` (`demotion.py`). Every victim keeps
the GPU-seconds its run received (`Job.attained_gpu_s`, added when its placement ends).

A crash between the steps loses nothing: both are transactions, and the nomination is in the
database until it starts or is withdrawn. A cluster that is not Ready cannot acknowledge a
cancellation; it does not hold a nomination back, unless the nomination has a share there (then
it waits, and is withdrawn at the timeout).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global import failpoints
from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    Cluster,
    ClusterState,
    EventType,
    Job,
    JobState,
    OutboxKind,
    OutboxMessage,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.services.data.sources import source_uris
from volcano_global.services.dispatch.supervision import NOT_STARTED, GangOutcome, share_lost
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle.jobs import lock_jobs
from volcano_global.services.lifecycle.placements import end_placement
from volcano_global.services.scheduling.demotion import demote
from volcano_global.services.scheduling.free import free_capacity
from volcano_global.services.scheduling.placing import mark_placed, write_holdings, write_staging
from volcano_global.services.scheduling.round_input import RoundContext
from volcano_global.solver.capacity import ClusterPool
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT
from volcano_global.solver.preemption import PREEMPT, RECLAIM, Eviction
from volcano_global.solver.timesharing import TIMESHARE

EVENT = "PodEvicted"  # what Volcano's policies see when a job's pods are evicted
_REASONS = {PREEMPT: "Preempting", RECLAIM: "Reclaiming", TIMESHARE: "TimeSharing"}


def preempted_by(preemptor: Job) -> str:
    return f"Preempted by {preemptor.namespace}/{preemptor.name} (priority {preemptor.priority})"


async def nominate(
    session: AsyncSession,
    *,
    eviction: Eviction,
    preemptor: Job,
    context: RoundContext,
    generation: int,
    copies: Sequence[Copy] = (),
) -> list[GangOutcome]:
    """Step 1 for one eviction (`preemptor` locked by the caller, Pending). A victim that no
    longer holds an active placement (it ended meanwhile) is skipped. Locks the victims'
    placements, then their jobs (the order the agents' reports lock them in)."""
    ids = [uuid.UUID(v.id) for v in eviction.victims]
    placements = list(
        (
            await session.execute(
                select(Placement)
                .where(Placement.job_id.in_(ids), Placement.state == PlacementState.ACTIVE)
                .order_by(Placement.id)
                .with_for_update(of=Placement)
            )
        ).scalars()
    )
    victims = await lock_jobs(session, [p.job_id for p in placements])
    outcomes = [
        await _end_victim(session, p, victims[p.job_id], eviction, preemptor) for p in placements
    ]
    nominated = Placement(
        id=uuid.uuid4(),
        job_id=preemptor.id,
        generation=generation,
        state=PlacementState.NOMINATED,
        awaits=[str(p.id) for p in placements],
    )
    session.add(nominated)
    await session.flush()
    shares, _ = write_holdings(
        session,
        job=preemptor,
        decision=eviction.placement,
        placement=nominated,
        cluster_ids=context.cluster_ids,
        link_ids=context.link_ids,
    )
    if copies:  # its data, copied where it will start; the bandwidth held from now
        write_staging(
            session,
            copies=copies,
            placement=nominated,
            shares=shares,
            cluster_ids=context.cluster_ids,
            link_ids=context.link_ids,
            job_uid=preemptor.id,
            uris=await source_uris(session, names={c.data for c in copies} - {CHECKPOINT}),
        )
    preemptor.pending_reason = eviction.reason
    await record_event(
        session,
        job_id=preemptor.id,
        reason=_REASONS.get(eviction.kind, "Preempting"),
        message=eviction.reason,
        fold=False,
    )
    return outcomes


async def _end_victim(
    session: AsyncSession, placement: Placement, job: Job, eviction: Eviction, preemptor: Job
) -> GangOutcome:
    """One victim's run ends (its attained service grows by the run: `end_placement`), and it
    is demoted (time-sharing) or requeued through its policies (preemption)."""
    told = eviction.victim_reasons.get(str(job.id))
    if told is not None and job.state not in NOT_STARTED:
        return await demote(session, placement=placement, job=job, message=told)
    message = preempted_by(preemptor)
    return await share_lost(session, placement=placement, job=job, event=EVENT, message=message)


async def start_nominated(
    session: AsyncSession, *, timeout_s: float, now: datetime | None = None
) -> list[str]:
    """Step 2 over every nomination: the jobs (namespace/name) dispatched."""
    now = now or utcnow()
    rows = await session.execute(
        select(Placement, Job)
        .join(Job, Job.id == Placement.job_id)
        .where(Placement.state == PlacementState.NOMINATED)
        .order_by(Job.priority.desc(), Job.submitted_at, Job.id)
        .with_for_update(of=[Placement, Job], skip_locked=True)
    )
    started = []
    for placement, job in rows.all():
        if job.state is not JobState.PENDING:  # cancelled: `cancel_job` ends it; defensive
            await end_placement(
                session, placement=placement, state=PlacementState.WITHDRAWN, cancel_reason=None
            )
            continue
        why = await _not_yet(session, placement, job)
        if why is None:
            await _start(session, placement, job)
            started.append(f"{job.namespace}/{job.name}")
        elif now - placement.created_at > timedelta(seconds=timeout_s):
            await _withdraw(session, placement, job, f"not started within {timeout_s:g} s: {why}")
        else:
            job.pending_reason = f"preempting: {why}"
    await session.flush()
    if started:
        failpoints.hit("preempt-start")
    return started


async def _not_yet(session: AsyncSession, placement: Placement, job: Job) -> str | None:
    """Why the nomination cannot start yet, or None."""
    awaited = [uuid.UUID(x) for x in placement.awaits or []]
    if awaited:
        left = (
            await session.execute(
                select(Cluster.name)
                .join(OutboxMessage, OutboxMessage.cluster_id == Cluster.id)
                .where(
                    OutboxMessage.placement_id.in_(awaited),
                    OutboxMessage.kind == OutboxKind.CANCEL,
                    OutboxMessage.acked_at.is_(None),
                    Cluster.state == ClusterState.READY,
                )
                .distinct()
            )
        ).scalars()
        waiting = sorted(left)
        if waiting:
            return f"waiting for the evicted jobs' shares to be removed in {', '.join(waiting)}"
    clusters = {s.cluster_id: s.cluster for s in placement.shares}
    down = sorted(c.name for c in clusters.values() if c.state is not ClusterState.READY)
    if down:
        return f"cluster {', '.join(down)} is not Ready"
    leaves = {leaf for s in placement.shares for leaf in (s.domains or {})}
    free = await free_capacity(
        session, list(clusters.values()), leaves=leaves or None, excluding=placement.id
    )
    pools = {state.name: ClusterPool(state) for state in free}
    for s in placement.shares:
        per_pod = s.gpus // s.pods if s.pods else 0
        if per_pod == 0:
            continue
        pool = pools[s.cluster.name]
        model = s.gpu_model or job.gpu_model
        if not s.domains and pool.free_gpus(model or "") < s.gpus:
            return f"{s.gpus} GPUs in {s.cluster.name} are not free yet"
        for leaf, n in (s.domains or {}).items():
            if pool.take_from_leaf(leaf, model, per_pod, int(n)) < int(n):
                return (
                    f"the GPUs of {n} pods in {leaf} ({s.cluster.name}) are not free yet "
                    "(the evicted pods are terminating)"
                )
    return None


async def _start(session: AsyncSession, placement: Placement, job: Job) -> None:
    placement.state = PlacementState.ACTIVE
    queue = await session.get(Queue, job.queue_id)
    lines = [f"{s.pods} pods in {s.cluster.name}" for s in placement.shares]
    lines += [
        f"{r.gbps:g} Gbps on {r.link.cluster_a.name}<->{r.link.cluster_b.name}"
        for r in placement.link_reservations
    ]
    evicted = len(placement.awaits or [])
    await mark_placed(
        session,
        job=job,
        placement=placement,
        shares=list(placement.shares),
        queue=queue,
        message=f"placed once the {evicted} job(s) it preempted were gone",
        event=f"preempted {evicted} job(s): " + "; ".join(lines),
    )


async def _withdraw(session: AsyncSession, placement: Placement, job: Job, why: str) -> None:
    await end_placement(
        session, placement=placement, state=PlacementState.WITHDRAWN, cancel_reason=None
    )
    job.pending_reason = why
    await record_event(
        session, job_id=job.id, type=EventType.WARNING, reason="NominationWithdrawn", message=why
    )
