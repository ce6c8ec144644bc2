"""What a round knows about time, read from the database for the planned policies
(`solver.planning`): how long jobs of each size ran (the newest finished jobs), and the jobs
that hold capacity now - running, or placed and not yet running - with when they started and
what an eviction would lose (since their newest checkpoint, when they report them)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    Job,
    JobCheckpointLocation,
    JobState,
    LinkReservation,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.jobspec.lifecycle import given_estimate
from volcano_global.services.scheduling.books import share_model
from volcano_global.services.tenancy.queues import HOLDING_STATES
from volcano_global.solver import ClusterCapacity, LinkBandwidth, RunningJob, planning
from volcano_global.solver.durations import KEPT, DurationModel

FINISHED_READ = KEPT  # newest finished jobs the durations are learnt from


async def duration_model(session: AsyncSession) -> DurationModel:
    """What the newest finished jobs ran, per size, and how they met their queue's estimates."""
    rows = await session.execute(
        select(
            Job.total_gpus,
            Job.started_at,
            Job.finished_at,
            Job.running_estimate_seconds,
            Queue.name,
        )
        .join(Queue, Queue.id == Job.queue_id)
        .where(
            Job.state == JobState.SUCCEEDED,
            Job.started_at.is_not(None),
            Job.finished_at.is_not(None),
        )
        .order_by(Job.finished_at.desc())
        .limit(FINISHED_READ)
    )
    model = DurationModel()
    for gpus, started, finished, estimate, queue in reversed(rows.all()):  # oldest first
        seconds = (finished - started).total_seconds()
        model.observe(gpus, seconds, estimate=given_estimate(estimate), queue=queue)
    return model


async def running_jobs(
    session: AsyncSession,
    clusters: list[Cluster],
    states: list[ClusterCapacity],
    *,
    now: datetime,
    durations: DurationModel,
    staging_gbps: float | None = None,
) -> list[RunningJob]:
    """The jobs holding capacity, as the round plans with them; `staging_gbps`: the rate a
    restore of a job's checkpoint in another cluster would copy at (its cost in an eviction)."""
    holdings = await _holdings(session, clusters, states, now=now)
    links = await _held_links(session, holdings) if holdings else {}
    restore = await _restore_s(session, [h.job for h in holdings.values()], staging_gbps)
    return [
        planning.running(
            str(h.job),
            gpus=tuple((c, m, g) for (c, m), g in sorted(h.gpus.items())),
            links=tuple(links.get(p, ())),
            started_at=h.began,
            estimate_s=h.estimate_s,
            now=now,
            durations=durations,
            lost_s=h.lost_s,
            priority=h.priority,
            queue=h.queue,
            preemptable=h.preemptable,
            name=h.name,
            pods=tuple(h.pods),
            restore_s=restore.get(h.job, 0.0),
            attained_gpu_s=h.served_gpu_s
            + sum(h.gpus.values()) * max((now - h.began).total_seconds(), 0.0),
        )
        for p, h in holdings.items()
    ]


@dataclass
class _Holding:
    """One active placement, added up over its shares' rows: its job's facts, and the GPUs
    (by cluster and model) and pods (by domain) it holds."""

    job: uuid.UUID
    began: datetime
    estimate_s: float | None
    lost_s: float | None
    priority: int
    queue: str
    preemptable: bool
    name: str
    served_gpu_s: float  # GPU-seconds its ended runs received
    gpus: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    pods: list[tuple[str, str, str, int, int]] = field(default_factory=list)


async def _holdings(
    session: AsyncSession, clusters: list[Cluster], states: list[ClusterCapacity], *, now: datetime
) -> dict[uuid.UUID, _Holding]:
    """The active placements of the jobs holding capacity, by placement id."""
    names = {c.id: c.name for c in clusters}
    models = {s.name: _main_model(s) for s in states}
    rows = await session.execute(
        select(
            Placement.id,
            Job.id,
            share_model(),
            Job.started_at,
            Job.placed_at,
            Job.running_estimate_seconds,
            ClusterShare.cluster_id,
            ClusterShare.gpus,
            ClusterShare.pods,
            ClusterShare.domains,
            Job.priority,
            Queue.name,
            Job.namespace,
            Job.name,
            Job.preemptable,
            Job.checkpointed_at,
            Job.attained_gpu_s,
        )
        .join(Job, Job.id == Placement.job_id)
        .join(Queue, Queue.id == Job.queue_id)
        .join(ClusterShare, ClusterShare.placement_id == Placement.id)
        .where(Placement.state == PlacementState.ACTIVE, Job.state.in_(HOLDING_STATES))
    )
    holdings: dict[uuid.UUID, _Holding] = {}
    for row in rows:
        placement, job, model, started, placed, estimate, cluster_id, gpus = row[:8]
        pods, domains, priority, queue, namespace, name, preemptable, saved, before = row[8:]
        cluster = names.get(cluster_id)
        if cluster is None or gpus == 0:
            continue  # a cluster not ready holds nothing the round could plan with
        began = started or placed or now
        held = holdings.setdefault(
            placement,
            _Holding(
                job=job,
                began=began,
                estimate_s=given_estimate(estimate),
                lost_s=_lost_s(began, saved, now),
                priority=priority,
                queue=queue,
                preemptable=preemptable,
                name=f"{namespace}/{name}",
                served_gpu_s=before or 0.0,
            ),
        )
        held.gpus[(cluster, model or models.get(cluster, ""))] += gpus
        per_pod = gpus // pods if pods else 0
        held.pods += [(cluster, leaf, model or "", n, per_pod) for leaf, n in domains.items()]
    return holdings


async def _held_links(
    session: AsyncSession, holdings: dict[uuid.UUID, _Holding]
) -> dict[uuid.UUID, list[LinkBandwidth]]:
    """The link bandwidth each active placement holds."""
    # Joined rather than listed: an IN list of every active placement outgrows the driver's
    # parameter limit on a large fleet.
    held = await session.execute(
        select(LinkReservation)
        .join(Placement, Placement.id == LinkReservation.placement_id)
        .join(Job, Job.id == Placement.job_id)
        .where(Placement.state == PlacementState.ACTIVE, Job.state.in_(HOLDING_STATES))
    )
    links: dict[uuid.UUID, list[LinkBandwidth]] = defaultdict(list)
    for r in held.unique().scalars():
        if r.placement_id in holdings:
            links[r.placement_id].append(
                LinkBandwidth(r.link.cluster_a.name, r.link.cluster_b.name, r.gbps)
            )
    return links


async def _restore_s(
    session: AsyncSession, job_ids: list[uuid.UUID], staging_gbps: float | None
) -> dict[uuid.UUID, float]:
    """Seconds each job's newest reported checkpoint takes to copy at `staging_gbps`."""
    if not staging_gbps or not job_ids:
        return {}
    rows = await session.execute(
        select(JobCheckpointLocation.job_id, JobCheckpointLocation.size_bytes).where(
            JobCheckpointLocation.job_id.in_(job_ids),
            JobCheckpointLocation.size_bytes.is_not(None),
        )
    )
    return {job: size * 8 / (staging_gbps * 1e9) for job, size in rows.all()}


def _lost_s(began: datetime, saved: datetime | None, now: datetime) -> float | None:
    """The work an eviction loses: since the newest checkpoint the job reported in this run,
    or (None) since it began."""
    if saved is None or saved < began:
        return None  # no checkpoint, or one reported while the job waited to run again
    return max((now - saved).total_seconds(), 0.0)


def _main_model(state: ClusterCapacity) -> str:
    """The GPU model of most of the cluster's nodes (for a share of a job that named none)."""
    count: dict[str, int] = defaultdict(int)
    for leaf in state.leaves:
        count[leaf.gpu_model] += sum(leaf.free_nodes)
    return max(count, key=lambda m: (count[m], m), default="")
