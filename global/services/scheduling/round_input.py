"""Step 0 of a round on the server: read its input (`solver.round_plan.RoundInput`) from the
database, DB reads only, and what the commit checks it against and writes with
(`RoundContext`). The recipe itself is `solver.round_plan.plan_round`, which the simulator runs too.

The reads, in order: the Ready clusters and their inventory versions; what is free on them
(`free.py`); the links and what placements reserve on them; the queue tree; the head of every
queue's line (`heads.py`), less the jobs backing off after a withdrawal, cut to the round's
window in the order `plan_round` takes them (`solver.round_plan.window`); the window's jobs as the
solver's requests; the running jobs (planned policies and preemption); the fleet's GPUs and
which queues are reclaimable (preemption); the running elastic jobs (planned policies); the
data on its way (copies running), then what the window's jobs read of data and where it is
(their DataNeeds; `round_data.py` reads both), with the running jobs when gravity weighs
waiting for a cluster that holds it. The links' reserved bandwidth counts the copies still
running (staging reservations, `inventory/links.reserved_gbps`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
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
from volcano_global.db.parts import parts
from volcano_global.jobspec import SplitPolicy
from volcano_global.jobspec.lifecycle import given_estimate
from volcano_global.jobspec.normalize import HYPERJOB
from volcano_global.jobspec.time_sharing import QUANTUM, time_sharing_quantum
from volcano_global.loop_turns import Turns
from volcano_global.services.inventory.links import reserved_gbps
from volcano_global.services.scheduling import round_data
from volcano_global.services.scheduling.elastic import ELASTIC, ElasticPlacement, elastic_running
from volcano_global.services.scheduling.free import free_capacity
from volcano_global.services.scheduling.heads import heads_per_queue, queue_heads, waiting_rows
from volcano_global.services.scheduling.timing import duration_model, running_jobs
from volcano_global.services.scheduling.withdrawals import backing_off, held_back
from volcano_global.services.tenancy.queue_shares import fleet_gpus, queue_tree
from volcano_global.services.tenancy.queues import WAITING
from volcano_global.solver import ClusterCapacity, JobRequest, LinkState, Policy, whole_queue
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.fair_share import QueueNode
from volcano_global.solver.gravity import DataMode
from volcano_global.solver.preemption import may_evict_for
from volcano_global.solver.replication import READS_WINDOW_S
from volcano_global.solver.requests import job_request
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Waiting, window

log = logging.getLogger(__name__)
CANDIDATES_PER_WINDOW_SLOT = 4  # pending jobs read per window slot, for fair share to choose from
# The planned order serves short work first: it chooses from more of each line (a round reads
# 16 x window waiting jobs, shared among the queues, and at least the window of each).
PLANNED_CANDIDATES = 16


@dataclass
class RoundContext:
    """What the input was read from, for the commit to check and write with."""

    versions: dict[str, tuple[int, int]] = field(
        default_factory=dict
    )  # cluster -> (generation, seq)
    cluster_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    link_ids: dict[tuple[str, str], uuid.UUID] = field(default_factory=dict)
    jobs: dict[str, uuid.UUID] = field(default_factory=dict)
    gpu_models: dict[str, str | None] = field(default_factory=dict)  # job id -> its GPU model
    # The running elastic jobs by job id (planned policies), with their placements.
    elastic: dict[str, ElasticPlacement] = field(default_factory=dict)
    links: tuple[LinkState, ...] = ()  # as the round saw them


FIELDS_PER_READ = 50  # waiting jobs read in full by one statement (`_fields`)


async def read_round(
    session: AsyncSession,
    *,
    window: int,
    policy: Policy = Policy.CPSAT,
    options: RoundOptions | None = None,
    durations: DurationModel | None = None,
    now: datetime | None = None,
    reads_window_s: float = READS_WINDOW_S,
) -> tuple[RoundInput, RoundContext]:
    """The round's input. A planned policy is told about time: `durations` learnt from
    finished jobs (read here when not given), the running jobs' expected ends, the elastic
    jobs. With preemption on (`options.preemption`), the running jobs (victims) and the
    queues' standing are read for every policy. With replicas on
    (`options.data.replicate_readers`), the datasets read within `reads_window_s`."""
    options = options or RoundOptions()
    now = now or utcnow()
    if policy.planned and durations is None:
        durations = await duration_model(session)
    durations = durations or DurationModel()
    context = RoundContext()
    clusters = await _ready_clusters(session, context)
    states = await free_capacity(session, clusters)
    links = await _links(session, context)
    tree = await queue_tree(session)
    sharing = await _time_sharing(session) if options.time_sharing is not None else {}
    waiting, set_aside, beyond = await _waiting(
        session, context, tree, policy, options, durations, now, window, sharing, states
    )
    preempting = options.preemption is not None
    data = RoundInput(
        now,
        tuple(states),
        links,
        tuple(waiting),
        tree,
        durations=durations,
        set_aside=set_aside,
        time_sharing=sharing,
        beyond=beyond,
    )
    data = await _with_data(session, data, options, reads_window_s)
    # Gravity weighs staging against waiting for a cluster that holds the data: when running
    # jobs are expected to leave it room.
    weighing = bool(data.data) and options.data.mode is DataMode.GRAVITY
    if policy.planned or preempting or weighing or sharing:
        running = await running_jobs(
            session,
            clusters,
            states,
            now=now,
            durations=durations,
            staging_gbps=options.data.staging_gbps,
        )
        data = replace(data, running=tuple(running))
    if preempting or sharing:  # the queues' standings (fair share) need the fleet
        reclaimable = dict((await session.execute(select(Queue.name, Queue.reclaimable))).all())
        data = replace(data, fleet_gpus=await fleet_gpus(session), reclaimable=reclaimable)
    elif policy.planned and options.long_work is not None:  # its share is of the fleet
        data = replace(data, fleet_gpus=await fleet_gpus(session))
    if policy.planned:
        data = await _with_elastic(session, data, context, clusters, options)
    return data, context


async def _with_data(
    session: AsyncSession, data: RoundInput, options: RoundOptions, reads_window_s: float
) -> RoundInput:
    """The waiting jobs' data needs, the copies on their way and, with replicas on, the
    datasets' popularity."""
    # What is on its way before where it is: a copy's end moves its data from the one to the
    # other in one commit, and on Postgres each read has its own snapshot, so a copy that ended
    # between the reads read the other way round was in neither - and was staged again.
    copying = await round_data.copying(session) if data.waiting else {}
    data = replace(data, data=await round_data.waiting_needs(session, list(data.waiting)))
    if data.data:
        data = await round_data.with_copies(session, data, copying)
    if data.data and options.data.replicate_readers > 0:
        data = await round_data.with_popularity(session, data, reads_window_s=reads_window_s)
    return data


async def _with_elastic(
    session: AsyncSession,
    data: RoundInput,
    context: RoundContext,
    clusters: list[Cluster],
    options: RoundOptions,
) -> RoundInput:
    """A planned round: the running elastic jobs, and the data their growth needs."""
    elastic = await elastic_running(
        session, clusters={c.id: c.name for c in clusters}, now=data.now, durations=data.durations
    )
    context.elastic = {str(e.job_id): e for e in elastic}
    data = replace(data, elastic=tuple(e.run for e in elastic))
    if elastic and options.data.mode is not DataMode.OBLIVIOUS:  # growth stays by its data
        grown = await round_data.needs_of(session, [e.job_id for e in elastic])
        data = replace(data, data={**data.data, **grown})
    return data


async def _time_sharing(session: AsyncSession) -> dict[str, float]:
    """The queues that time-share (their annotations, `jobspec.time_sharing`), with their
    quanta. A queue stored before its annotation was checked, with a value that cannot be
    read, does not time-share (and the round logs why)."""
    out = {}
    rows = await session.execute(select(Queue.name, Queue.annotations))
    for name, said in rows.all():
        try:
            quantum = time_sharing_quantum(said or {})
        except ValueError as exc:
            log.warning("queue %s does not time-share: %s: %s", name, QUANTUM, exc)
            continue
        if quantum is not None:
            out[name] = quantum
    return out


async def _ready_clusters(session: AsyncSession, context: RoundContext) -> list[Cluster]:
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
    return clusters


async def _links(session: AsyncSession, context: RoundContext) -> tuple[LinkState, ...]:
    links = list((await session.execute(select(Link))).unique().scalars())
    held = await reserved_gbps(session, link_ids=[link.id for link in links])
    states = []
    for link in links:
        a, b = link.cluster_a.name, link.cluster_b.name
        context.link_ids[(a, b)] = link.id
        states.append(LinkState(a, b, link.capacity_gbps, held.get(link.id, 0.0)))
    context.links = tuple(states)
    return context.links


async def _waiting(
    session: AsyncSession,
    context: RoundContext,
    tree: dict[str, QueueNode],
    policy: Policy,
    options: RoundOptions,
    durations: DurationModel,
    now: datetime,
    size: int,
    sharing: dict[str, float],
    states: Sequence[ClusterCapacity],
) -> tuple[list[Waiting], dict[str, str], dict[str, str]]:
    """The waiting jobs read in full as the solver's requests, those set aside (why), and
    those beyond the window not read in full (why they wait). Fair share orders the jobs by a
    few columns (`solver.round_plan.window`): the window's are read in full; with
    `whole_queue`, every waiting job is ordered, and of those beyond the window the fast pass's
    candidates (`solver.whole_queue.assign`) are read in full too."""
    if options.whole_queue:
        heads, queue_names = await _whole_queue(session, now)
    else:
        heads, queue_names = await _heads(session, size, policy, now, sharing)
    light = [
        Waiting(
            JobRequest(
                str(c.id),
                pods=1,
                gpus_per_pod=c.total_gpus,
                priority=c.priority,
                queue=queue_names[c.queue_id],
                served_gpu_s=c.attained_gpu_s,
            ),
            c.submitted_at,
            given_estimate(c.running_estimate_seconds),
        )
        for c in heads
    ]
    probe = RoundInput(
        now, (), waiting=tuple(light), tree=tree, durations=durations, time_sharing=sharing
    )
    # Ordering and screening 10,000 jobs is CPU work: off the event loop, as the solve is.
    depth = len(light) if options.whole_queue else size
    in_line = await asyncio.to_thread(window, probe, policy, options, depth)
    chosen, beyond = in_line[:size], {}
    if len(in_line) > size:
        more, beyond = await asyncio.to_thread(
            _screen, heads, in_line[size:], queue_names, states, tree, options
        )
        chosen += more
    for key in beyond:
        context.jobs[key] = uuid.UUID(key)
    fields = await _fields(session, [uuid.UUID(key) for key in chosen])
    by_id = {w.request.id: w for w in light}
    parents = {q.parent for q in tree.values() if q.parent}
    waiting, set_aside = [], {}
    turns = Turns()
    for key in chosen:
        await turns.take()
        job = fields.get(uuid.UUID(key))
        if job is None:
            continue
        context.jobs[key] = job.id
        context.gpu_models[key] = job.gpu_model
        request, why = _request(job, parents, options)
        if why is not None:
            set_aside[key] = why
        else:
            waiting.append(Waiting(request, by_id[key].submitted_at, by_id[key].estimate_s))
    return waiting, set_aside, beyond


def _screen(
    rows: Sequence[Any],
    tail: list[str],
    queue_names: dict[uuid.UUID, str],
    states: Sequence[ClusterCapacity],
    tree: dict[str, QueueNode],
    options: RoundOptions,
) -> tuple[list[str], dict[str, str]]:
    """Step 1d of the round (`solver.whole_queue.assign`) on the jobs beyond the window, by
    their few columns: the candidates, to be read in full, and why the others wait. A HyperJob
    the first fit found no cluster for whole is read in full too (at most `backfill_limit`):
    its children may differ, which its columns cannot tell, and then step 5c places it child
    by child (`solver.parts`), not the fit of one whole cluster."""
    by_id = {str(c.id): c for c in rows}
    jobs = [_shape(by_id[key], queue_names) for key in tail]
    rooms = whole_queue.rooms(tree, {queue_names[c.queue_id] for c in rows})
    assigned = whole_queue.assign(jobs, states, rooms, limit=options.backfill_limit)
    candidates = [key for key in tail if assigned[key].cluster is not None]
    unfit = [key for key in tail if assigned[key].cluster is None]
    hyper = [key for key in unfit if by_id[key].kind == HYPERJOB[1]][: options.backfill_limit]
    read = set(hyper)
    return candidates + hyper, {key: assigned[key].reason for key in unfit if key not in read}


def _shape(row: Any, queue_names: dict[uuid.UUID, str]) -> JobRequest:
    """A waiting job's request as far as its columns tell: its pods, GPUs and model."""
    pods = _gpu_pods(row.total_pods, row.total_gpus)
    return JobRequest(
        str(row.id),
        pods=pods,
        gpus_per_pod=row.total_gpus // pods,
        gpu_model=row.gpu_model,
        priority=row.priority,
        queue=queue_names[row.queue_id],
    )


def _gpu_pods(total_pods: int, total_gpus: int) -> int:
    """The most pods, at most the job's, that share its GPUs evenly. Its pods without GPUs (an
    MPI master, `jobspec/ranks.py`) are in `total_pods` but hold none: 4 pods of 8 GPUs and a
    master are 4 pods of 8 (they were 1 of 32, which no node holds). Never fewer pods than the
    GPU pods, so the fit is never stricter than the job's: a candidate is then read in full."""
    if not total_gpus or not total_pods or total_gpus % total_pods == 0:
        return max(total_pods, 1)
    best, divisor = 1, 1
    while divisor * divisor <= total_gpus:  # (a few hundred steps for the largest job)
        if total_gpus % divisor == 0:
            best = max([best, *(p for p in (divisor, total_gpus // divisor) if p <= total_pods)])
        divisor += 1
    return best


async def _whole_queue(
    session: AsyncSession, now: datetime
) -> tuple[list[Any], dict[uuid.UUID, str]]:
    """Every waiting job by a few columns (`heads.waiting_rows`) but those backing off after
    a withdrawal, and the queues' names by id."""
    names = dict((await session.execute(select(Queue.id, Queue.name).order_by(Queue.name))).all())
    out = await backing_off(session, now=now)
    return [c for c in await waiting_rows(session) if c.id not in out], names


async def _fields(session: AsyncSession, ids: list[uuid.UUID]) -> dict[uuid.UUID, Any]:
    """The waiting jobs' fields a request is built from, read `FIELDS_PER_READ` jobs at a
    time: each row's models (gang, split, communication) are validated as the statement's
    rows are buffered, with nothing to await, so a read of a whole window at once would hold
    the event loop for all of them."""
    fields = {}
    for part in parts(ids, FIELDS_PER_READ):
        rows = await session.execute(
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
                Job.attained_gpu_s,
            )
            .join(Queue, Queue.id == Job.queue_id)
            .where(Job.id.in_(part))
        )
        fields.update((row.id, row) for row in rows)
    return fields


def _request(
    job: Any, parents: set[str], options: RoundOptions
) -> tuple[JobRequest | None, str | None]:
    """The job as the solver's request, or why it cannot be one."""
    key = str(job.id)
    if job.queue in parents:  # a submission that raced the queue becoming a parent
        return None, (
            f"queue {job.queue!r} has child queues and jobs run only in leaf queues: "
            "cancel this job and submit it to a leaf queue"
        )
    try:
        return job_request(
            job_id=key,
            gang=job.gang,
            split=with_measurements(job.split_policy, job.measurements),
            communication=job.communication,
            priority=job.priority,
            queue=job.queue,
            may_evict_for=may_evict_for(job.preemption_policy)
            if options.preemption is not None
            else frozenset(),
            served_gpu_s=job.attained_gpu_s,
        ), None
    except ValueError as exc:
        return None, f"cannot be placed yet: {exc}"
    except Exception as exc:  # a defect: this job waits, the round goes on
        log.exception("job %s could not be modelled", key)
        return None, f"set aside: {type(exc).__name__}: {exc}"[:500]


async def _heads(
    session: AsyncSession,
    window: int,
    policy: Policy,
    now: datetime,
    sharing: Collection[str] = (),
) -> tuple[list[Any], dict[uuid.UUID, str]]:
    """Every queue's first waiting jobs (`heads.py`) but those backing off after a withdrawal
    (`withdrawals.py`), and the queues' names by id. A queue that lost heads to the back-off
    is read once more past them, so that its later jobs are not hidden behind them."""
    names = dict((await session.execute(select(Queue.id, Queue.name).order_by(Queue.name))).all())
    depth = PLANNED_CANDIDATES if policy.planned else CANDIDATES_PER_WINDOW_SLOT
    per_queue = heads_per_queue(window, depth, len(names))
    shared = {queue_id for queue_id, name in names.items() if name in sharing}
    heads = await queue_heads(session, list(names), per_queue, sharing=shared)
    out = await held_back(session, job_ids=[c.id for c in heads], now=now)
    if out:
        short = sorted({c.queue_id for c in heads if c.id in out})
        heads = [c for c in heads if c.id not in out and c.queue_id not in short]
        again = await queue_heads(session, short, per_queue, excluding=out, sharing=shared)
        out |= await held_back(session, job_ids=[c.id for c in again], now=now)
        heads += [c for c in again if c.id not in out]
    return heads, names


def with_measurements(split: SplitPolicy, measurements: dict[str, Any] | None) -> SplitPolicy:
    """What the job's processes measured replaces what it declared (services/jobs/measurements)."""
    measured = (measurements or {}).get("allreduceGbps")
    if measured is None or split.mode == "never":
        return split
    return split.model_copy(update={"crossing_gbps": float(measured)})


async def anything_pending(session: AsyncSession) -> bool:
    """Whether a job waits (a round has something to do)."""
    found = await session.execute(select(Job.id).where(WAITING).limit(1))
    return found.first() is not None


async def narrow_elastic(session: AsyncSession) -> bool:
    """Whether a running elastic job runs narrower than its document (it may grow). In GPUs:
    its shares hold its GPU pods only, not its pods without GPUs (`jobspec/ranks.py`)."""
    narrow = await session.execute(
        select(Job.id)
        .join(Placement, Placement.job_id == Job.id)
        .join(ClusterShare, ClusterShare.placement_id == Placement.id)
        .where(Job.state == JobState.RUNNING, Placement.state == PlacementState.ACTIVE, ELASTIC)
        .group_by(Job.id, Job.total_gpus)
        .having(func.sum(ClusterShare.gpus) < Job.total_gpus)
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
