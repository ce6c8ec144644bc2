"""A scheduling round's output: the decision committed atomically (placements with their
shares, link reservations and dispatch messages; reasons for the jobs left pending), less the
jobs that no longer fit where the inventory moved while the round solved."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global import failpoints
from volcano_global.db.models import (
    Cluster,
    ClusterState,
    EventType,
    Job,
    JobState,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.services.dispatch.supervision import GangOutcome
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle.jobs import lock_jobs
from volcano_global.services.scheduling.elastic import (
    ElasticPlacement,
    commit_resizes,
    resizing,
)
from volcano_global.services.scheduling.evictions import nominate
from volcano_global.services.scheduling.placing import dispatch, write_holdings
from volcano_global.services.scheduling.snapshot import RoundContext, free_capacity
from volcano_global.solver import Decision, JobDecision, LinkState, planning
from volcano_global.solver.capacity import ClusterPool
from volcano_global.solver.model import link_key
from volcano_global.solver.preemption import Eviction


@dataclass(frozen=True)
class RoundResult:
    generation: int
    placed: list[str]
    pending: int
    deferred: dict[str, str] = field(default_factory=dict)  # admitted, then no longer fitting
    resized: list[str] = field(default_factory=list)  # elastic jobs grown or shrunk
    nominated: list[str] = field(default_factory=list)  # preemptors whose victims were evicted
    evicted: list[GangOutcome] = field(default_factory=list)  # the victims


async def commit_round(
    session: AsyncSession,
    *,
    decision: Decision,
    context: RoundContext,
    evictions: Sequence[Eviction] = (),
) -> RoundResult:
    """Write the decision in the caller's transaction: placements with their shares and link
    reservations, jobs Placed, reasons for the rest, then the evictions (`evictions.py`). An
    admitted job is deferred to the next round (left Pending, the reason said) when a cluster
    it uses is no longer Ready, or its inventory moved since the snapshot and the job's shares
    no longer fit what is free there now; the rest of the round is kept. An eviction whose
    preemptor would use a cluster no longer Ready is dropped."""
    # FOR NO KEY UPDATE (as `lock_cluster`): a report holding a placement this commit ends may
    # still write the clusters' cancellations (rows referencing them) instead of deadlocking.
    current = (
        await session.execute(
            select(Cluster)
            .where(Cluster.name.in_(list(context.versions)))
            .with_for_update(key_share=True)
        )
    ).scalars()
    used = {s.cluster for d in decision.jobs if d.admitted for s in d.shares}
    used |= {s.cluster for e in evictions for s in e.placement.shares}
    moved, gone = [], {}
    for cluster in current:
        if cluster.name not in used:
            continue
        if cluster.state is not ClusterState.READY:
            gone[cluster.name] = f"cluster {cluster.name} is {cluster.state.value}"
        elif (cluster.inventory_generation, cluster.inventory_seq) != context.versions[
            cluster.name
        ]:
            moved.append(cluster)
    deferred = {
        d.job_id: gone[s.cluster]
        for d in decision.jobs
        if d.admitted
        for s in d.shares
        if s.cluster in gone
    }
    # The solver saw the units planned shrinks give back as free, and offered them to every
    # job, so they are given back in every cluster where the round starts or grows anything
    # (not only where the job they were planned for starts): no job lands on GPUs an elastic
    # job still holds.
    evictions = [e for e in evictions if not any(s.cluster in gone for s in e.placement.shares)]
    using = {
        s.cluster
        for d in decision.jobs
        if d.admitted and d.job_id not in deferred
        for s in d.shares
    } | {s.cluster for e in evictions for s in e.placement.shares}
    shrinks = [s for s in context.shrinks if s.cluster in using]
    if moved:
        # Inventories move all the time in large clusters (pods come and go): check the shares
        # against what is free now (with what the shrinks give back); only the jobs that no
        # longer fit wait for the next round.
        kept = _without(decision, deferred)
        deferred |= await _misfits(
            session, decision=kept, context=context, clusters=moved, shrinks=shrinks
        )
    generation = (
        int((await session.execute(select(func.max(Placement.generation)))).scalar() or 0) + 1
    )
    placed = []
    ids = {d.job_id: context.jobs.get(d.job_id) for d in decision.jobs}
    growth = [
        d
        for d in decision.jobs
        if d.admitted and d.job_id not in deferred and planning.grown_job(d.job_id)
    ]
    ending = await _lock_placements(session, resizing(shrinks, growth, context.elastic), evictions)
    jobs = await lock_jobs(session, [i for i in ids.values() if i is not None] + ending)
    admitted: list[tuple[JobDecision, Job, Placement]] = []
    for d in decision.jobs:
        job = jobs.get(ids[d.job_id]) if ids[d.job_id] else None
        if job is None or job.state is not JobState.PENDING:
            continue  # cancelled while the round was solving
        if d.job_id in deferred:
            job.pending_reason = (
                f"admitted in round {generation}, but by its commit {deferred[d.job_id]} "
                "(the inventory moved while it solved); tried again in the next round"
            )
            continue
        if not d.admitted:
            job.pending_reason = context.unmodelled.get(d.job_id) or d.reason
            continue
        admitted.append((d, job, Placement(id=uuid.uuid4(), job_id=job.id, generation=generation)))
    # Units given back first: their cancellations go out before the assignments that use
    # the room they free (the outbox is delivered in order).
    resized = await commit_resizes(
        session,
        growth=[],
        shrinks=shrinks,
        elastic=context.elastic,
        links=context.links,
        cluster_ids=context.cluster_ids,
        link_ids=context.link_ids,
        generation=generation,
    )
    if resized:
        await session.flush()  # the cancellations' rows (and times) before the assignments'
    # The placements first, in one flush: the rows that point at them (shares, reservations,
    # dispatch messages) then go together in the round's last flush, a statement per table.
    session.add_all([placement for _, _, placement in admitted])
    await session.flush()
    queue_ids = {job.queue_id for _, job, _ in admitted}
    queues = (
        {
            q.id: q
            for q in (await session.execute(select(Queue).where(Queue.id.in_(queue_ids)))).scalars()
        }
        if queue_ids
        else {}
    )
    for d, job, placement in admitted:
        rows, lines = write_holdings(
            session,
            decision=d,
            placement=placement,
            cluster_ids=context.cluster_ids,
            link_ids=context.link_ids,
        )
        await dispatch(
            session,
            job=job,
            placement=placement,
            shares=rows,
            queue=queues.get(job.queue_id),
            message=f"placed in round {generation}",
            event=f"round {generation}: " + "; ".join(lines),
        )
        placed.append(d.job_id)
    resized += await commit_resizes(
        session,
        growth=growth,
        shrinks=[],
        elastic=context.elastic,
        links=_after(context.links, [d for d in decision.jobs if d.job_id in placed]),
        cluster_ids=context.cluster_ids,
        link_ids=context.link_ids,
        generation=generation,
    )
    nominated, evicted = [], []
    for e in evictions:
        job = jobs.get(ids.get(e.preemptor)) if ids.get(e.preemptor) else None
        if job is None or job.state is not JobState.PENDING or e.preemptor in placed:
            continue
        evicted += await nominate(
            session, eviction=e, preemptor=job, context=context, generation=generation
        )
        nominated.append(e.preemptor)
    for key, why in context.unmodelled.items():
        job = await session.get(Job, context.jobs[key])
        if job is not None and job.state is JobState.PENDING:
            job.pending_reason = why
            await record_event(
                session, job_id=job.id, type=EventType.WARNING, reason="Unschedulable", message=why
            )
    await session.flush()
    if placed or resized or nominated:
        failpoints.hit("round-commit")
    return RoundResult(
        generation=generation,
        placed=placed,
        resized=resized,
        pending=len(decision.jobs) - len(placed),
        deferred=deferred,
        nominated=nominated,
        evicted=evicted,
    )


async def _lock_placements(
    session: AsyncSession, resizing: list[ElasticPlacement], evictions: Sequence[Eviction]
) -> list[uuid.UUID]:
    """Lock every placement the commit may end - of the elastic jobs it resizes and of the
    preemption victims - in id order in one statement, before any job row is locked: the
    order the agents' reports take (`dispatch/reports.apply_reports`: placements, then jobs).
    Two batches of placement locks, or a job locked before its placement, could each wait on
    a report holding the other (a deadlock on Postgres). The jobs of these placements, for
    the caller to lock with the rest; the resize and the eviction then find the rows held."""
    victims = [uuid.UUID(v.id) for e in evictions for v in e.victims]
    ids = [e.placement_id for e in resizing]
    if not ids and not victims:
        return []
    held = await session.execute(
        select(Placement.id, Placement.job_id)
        .where(
            or_(
                Placement.id.in_(ids),
                and_(Placement.job_id.in_(victims), Placement.state == PlacementState.ACTIVE),
            )
        )
        .order_by(Placement.id)
        .with_for_update(of=Placement)
    )
    return [job_id for _, job_id in held]


def _after(links: tuple[LinkState, ...], placed: list[JobDecision]) -> tuple[LinkState, ...]:
    """The links with what this round's placements reserved."""
    more: dict[tuple[str, str], float] = defaultdict(float)
    for d in placed:
        for r in d.reservations:
            more[link_key(r.a, r.b)] += r.gbps
    return tuple(replace(x, reserved_gbps=x.reserved_gbps + more[x.key]) for x in links)


def _without(decision: Decision, jobs: dict[str, str]) -> Decision:
    """The decision without the jobs in `jobs`."""
    if not jobs:
        return decision
    return replace(decision, jobs=tuple(d for d in decision.jobs if d.job_id not in jobs))


async def _misfits(
    session: AsyncSession,
    *,
    decision: Decision,
    context: RoundContext,
    clusters: list[Cluster],
    shrinks: list[planning.Shrink],
) -> dict[str, str]:
    """The admitted jobs (id -> why) whose shares in `clusters` no longer fit what their
    current inventories leave free (minus capacity held by earlier placements, plus what the
    round's `shrinks` give back), taken in the decision's order: a job that fits takes its
    room, one that does not takes none. Only the leaves the shares use are read, unless a
    share names none (then whole clusters)."""
    names = {c.name for c in clusters}
    shares = [s for d in decision.jobs if d.admitted for s in d.shares if s.cluster in names]
    given = [
        pod
        for cut in shrinks
        if cut.cluster in names
        for pod in context.elastic[cut.job_id].given_back(cut)
    ]
    leaves = (
        {leaf for s in shares for leaf, _ in s.domains} | {leaf for _, leaf, *_ in given}
        if all(s.domains for s in shares)
        else None
    )
    free = planning.freed(tuple(await free_capacity(session, clusters, leaves=leaves)), given)
    pools = {s.name: ClusterPool(s) for s in free}
    misfits = {}
    for d in decision.jobs:
        if not d.admitted:
            continue
        touched = {s.cluster: pools[s.cluster] for s in d.shares if s.cluster in pools}
        if not touched:
            continue
        marks = {name: pool.mark() for name, pool in touched.items()}
        why = _misfit(d, touched, context.gpu_models.get(d.job_id))
        if why is not None:
            misfits[d.job_id] = why
            for name, mark in marks.items():
                touched[name].rollback(mark)
    return misfits


def _misfit(d: JobDecision, pools: dict[str, ClusterPool], model: str | None) -> str | None:
    """Take the job's shares from `pools`; why one does not fit, or None."""
    for share in d.shares:
        pool = pools.get(share.cluster)
        per_pod = share.gpus // share.pods if share.pods else 0
        if pool is None or per_pod == 0:
            continue
        if not share.domains and model and pool.free_gpus(model) < share.gpus:
            return f"cluster {share.cluster} no longer has {share.gpus} GPUs free"
        for leaf, pods in share.domains:
            if pool.take_from_leaf(leaf, model, per_pod, pods) < pods:
                return (
                    f"{leaf} in {share.cluster} no longer has room for {pods} pods of "
                    f"{per_pod} GPUs"
                )
    return None
