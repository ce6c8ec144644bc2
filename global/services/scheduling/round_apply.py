"""The last step of a round on the server: apply its plan (`solver.round_plan.RoundPlan`) in the
caller's transaction, in short steps, after checking it against what moved while it was
computed. The steps, in order:

1. **Check**: an admitted job (a start or a growth) is deferred to the next round - left
   Pending, the reason said - when a cluster it uses is no longer Ready, or its inventory
   moved since the round read it and the job no longer fits what is free there now; the rest
   of the plan is kept. An eviction whose preemptor would use a cluster no longer Ready is
   dropped.
2. **Lock** the placements the commit may end (resized elastic jobs, victims), then the jobs.
3. **Outcomes**: every waiting job's pending reason, from its outcome: on the rows locked for
   what follows (starts, preemptors, jobs set aside), and for the jobs that only wait in one
   statement over all of them (`pending_reasons.py`), with no row loaded.
4. **Shrinks**: units given back go out first, so their cancellations precede the
   assignments that use the room they free (the outbox is delivered in order).
5. **Starts**: placements with their shares and link reservations, the copies each share
   waits for (its staging items, their bandwidth reserved until its staging ends); the jobs
   Placed; the copies made for them while they waited into other clusters stopped.
   5b. **Prefetch**: the copies made for waiting jobs, without GPUs (`prefetch.py`).
   5c. **Replicas**: the copies of popular datasets ahead of demand, for no job, in the
   replica namespace (`prefetch.write_replicas`).
6. **Grows**: elastic jobs restarted at their new width.
7. **Evictions**: victims requeued, preemptors nominated (`evictions.py`).
8. **Set aside**: an Unschedulable event for each job the round could not model.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

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
from volcano_global.loop_turns import Turns
from volcano_global.services.data import source_uris
from volcano_global.services.data.copies import REPLICA_NAMESPACE
from volcano_global.services.dispatch.supervision import GangOutcome
from volcano_global.services.events import record_event
from volcano_global.services.lifecycle.jobs import lock_jobs
from volcano_global.services.scheduling.elastic import (
    ElasticPlacement,
    commit_resizes,
    resizing,
)
from volcano_global.services.scheduling.evictions import nominate
from volcano_global.services.scheduling.free import free_capacity
from volcano_global.services.scheduling.pending_reasons import write_reasons
from volcano_global.services.scheduling.placing import mark_placed, write_holdings, write_staging
from volcano_global.services.scheduling.prefetch import (
    stop_for_starts,
    write_copies,
    write_replicas,
)
from volcano_global.services.scheduling.round_input import RoundContext
from volcano_global.solver import JobDecision, planning
from volcano_global.solver.capacity import ClusterPool
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT
from volcano_global.solver.preemption import Eviction
from volcano_global.solver.round_plan import Grow, RoundPlan, Status

# Starts written per flush: SQLAlchemy's unit of work holds the event loop through a flush, so
# a round's rows go in parts rather than in one flush as long as the round is large
# (docs/benchmarks.md, "The leader's stalls").
FLUSH_EVERY = 100


@dataclass(frozen=True)
class RoundResult:
    generation: int
    placed: list[str]
    pending: int
    deferred: dict[str, str] = field(default_factory=dict)  # admitted, then no longer fitting
    resized: list[str] = field(default_factory=list)  # elastic jobs grown or shrunk
    nominated: list[str] = field(default_factory=list)  # preemptors whose victims were evicted
    evicted: list[GangOutcome] = field(default_factory=list)  # the victims


@dataclass
class _Checked:
    """The plan as it still holds at commit time (step 1)."""

    deferred: dict[str, str]  # admitted job id -> why it waits for the next round
    evictions: list[Eviction]
    shrinks: list[planning.Shrink]
    grows: list[Grow]


async def apply_plan(
    session: AsyncSession,
    *,
    plan: RoundPlan,
    context: RoundContext,
    replica_namespace: str = REPLICA_NAMESPACE,
) -> RoundResult:
    """The steps of the module docstring."""
    checked = await _check(session, plan, context)  # 1
    generation = (
        int((await session.execute(select(func.max(Placement.generation)))).scalar() or 0) + 1
    )
    ending = await _lock_placements(  # 2
        session, resizing(checked.shrinks, checked.grows, context.elastic), checked.evictions
    )
    jobs = await lock_jobs(session, _acted_on(plan, context, checked) + ending)
    starting, reasons = _outcomes(plan, context, jobs, checked, generation)  # 3
    await write_reasons(session, reasons)
    resized = await commit_resizes(  # 4
        session,
        shrinks=checked.shrinks,
        elastic=context.elastic,
        cluster_ids=context.cluster_ids,
        link_ids=context.link_ids,
        generation=generation,
    )
    if resized:
        await session.flush()  # the cancellations' rows (and times) before the assignments'
    placed = await _start(session, starting, context, generation, plan.staging)  # 5
    await _copies(session, plan, context, starting, set(placed) | set(checked.deferred))  # 5b
    await write_replicas(  # 5c
        session, copies=_replicas(plan, context), context=context, namespace=replica_namespace
    )
    resized += await commit_resizes(  # 6
        session,
        grows=checked.grows,
        elastic=context.elastic,
        cluster_ids=context.cluster_ids,
        link_ids=context.link_ids,
        generation=generation,
    )
    nominated, evicted = await _evict(
        session, checked.evictions, context, jobs, placed, generation, plan.staging
    )  # 7
    await _set_aside(session, plan, context, jobs)  # 8
    await session.flush()
    if placed or resized or nominated:
        failpoints.hit("round-commit")
    return RoundResult(
        generation=generation,
        placed=placed,
        resized=resized,
        pending=plan.waiting - len(placed),
        deferred=checked.deferred,
        nominated=nominated,
        evicted=evicted,
    )


async def _check(session: AsyncSession, plan: RoundPlan, context: RoundContext) -> _Checked:
    """Step 1. The solver saw the units planned shrinks give back as free, and offered them
    to every job, so they are given back in every cluster where the round starts or grows
    anything (not only where the job they were planned for starts): no job lands on GPUs an
    elastic job still holds."""
    admitted = plan.admitted()
    # FOR NO KEY UPDATE (as `lock_cluster`): a report holding a placement this commit ends may
    # still write the clusters' cancellations (rows referencing them) instead of deadlocking.
    # In name order, as the group commit of inventory deltas locks its clusters
    # (`lock_clusters`): two writers of several clusters never wait on each other.
    current = (
        await session.execute(
            select(Cluster)
            .where(Cluster.name.in_(list(context.versions)))
            .order_by(Cluster.name)
            .with_for_update(key_share=True)
        )
    ).scalars()
    used = {s.cluster for d in admitted for s in d.shares}
    used |= {s.cluster for e in plan.evictions for s in e.placement.shares}
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
    deferred = {d.job_id: gone[s.cluster] for d in admitted for s in d.shares if s.cluster in gone}
    evictions = [
        e for e in plan.evictions if not any(s.cluster in gone for s in e.placement.shares)
    ]
    using = {s.cluster for d in admitted if d.job_id not in deferred for s in d.shares}
    using |= {s.cluster for e in evictions for s in e.placement.shares}
    shrinks = [s for s in plan.shrinks if s.cluster in using]
    if moved:
        # Inventories move all the time in large clusters (pods come and go): check the shares
        # against what is free now (with what the shrinks give back); only the jobs that no
        # longer fit wait for the next round.
        kept = [d for d in admitted if d.job_id not in deferred]
        deferred |= await _misfits(
            session, admitted=kept, context=context, clusters=moved, shrinks=shrinks
        )
    grows = [g for g in plan.grows if g.job_id not in deferred]
    return _Checked(deferred, evictions, shrinks, grows)


async def _copies(
    session: AsyncSession,
    plan: RoundPlan,
    context: RoundContext,
    starting: Sequence[tuple[JobDecision, Job, Placement]],
    skip: set[str],
) -> None:
    """Step 5's end and 5b: the copies made for the jobs that start stop where they do not
    start; the prefetches written for the jobs still waiting (not those in `skip`)."""
    await stop_for_starts(
        session,
        starts=[(d.job_id, [s.cluster for s in d.shares]) for d, _, _ in starting],
        context=context,
    )
    await write_copies(session, copies=plan.prefetch, context=context, skip=skip)


def _replicas(plan: RoundPlan, context: RoundContext) -> list[Copy]:
    """The plan's replicas between Ready clusters (a holder not Ready may be a copy's source
    in the round's books: its agent could not serve it; the round after plans again)."""
    ready = context.cluster_ids
    return [c for c in plan.replicas if c.source in ready and c.destination in ready]


def _acted_on(plan: RoundPlan, context: RoundContext, checked: _Checked) -> list[uuid.UUID]:
    """The waiting jobs the commit does more to than tell them why they wait (they start,
    are nominated, get an event, or a copy while they wait: a cancel that commits meanwhile
    would stop no copy not yet committed): their rows are locked and loaded."""
    keys = {d.job_id for d in plan.starts} | {e.preemptor for e in checked.evictions}
    keys |= {k for k, group in plan.prefetch.items() if group}
    keys |= {k for k, o in plan.outcomes.items() if o.status is Status.SET_ASIDE}
    return [context.jobs[k] for k in keys if k in context.jobs]


def _outcomes(
    plan: RoundPlan,
    context: RoundContext,
    jobs: dict[uuid.UUID, Job],
    checked: _Checked,
    generation: int,
) -> tuple[list[tuple[JobDecision, Job, Placement]], dict[uuid.UUID, str]]:
    """Step 3: every waiting job still Pending gets its outcome's reason (set on the rows
    loaded, returned for the others); the jobs that start, with their new placements."""
    starts = {d.job_id: d for d in plan.starts}
    nominating = {e.preemptor for e in checked.evictions}
    starting = []
    reasons: dict[uuid.UUID, str] = {}
    for key, outcome in plan.outcomes.items():
        if key not in context.jobs:
            continue
        job = jobs.get(context.jobs[key])
        if job is not None and job.state is not JobState.PENDING:
            continue  # cancelled while the round was solving
        if key in checked.deferred:
            reason = (
                f"admitted in round {generation}, but by its commit {checked.deferred[key]} "
                "(the inventory moved while it solved); tried again in the next round"
            )
        elif key in starts and job is not None:
            placement = Placement(id=uuid.uuid4(), job_id=job.id, generation=generation)
            starting.append((starts[key], job, placement))
            continue
        elif outcome.status is Status.PREEMPTING and key not in nominating:
            reason = plan.decision.job(key).reason or outcome.reason  # its eviction was dropped
        else:
            reason = outcome.reason
        if job is not None:
            job.pending_reason = reason
        else:
            reasons[context.jobs[key]] = reason
    order = {d.job_id: i for i, d in enumerate(plan.starts)}
    return sorted(starting, key=lambda s: order[s[0].job_id]), reasons


async def _start(
    session: AsyncSession,
    starting: list[tuple[JobDecision, Job, Placement]],
    context: RoundContext,
    generation: int,
    staging: Mapping[str, tuple[Copy, ...]],
) -> list[str]:
    """Step 5. The placements first, then the rows that point at them (shares, reservations,
    dispatch messages), each in flushes of `FLUSH_EVERY` starts (a statement per table each;
    the last with the round's last flush), a job's rows all in one. A start
    that lands where its data is not gets its copies (`staging`) on the shares they go to,
    their bandwidth held until each share's staging ends."""
    turns = Turns()
    for i in range(0, len(starting), FLUSH_EVERY):
        await turns.take()
        session.add_all([placement for _, _, placement in starting[i : i + FLUSH_EVERY]])
        await session.flush()
    queue_ids = {job.queue_id for _, job, _ in starting}
    queues = (
        {
            q.id: q
            for q in (await session.execute(select(Queue).where(Queue.id.in_(queue_ids)))).scalars()
        }
        if queue_ids
        else {}
    )
    copied = {c.data for d, _, _ in starting for c in staging.get(d.job_id, ())}
    uris = await source_uris(session, names=copied - {CHECKPOINT})
    placed = []
    for i, (d, job, placement) in enumerate(starting):
        if i and i % FLUSH_EVERY == 0:
            await session.flush()
        await turns.take()
        rows, lines = write_holdings(
            session,
            job=job,
            decision=d,
            placement=placement,
            cluster_ids=context.cluster_ids,
            link_ids=context.link_ids,
        )
        lines += write_staging(
            session,
            copies=staging.get(d.job_id, ()),
            placement=placement,
            shares=rows,
            cluster_ids=context.cluster_ids,
            link_ids=context.link_ids,
            job_uid=job.id,
            uris=uris,
        )
        await mark_placed(
            session,
            job=job,
            placement=placement,
            shares=rows,
            queue=queues.get(job.queue_id),
            message=f"placed in round {generation}",
            event=f"round {generation}: " + "; ".join(lines),
        )
        placed.append(d.job_id)
    return placed


async def _evict(
    session: AsyncSession,
    evictions: list[Eviction],
    context: RoundContext,
    jobs: dict[uuid.UUID, Job],
    placed: list[str],
    generation: int,
    staging: Mapping[str, tuple[Copy, ...]],
) -> tuple[list[str], list[GangOutcome]]:
    """Step 7: the victims requeued, each preemptor still Pending nominated (with the copies
    it needs where it will start)."""
    nominated: list[str] = []
    evicted: list[GangOutcome] = []
    for e in evictions:
        job = jobs.get(context.jobs[e.preemptor]) if e.preemptor in context.jobs else None
        if job is None or job.state is not JobState.PENDING or e.preemptor in placed:
            continue
        evicted += await nominate(
            session,
            eviction=e,
            preemptor=job,
            context=context,
            generation=generation,
            copies=staging.get(e.preemptor, ()),
        )
        nominated.append(e.preemptor)
    return nominated, evicted


async def _set_aside(
    session: AsyncSession, plan: RoundPlan, context: RoundContext, jobs: dict[uuid.UUID, Job]
) -> None:
    """Step 8: an Unschedulable event for each job the round could not model."""
    for key, outcome in plan.outcomes.items():
        if outcome.status is not Status.SET_ASIDE:
            continue
        job = jobs.get(context.jobs[key])
        if job is not None and job.state is JobState.PENDING:
            await record_event(
                session,
                job_id=job.id,
                type=EventType.WARNING,
                reason="Unschedulable",
                message=outcome.reason,
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


async def _misfits(
    session: AsyncSession,
    *,
    admitted: list[JobDecision],
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
    shares = [s for d in admitted for s in d.shares if s.cluster in names]
    given = [
        pod
        for cut in shrinks
        if cut.cluster in names
        for pod in context.elastic[cut.job_id].run.given_back(cut)
    ]
    leaves = (
        {leaf for s in shares for leaf, _ in s.domains} | {leaf for _, leaf, *_ in given}
        if all(s.domains for s in shares)
        else None
    )
    free = planning.freed(tuple(await free_capacity(session, clusters, leaves=leaves)), given)
    pools = {s.name: ClusterPool(s) for s in free}
    misfits = {}
    for d in admitted:
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


def _misfit(d: JobDecision, pools: dict[str, ClusterPool], job_model: str | None) -> str | None:
    """Take the job's shares from `pools` (each of its own model, else the job's); why one
    does not fit, or None."""
    for share in d.shares:
        pool = pools.get(share.cluster)
        per_pod = share.gpus // share.pods if share.pods else 0
        if pool is None or per_pod == 0:
            continue
        model = share.gpu_model or job_model
        if not share.domains and model and pool.free_gpus(model) < share.gpus:
            return f"cluster {share.cluster} no longer has {share.gpus} GPUs free"
        for leaf, pods in share.domains:
            if pool.take_from_leaf(leaf, model, per_pod, pods) < pods:
                return (
                    f"{leaf} in {share.cluster} no longer has room for {pods} pods of "
                    f"{per_pod} GPUs"
                )
    return None
