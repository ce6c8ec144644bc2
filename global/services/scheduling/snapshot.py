"""A scheduling round's input: a consistent snapshot for the solver (free capacity per leaf
domain minus what placed-but-not-running jobs hold, link reservations, quotas, the pending
window in priority and fair-share order) and what it was built from, checked at commit."""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    ClusterState,
    Job,
    JobState,
    Link,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.jobspec import SplitPolicy
from volcano_global.jobspec.lifecycle import given_estimate
from volcano_global.services.inventory.domain_trees import domain_trees
from volcano_global.services.inventory.links import reserved_gbps
from volcano_global.services.scheduling.books import within_books
from volcano_global.services.scheduling.capacity_view import (
    free_states,
    read_histograms,
    solver_state,
)
from volcano_global.services.scheduling.elastic import (
    ELASTIC,
    ElasticPlacement,
    elastic_running,
)
from volcano_global.services.scheduling.heads import heads_per_queue, queue_heads
from volcano_global.services.scheduling.timing import duration_model, running_jobs
from volcano_global.services.scheduling.withdrawals import held_back
from volcano_global.services.tenancy.queue_shares import fleet_gpus, queue_tree
from volcano_global.services.tenancy.queues import WAITING
from volcano_global.solver import (
    ClusterCapacity,
    JobRequest,
    LinkState,
    Policy,
    Snapshot,
    planning,
    shrinking,
)
from volcano_global.solver.capacity import ClusterPool
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.fair_share import quota_states
from volcano_global.solver.preemption import Rules, Standing, may_evict_for, standings
from volcano_global.solver.requests import job_request

log = logging.getLogger(__name__)
NOT_RUNNING_YET = (JobState.PLACED, JobState.DISPATCHED)
CANDIDATES_PER_WINDOW_SLOT = 4  # pending jobs read per window slot, for fair share to choose from
# The planned order serves short work first: it chooses from more of each line (a round reads
# 16 x window waiting jobs, shared among the queues, and at least the window of each).
PLANNED_CANDIDATES = 16


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
    # Elastic width (planned policies): the running elastic jobs by job id, and the units
    # they give back this round (`elastic.py`).
    elastic: dict[str, ElasticPlacement] = field(default_factory=dict)
    shrinks: list[planning.Shrink] = field(default_factory=list)
    # Seconds until the first narrow elastic job's resize interval ends (None: none waits):
    # until then an idle loop may skip rounds, after it one may grow the job.
    settles_in_s: float | None = None
    links: tuple[LinkState, ...] = ()  # as the snapshot saw them
    # Reclaim (with preemption on): every queue's GPUs held and deserved, and reclaimable.
    standings: dict[str, Standing] = field(default_factory=dict)


async def build_snapshot(
    session: AsyncSession,
    *,
    window: int,
    policy: Policy = Policy.CPSAT,
    durations: DurationModel | None = None,
    reserve_after_s: float = planning.RESERVE_AFTER_S,
    preemption: Rules | None = None,
    hysteresis: planning.Hysteresis | None = None,
) -> tuple[Snapshot, RoundContext]:
    """The round's input. For a planned policy (`solver.planning`, the same code the simulator
    runs) the order serves short expected work first and the solver is told about time:
    `durations` learnt from finished jobs (read here when not given), running jobs' ends, and
    elastic jobs' resizes (`hysteresis`). With `preemption` (its rules), the running jobs
    (victims) and the queues' standing (reclaim) are read for every policy, and elastic jobs
    may give back units under the same rules (`solver.shrinking`); without, none does."""
    context = RoundContext()
    now = utcnow()
    if policy.planned and durations is None:
        durations = await duration_model(session)
    durations = durations or DurationModel()
    clusters = list(
        (
            await session.execute(
                select(Cluster).where(Cluster.state == ClusterState.READY).order_by(Cluster.name)
            )
        ).scalars()
    )
    for c in clusters:
        context.versions[c.name] = (c.inventory_generation, c.inventory_seq)
        context.cluster_ids[c.name] = c.id
    states = await free_capacity(session, clusters)
    links = list((await session.execute(select(Link))).unique().scalars())
    held = await reserved_gbps(session, link_ids=[link.id for link in links])
    link_states = []
    for link in links:
        a, b = link.cluster_a.name, link.cluster_b.name
        context.link_ids[(a, b)] = link.id
        link_states.append(LinkState(a, b, link.capacity_gbps, held.get(link.id, 0.0)))
    context.links = tuple(link_states)
    tree = await queue_tree(session)
    # Fair share chooses from the head of every queue's line by a few columns; only the
    # chosen jobs' placement fields are read (never the manifests).
    heads, queue_names = await _heads(session, window, policy, now)
    weights = {name: q.weight for name, q in tree.items()}
    estimates = {str(c.id): given_estimate(c.running_estimate_seconds) for c in heads}
    order = planning.order(
        policy,
        [
            planning.waiting(
                str(c.id),
                queue=queue_names[c.queue_id],
                priority=c.priority,
                gpus=c.total_gpus,
                submitted_at=c.submitted_at,
                estimate_s=estimates[str(c.id)],
                now=now,
                durations=durations,
                reserve_after_s=reserve_after_s,
            )
            for c in heads
        ],
        held={name: q.held for name, q in tree.items()},
        weights=weights,
        tree=tree,
    )
    candidates = {c.key: c for c in order[:window]}
    chosen = [uuid.UUID(key) for key in candidates]
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
                Job.preemption_policy,
            )
            .join(Queue, Queue.id == Job.queue_id)
            .where(Job.id.in_(chosen))
        )
    }
    requests: list[JobRequest] = []
    parents = {q.parent for q in tree.values() if q.parent}
    for job in (fields[i] for i in chosen if i in fields):
        key = str(job.id)
        context.jobs[key] = job.id
        context.gpu_models[key] = job.gpu_model
        if job.queue in parents:  # a submission that raced the queue becoming a parent
            context.unmodelled[key] = (
                f"queue {job.queue!r} has child queues and jobs run only in leaf queues: "
                "cancel this job and submit it to a leaf queue"
            )
            continue
        try:
            request = job_request(
                job_id=key,
                gang=job.gang,
                split=with_measurements(job.split_policy, job.measurements),
                communication=job.communication,
                priority=job.priority,
                queue=job.queue,
                may_evict_for=may_evict_for(job.preemption_policy)
                if preemption is not None
                else frozenset(),
            )
        except ValueError as exc:
            context.unmodelled[key] = f"cannot be placed yet: {exc}"
            continue
        except Exception as exc:  # a defect: this job waits, the round goes on
            log.exception("job %s could not be modelled", key)
            context.unmodelled[key] = f"set aside: {type(exc).__name__}: {exc}"[:500]
            continue
        requests.append(
            planning.with_time(policy, request, candidates[key], estimates[key], durations)
        )
    running = (
        await running_jobs(session, clusters, states, now=now, durations=durations)
        if policy.planned or preemption is not None
        else []
    )
    if preemption is not None:
        reclaimable = dict((await session.execute(select(Queue.name, Queue.reclaimable))).all())
        context.standings = standings(await fleet_gpus(session), tree, reclaimable)
    if policy.planned:
        growth, states = await _elastic_round(
            session,
            context,
            clusters,
            states,
            requests,
            now,
            durations,
            preemption,
            hysteresis or planning.Hysteresis(),
        )
        requests += growth
    # Quotas: each leaf's room under every capability on its path (solver/fair_share.py).
    queues = quota_states(tree, {r.queue for r in requests})
    snapshot = Snapshot(tuple(states), tuple(link_states), tuple(requests), queues, tuple(running))
    return snapshot, context


async def _heads(
    session: AsyncSession, window: int, policy: Policy, now: datetime
) -> tuple[list[Any], dict[uuid.UUID, str]]:
    """Every queue's first waiting jobs (`heads.py`) but those backing off after a withdrawal
    (`withdrawals.py`), and the queues' names by id. A queue that lost heads to the back-off
    is read once more past them, so that its later jobs are not hidden behind them."""
    names = dict((await session.execute(select(Queue.id, Queue.name).order_by(Queue.name))).all())
    depth = PLANNED_CANDIDATES if policy.planned else CANDIDATES_PER_WINDOW_SLOT
    per_queue = heads_per_queue(window, depth, len(names))
    heads = await queue_heads(session, list(names), per_queue)
    out = await held_back(session, job_ids=[c.id for c in heads], now=now)
    if out:
        short = sorted({c.queue_id for c in heads if c.id in out})
        heads = [c for c in heads if c.id not in out and c.queue_id not in short]
        again = await queue_heads(session, short, per_queue, excluding=out)
        out |= await held_back(session, job_ids=[c.id for c in again], now=now)
        heads += [c for c in again if c.id not in out]
    return heads, names


async def _elastic_round(
    session: AsyncSession,
    context: RoundContext,
    clusters: list[Cluster],
    states: list[ClusterCapacity],
    requests: list[JobRequest],
    now: datetime,
    durations: DurationModel,
    rules: Rules | None,
    hysteresis: planning.Hysteresis,
) -> tuple[list[JobRequest], list[ClusterCapacity]]:
    """What running elastic jobs could add (`planning.growth`, after every waiting job) and
    what they give back to waiting jobs that may take from them (`shrinking.shrinks`, under
    the preemption `rules`, none without: the capacity the solver sees includes it, the
    commit resizes only where the round starts something); a job that gives back units does
    not also grow. The same as the simulator's round."""
    elastic = await elastic_running(
        session, clusters={c.id: c.name for c in clusters}, now=now, durations=durations
    )
    if not elastic:
        return [], states
    context.elastic = {str(e.job_id): e for e in elastic}
    runs = [e.run for e in elastic]
    context.settles_in_s = min(
        (
            hysteresis.min_interval_s - r.since_s
            for r in runs
            if r.growable > 0 and r.since_s < hysteresis.min_interval_s
        ),
        default=None,
    )
    free: dict[tuple[str, str | None], int] = defaultdict(int)
    models: dict[str, set[str]] = defaultdict(set)
    for state in states:
        for leaf in state.leaves:
            free[(state.name, leaf.gpu_model)] += leaf.free_gpus
            models[state.name].add(leaf.gpu_model)
    context.shrinks = (
        shrinking.shrinks(
            requests,
            runs,
            free_gpus=dict(free),
            cluster_models={c: tuple(sorted(m)) for c, m in models.items()},
            rules=rules,
            queues=context.standings,
            hysteresis=hysteresis,
        )
        if rules is not None
        else []
    )
    giving = {s.job_id for s in context.shrinks}
    lowest = min((r.priority for r in requests), default=None)
    growth = planning.growth(
        [r for r in runs if r.request.id not in giving],
        lowest_priority=lowest,
        widen=not any(r.due for r in requests),
        hysteresis=hysteresis,
    )
    pods = [p for cut in context.shrinks for p in context.elastic[cut.job_id].given_back(cut)]
    return growth, list(planning.freed(tuple(states), pods))


def with_measurements(split: SplitPolicy, measurements: dict[str, Any] | None) -> SplitPolicy:
    """What the job's processes measured replaces what it declared (services/jobs/measurements)."""
    measured = (measurements or {}).get("allreduceGbps")
    if measured is None or split.mode == "never":
        return split
    return split.model_copy(update={"crossing_gbps": float(measured)})


async def free_capacity(
    session: AsyncSession,
    clusters: list[Cluster],
    *,
    leaves: set[str] | None = None,
    excluding: uuid.UUID | None = None,
) -> list[ClusterCapacity]:
    """Per cluster: a free-GPU histogram per (leaf domain, model) from ready, schedulable nodes,
    minus the pods of placements that hold capacity before their pods run (and of preemptors'
    nominations). All leaves come from
    the in-memory view brought up to date (`capacity_view.py`); with `leaves` (leaf domain
    names; a cluster's own name for its nodes outside any domain), only those, read afresh.
    `excluding`: a placement whose hold is not subtracted (a nomination about to start).
    Never more than the Global's books leave free (`books.py`)."""
    trees = await domain_trees(session, {c.id: c.inventory_generation for c in clusters})
    if leaves is None:
        states = await free_states(session, clusters, trees)
    else:
        read, sizes = await read_histograms(session, clusters, trees, leaves)
        states = {
            c.id: solver_state(c.name, read.get(c.id, {}), trees[c.id], sizes.get(c.id))
            for c in clusters
        }
    pools: dict[uuid.UUID, ClusterPool] = {}  # the clusters where a share holds capacity
    holding = await session.execute(
        select(ClusterShare, Job.gpu_model)
        .join(Placement, Placement.id == ClusterShare.placement_id)
        .join(Job, Job.id == Placement.job_id)
        .where(
            or_(
                and_(Placement.state == PlacementState.ACTIVE, Job.state.in_(NOT_RUNNING_YET)),
                Placement.state == PlacementState.NOMINATED,
            ),
            ClusterShare.cluster_id.in_([c.id for c in clusters]),
            Placement.id != excluding if excluding is not None else true(),
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
    held = [pools[c.id].state() if c.id in pools else states[c.id] for c in clusters]
    return await within_books(session, clusters, held, excluding=excluding)


async def anything_pending(session: AsyncSession) -> bool:
    """Whether a job waits (a round has something to do)."""
    found = await session.execute(select(Job.id).where(WAITING).limit(1))
    return found.first() is not None


async def narrow_elastic(session: AsyncSession) -> bool:
    """Whether a running elastic job runs narrower than its document (it may grow)."""
    narrow = await session.execute(
        select(Job.id)
        .join(Placement, Placement.job_id == Job.id)
        .join(ClusterShare, ClusterShare.placement_id == Placement.id)
        .where(Job.state == JobState.RUNNING, Placement.state == PlacementState.ACTIVE, ELASTIC)
        .group_by(Job.id, Job.total_pods)
        .having(func.sum(ClusterShare.pods) < Job.total_pods)
        .limit(1)
    )
    return narrow.first() is not None


async def inventory_versions(session: AsyncSession) -> dict[str, tuple[int, int]]:
    """Each Ready cluster's inventory version (generation, sequence), as `RoundContext.versions`."""
    rows = await session.execute(
        select(Cluster.name, Cluster.inventory_generation, Cluster.inventory_seq).where(
            Cluster.state == ClusterState.READY
        )
    )
    return {name: (generation, seq) for name, generation, seq in rows}
