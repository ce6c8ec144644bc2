"""One scheduling round's database side: a consistent snapshot for the solver (free capacity
per leaf domain minus what placed-but-not-running jobs hold, link reservations, quotas, the
pending window in priority and fair-share order) and the atomic commit of the decision, less
the jobs that no longer fit where the inventory moved meanwhile."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global import failpoints
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    EventType,
    Job,
    JobState,
    Link,
    LinkReservation,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.db.models import (
    ClusterState as ClusterHealth,
)
from volcano_global.jobspec import Communication, Gang, SplitPolicy
from volcano_global.services.capacity_view import free_states, read_histograms, solver_state
from volcano_global.services.domain_trees import domain_trees
from volcano_global.services.events import record_event
from volcano_global.services.fairshare import Candidate, fair_order
from volcano_global.services.jobs import lock_jobs
from volcano_global.services.lifecycle import transition
from volcano_global.services.links import reserved_gbps
from volcano_global.services.measurements import issue_job_token
from volcano_global.services.outbox import enqueue_assignments
from volcano_global.services.queues import HOLDING_STATES
from volcano_global.solver import (
    ClusterState,
    Decision,
    JobDecision,
    JobRequest,
    LinkState,
    QueueState,
    Snapshot,
)
from volcano_global.solver.capacity import ClusterPool
from volcano_global.solver.requests import job_request

NOT_RUNNING_YET = (JobState.PLACED, JobState.DISPATCHED)
CANDIDATES_PER_WINDOW_SLOT = 4  # pending jobs read per window slot, for fair share to choose from


@dataclass
class RoundContext:
    """What the snapshot was built from, to check at commit time."""

    versions: dict[str, tuple[int, int]] = field(
        default_factory=dict
    )  # cluster -> (generation, seq)
    cluster_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    link_ids: dict[tuple[str, str], uuid.UUID] = field(default_factory=dict)
    jobs: dict[str, uuid.UUID] = field(default_factory=dict)
    gpu_models: dict[str, str | None] = field(default_factory=dict)  # job id -> its GPU model
    unmodelled: dict[str, str] = field(default_factory=dict)  # job id -> why


async def build_snapshot(session: AsyncSession, *, window: int) -> tuple[Snapshot, RoundContext]:
    context = RoundContext()
    clusters = list(
        (
            await session.execute(
                select(Cluster).where(Cluster.state == ClusterHealth.READY).order_by(Cluster.name)
            )
        ).scalars()
    )
    for c in clusters:
        context.versions[c.name] = (c.inventory_generation, c.inventory_seq)
        context.cluster_ids[c.name] = c.id
    states = await _free_capacity(session, clusters)
    links = list((await session.execute(select(Link))).unique().scalars())
    held = await reserved_gbps(session, link_ids=[link.id for link in links])
    link_states = []
    for link in links:
        a, b = link.cluster_a.name, link.cluster_b.name
        context.link_ids[(a, b)] = link.id
        link_states.append(LinkState(a, b, link.capacity_gbps, held.get(link.id, 0.0)))
    queues = await _queue_states(session)
    # Fair share chooses from the head of the line by a few columns; only the chosen jobs'
    # placement fields are read (never the manifests).
    heads = (
        await session.execute(
            select(Job.id, Queue.name, Job.priority, Job.total_gpus, Job.submitted_at)
            .join(Queue, Queue.id == Job.queue_id)
            .where(Job.state == JobState.PENDING)
            .order_by(Job.priority.desc(), Job.submitted_at, Job.id)
            .limit(window * CANDIDATES_PER_WINDOW_SLOT)
        )
    ).all()
    weights = dict((await session.execute(select(Queue.name, Queue.weight))).all())
    order = fair_order(
        [Candidate(str(c.id), c.name, c.priority, c.total_gpus, c.submitted_at) for c in heads],
        held={q.name: q.used_gpus for q in queues},
        weights=weights,
    )
    chosen = [uuid.UUID(c.key) for c in order[:window]]
    fields = {
        row.id: row
        for row in await session.execute(
            select(
                Job.id,
                Queue.name.label("queue"),
                Job.priority,
                Job.gpu_model,
                Job.gang,
                Job.split_policy,
                Job.communication,
                Job.measurements,
            )
            .join(Queue, Queue.id == Job.queue_id)
            .where(Job.id.in_(chosen))
        )
    }
    requests: list[JobRequest] = []
    for job in (fields[i] for i in chosen if i in fields):
        key = str(job.id)
        context.jobs[key] = job.id
        context.gpu_models[key] = job.gpu_model
        try:
            split = SplitPolicy.model_validate(job.split_policy)
            requests.append(
                job_request(
                    job_id=key,
                    gang=Gang.model_validate(job.gang),
                    split=_with_measurements(split, job.measurements),
                    communication=Communication.model_validate(job.communication)
                    if job.communication
                    else None,
                    priority=job.priority,
                    queue=job.queue,
                )
            )
        except ValueError as exc:
            context.unmodelled[key] = f"cannot be placed yet: {exc}"
    return Snapshot(tuple(states), tuple(link_states), tuple(requests), tuple(queues)), context


def _with_measurements(split: SplitPolicy, measurements: dict[str, Any] | None) -> SplitPolicy:
    """What the job's processes measured replaces what it declared (services/measurements)."""
    measured = (measurements or {}).get("allreduceGbps")
    if measured is None or split.mode == "never":
        return split
    return split.model_copy(update={"crossing_gbps": float(measured)})


async def _free_capacity(
    session: AsyncSession, clusters: list[Cluster], *, leaves: set[str] | None = None
) -> list[ClusterState]:
    """Per cluster: a free-GPU histogram per (leaf domain, model) from ready, schedulable nodes,
    minus the pods of placements that hold capacity before their pods run. All leaves come from
    the in-memory view brought up to date (services/capacity_view); with `leaves` (leaf domain
    names; a cluster's own name for its nodes outside any domain), only those, read afresh."""
    trees = await domain_trees(session, {c.id: c.inventory_generation for c in clusters})
    if leaves is None:
        states = await free_states(session, clusters, trees)
    else:
        read = await read_histograms(session, clusters, trees, leaves)
        states = {c.id: solver_state(c.name, read.get(c.id, {}), trees[c.id]) for c in clusters}
    pools: dict[uuid.UUID, ClusterPool] = {}  # the clusters where a share holds capacity
    holding = await session.execute(
        select(ClusterShare, Job.gpu_model)
        .join(Placement, Placement.id == ClusterShare.placement_id)
        .join(Job, Job.id == Placement.job_id)
        .where(
            Placement.state == PlacementState.ACTIVE,
            Job.state.in_(NOT_RUNNING_YET),
            ClusterShare.cluster_id.in_([c.id for c in clusters]),
        )
    )
    for share, model in holding:
        per_pod = share.gpus // share.pods if share.pods else 0
        if per_pod == 0:
            continue  # a CPU-only share holds no GPUs
        pool = pools.get(share.cluster_id)
        if pool is None:
            pool = pools[share.cluster_id] = ClusterPool(states[share.cluster_id])
        for leaf, count in (share.domains or {}).items():
            pool.take_from_leaf(leaf, model, per_pod, int(count))
    return [pools[c.id].state() if c.id in pools else states[c.id] for c in clusters]


async def _misfits(
    session: AsyncSession, *, decision: Decision, context: RoundContext, clusters: list[Cluster]
) -> dict[str, str]:
    """The admitted jobs (id -> why) whose shares in `clusters` no longer fit what their
    current inventories leave free (minus capacity held by earlier placements), taken in the
    decision's order: a job that fits takes its room, one that does not takes none. Only the
    leaves the shares use are read, unless a share names none (then whole clusters)."""
    names = {c.name for c in clusters}
    shares = [s for d in decision.jobs if d.admitted for s in d.shares if s.cluster in names]
    leaves = (
        {leaf for s in shares for leaf, _ in s.domains} if all(s.domains for s in shares) else None
    )
    pools = {s.name: ClusterPool(s) for s in await _free_capacity(session, clusters, leaves=leaves)}
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


async def anything_pending(session: AsyncSession) -> bool:
    """Whether a job waits (a round has something to do)."""
    found = await session.execute(select(Job.id).where(Job.state == JobState.PENDING).limit(1))
    return found.first() is not None


async def _queue_states(session: AsyncSession) -> list[QueueState]:
    used = dict(
        (
            await session.execute(
                select(Job.queue_id, func.sum(Job.total_gpus))
                .where(Job.state.in_(HOLDING_STATES))
                .group_by(Job.queue_id)
            )
        ).all()
    )
    queues = (await session.execute(select(Queue))).scalars()
    return [QueueState(q.name, q.gpu_quota, int(used.get(q.id) or 0)) for q in queues]


@dataclass(frozen=True)
class RoundResult:
    generation: int
    placed: list[str]
    pending: int
    deferred: dict[str, str] = field(default_factory=dict)  # admitted, then no longer fitting


async def commit_round(
    session: AsyncSession, *, decision: Decision, context: RoundContext
) -> RoundResult:
    """Write the decision in the caller's transaction: placements with their shares and link
    reservations, jobs Placed, reasons for the rest. An admitted job is deferred to the next
    round (left Pending, the reason said) when a cluster it uses is no longer Ready, or its
    inventory moved since the snapshot and the job's shares no longer fit what is free there
    now; the rest of the round is kept."""
    current = (
        await session.execute(
            select(Cluster).where(Cluster.name.in_(list(context.versions))).with_for_update()
        )
    ).scalars()
    used = {s.cluster for d in decision.jobs if d.admitted for s in d.shares}
    moved, gone = [], {}
    for cluster in current:
        if cluster.name not in used:
            continue
        if cluster.state is not ClusterHealth.READY:
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
    if moved:
        # Inventories move all the time in large clusters (pods come and go): check the shares
        # against what is free now; only the jobs that no longer fit wait for the next round.
        kept = _without(decision, deferred)
        deferred |= await _misfits(session, decision=kept, context=context, clusters=moved)
    generation = (
        int((await session.execute(select(func.max(Placement.generation)))).scalar() or 0) + 1
    )
    placed = []
    ids = {d.job_id: context.jobs.get(d.job_id) for d in decision.jobs}
    jobs = await lock_jobs(session, [i for i in ids.values() if i is not None])
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
    # The placements first, in one flush: the rows that point at them (shares, reservations,
    # dispatch messages) then go together in the round's last flush, a statement per table.
    session.add_all([placement for _, _, placement in admitted])
    await session.flush()
    for d, job, placement in admitted:
        offset = 0
        lines = []
        rows = []
        for share in d.shares:
            row = ClusterShare(
                placement_id=placement.id,
                cluster_id=context.cluster_ids[share.cluster],
                pods=share.pods,
                gpus=share.gpus,
                units=share.units,
                rank_offset=offset,
                domains=dict(share.domains),
            )
            session.add(row)
            rows.append(row)
            offset += share.pods
            lines.append(f"{share.pods} pods in {share.cluster}")
        for r in d.reservations:
            key = (r.a, r.b) if (r.a, r.b) in context.link_ids else (r.b, r.a)
            session.add(
                LinkReservation(
                    placement_id=placement.id, link_id=context.link_ids[key], gbps=r.gbps
                )
            )
            lines.append(f"{r.gbps:g} Gbps on {r.a}<->{r.b}")
        token = issue_job_token(session, job=job)
        enqueue_assignments(session, job=job, placement=placement, shares=rows, job_token=token)
        transition(job, JobState.PLACED, message=f"placed in round {generation}")
        await record_event(
            session,
            job_id=job.id,
            fold=False,  # the round's number makes every Placed message new
            reason="Placed",
            message=f"round {generation}: " + "; ".join(lines),
        )
        placed.append(d.job_id)
    for key, why in context.unmodelled.items():
        job = await session.get(Job, context.jobs[key])
        if job is not None and job.state is JobState.PENDING:
            job.pending_reason = why
            await record_event(
                session, job_id=job.id, type=EventType.WARNING, reason="Unschedulable", message=why
            )
    await session.flush()
    if placed:
        failpoints.hit("round-commit")
    return RoundResult(
        generation=generation,
        placed=placed,
        pending=len(decision.jobs) - len(placed),
        deferred=deferred,
    )


def _without(decision: Decision, jobs: dict[str, str]) -> Decision:
    """The decision without the jobs in `jobs`."""
    if not jobs:
        return decision
    return replace(decision, jobs=tuple(d for d in decision.jobs if d.job_id not in jobs))
