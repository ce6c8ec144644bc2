"""Elastic width on the server: the running elastic jobs a round may grow or shrink
(`solver.planning.growth` / `shrinks`, the code the simulator runs), and the resize itself.

A resize is a checkpoint-restart at the new width, as Pollux and Sia do it: the job's
placement ends (`end_placement`, its shares cancelled in their clusters) and a new placement
at the new width is written in the same round commit, with the shares it keeps in the same
clusters and domains first (consecutive ranks from 0), the job's requeue count unchanged. Its
processes restart from their checkpoint at the new rendezvous with the new world size
(`VGLOBAL_WORLD_PODS`, `VGLOBAL_PARALLELISM`'s dp). Live add/withdraw of shares would need
every member cluster's Volcano Job to change its replicas in place and every framework to
re-form its process groups without a restart; a restart is what torch elastic does anyway
when its world changes, and it keeps the cross-cluster gang's all-or-nothing start.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    Job,
    JobState,
    LinkReservation,
    Placement,
    PlacementState,
    Queue,
)
from volcano_global.jobspec.lifecycle import given_estimate
from volcano_global.services.events import record_event
from volcano_global.services.jobs.measurements import issue_job_token
from volcano_global.services.lifecycle.jobs import lock_jobs, transition
from volcano_global.services.lifecycle.outbox import enqueue_assignments
from volcano_global.services.lifecycle.placements import end_placement
from volcano_global.services.scheduling.placing import write_shares
from volcano_global.solver import LinkBandwidth, Share, planning
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.requests import job_request
from volcano_global.solver.round_plan import Grow

# A job whose width is a range (its split policy, stored by alias from a validated SplitPolicy
# by jobs/submission.py, has minUnits > 0): JSON_EXTRACT on SQLite, ->> on Postgres.
ELASTIC = Job.split_policy["minUnits"].as_integer() > 0


@dataclass(frozen=True)
class ElasticPlacement:
    """A running elastic job's current placement, as read for the round."""

    job_id: uuid.UUID
    placement_id: uuid.UUID
    run: planning.ElasticRun


async def elastic_running(
    session: AsyncSession,
    *,
    clusters: dict[uuid.UUID, str],
    now: datetime,
    durations: DurationModel,
) -> list[ElasticPlacement]:
    """Running jobs whose width is a range, with the units they run in each ready cluster.
    Found by their split policy's `minUnits` in the database; a statement per table."""
    running = await session.execute(
        select(Job.id, Placement.id)
        .join(Placement, Placement.job_id == Job.id)
        .where(
            Job.state == JobState.RUNNING,
            Placement.state == PlacementState.ACTIVE,
            ELASTIC,
        )
    )
    placements = {job: pid for job, pid in running}
    if not placements:
        return []
    rows = await session.execute(
        select(
            Job.id,
            Queue.name,
            Job.priority,
            Job.gang,
            Job.split_policy,
            Job.communication,
            Job.started_at,
            Job.placed_at,
            Job.running_estimate_seconds,
            Job.gpu_model,
            Job.preemptable,
        )
        .join(Queue, Queue.id == Job.queue_id)
        .where(Job.id.in_(list(placements)))
    )
    ids = list(placements.values())
    shares = await _shares(session, ids, clusters)
    links = await _links(session, ids)
    out = []
    for row in rows:
        pid = placements[row[0]]
        run = _run(row, shares.get(pid, []), links.get(pid, []), clusters, now, durations)
        if run is not None:
            out.append(ElasticPlacement(row[0], pid, run))
    return sorted(out, key=lambda e: str(e.job_id))


async def _shares(
    session: AsyncSession, placement_ids: list[uuid.UUID], clusters: dict[uuid.UUID, str]
) -> dict[uuid.UUID, list[ClusterShare]]:
    """Each placement's shares in the ready clusters, in rank order."""
    shares: dict[uuid.UUID, list[ClusterShare]] = defaultdict(list)
    rows = await session.execute(
        select(ClusterShare)
        .where(ClusterShare.placement_id.in_(placement_ids))
        .order_by(ClusterShare.rank_offset)
    )
    for share in rows.scalars():
        if share.cluster_id in clusters:
            shares[share.placement_id].append(share)
    return shares


async def _links(
    session: AsyncSession, placement_ids: list[uuid.UUID]
) -> dict[uuid.UUID, list[LinkBandwidth]]:
    """The link bandwidth each placement reserved."""
    links: dict[uuid.UUID, list[LinkBandwidth]] = defaultdict(list)
    # A copy's bandwidth is not the job's to carry over a resize: it ends with the copy.
    rows = await session.execute(
        select(LinkReservation).where(
            LinkReservation.placement_id.in_(placement_ids),
            LinkReservation.staging_share_id.is_(None),
        )
    )
    for r in rows.unique().scalars():
        links[r.placement_id].append(
            LinkBandwidth(r.link.cluster_a.name, r.link.cluster_b.name, r.gbps)
        )
    return links


def _run(
    row: Any,
    kept: list[ClusterShare],
    links: list[LinkBandwidth],
    clusters: dict[uuid.UUID, str],
    now: datetime,
    durations: DurationModel,
) -> planning.ElasticRun | None:
    """The running elastic job as the round sees it (None: a later parser refuses it)."""
    job_id, queue, priority, gang, split, communication, started, placed = row[:8]
    estimate, model, preemptable = row[8:]
    try:
        request = job_request(
            job_id=str(job_id),
            gang=gang,
            split=split,
            communication=communication,
            priority=priority,
            queue=queue,
        )
    except ValueError:
        return None  # (it was placed, so it was modelled)
    if request.parts:
        return None  # placed child by child, whole: never resized
    elapsed = max((now - (started or now)).total_seconds(), 0.0)
    return planning.ElasticRun(
        request,
        tuple((clusters[s.cluster_id], s.units) for s in kept),
        estimate_s=durations.remaining(
            request.gpus, elapsed, given_estimate(estimate), queue=queue
        ),
        # Its last placement: its start, or its last resize.
        since_s=max((now - (placed or started or now)).total_seconds(), 0.0),
        preemptable=preemptable,
        domains=tuple(
            (clusters[s.cluster_id], tuple((k, int(v)) for k, v in (s.domains or {}).items()))
            for s in kept
        ),
        links=tuple(links),
        gpu_model=model or "",
    )


async def resize(
    session: AsyncSession,
    *,
    job: Job,
    placement: Placement,
    shares: list[Share],
    cluster_ids: dict[str, uuid.UUID],
    generation: int,
    why: str,
    links: list[tuple[uuid.UUID, float]] | None = None,
) -> Placement:
    """End the job's placement and place it again at `shares` (checkpoint-restart at the new
    width). `links`: the link bandwidth of its new set of clusters (link id, Gbps); None: the
    same clusters, what it reserved stays."""
    before = sum(s.units for s in placement.shares)
    after = sum(s.units for s in shares)
    await end_placement(
        session,
        placement=placement,
        state=PlacementState.RELEASED,
        cancel_reason=f"resized {before} -> {after} replicas",
    )
    new = Placement(id=uuid.uuid4(), job_id=job.id, generation=generation)
    session.add(new)
    await session.flush()
    rows = write_shares(session, job=job, shares=shares, placement=new, cluster_ids=cluster_ids)
    if links is None:
        links = [
            (held.link_id, held.gbps)
            for held in placement.link_reservations
            if held.staging_share_id is None  # a copy's ends with it, not carried over
        ]
    for link_id, gbps in links:
        session.add(LinkReservation(placement_id=new.id, link_id=link_id, gbps=gbps))
    token = issue_job_token(session, job=job)
    # The queue's document rides along as at the first placement: growth may reach a cluster
    # whose Volcano Queue the agent has not made yet.
    queue = await session.get(Queue, job.queue_id)  # (the job was locked without it)
    enqueue_assignments(session, job=job, placement=new, shares=rows, job_token=token, queue=queue)
    transition(job, JobState.PENDING, message=f"resizing: {why}")
    transition(job, JobState.PLACED, message=f"resized in round {generation}")
    await record_event(
        session,
        job_id=job.id,
        fold=False,
        reason="Resized",
        message=f"Resized {before} -> {after} replicas ({why}); restarts from its checkpoint: "
        + "; ".join(f"{s.pods} pods in {s.cluster}" for s in shares)
        + "".join(f"; {gbps:g} Gbps on link {link_id}" for link_id, gbps in links if links),
    )
    return new


def grown(
    current: list[ClusterShare], names: dict[uuid.UUID, str], added: list[Share]
) -> list[Share]:
    """The current shares plus what a growth decision added (same clusters; domains summed;
    a share keeps its GPU model: the one its pods run on, chosen when it was first placed)."""
    extra = {s.cluster: s for s in added}
    out = []
    for share in current:
        name = names[share.cluster_id]
        more = extra.get(name)
        domains: dict[str, int] = defaultdict(
            int, {k: int(v) for k, v in (share.domains or {}).items()}
        )
        pods, gpus, units = share.pods, share.gpus, share.units
        if more is not None:
            for leaf, count in more.domains:
                domains[leaf] += count
            pods, gpus, units = pods + more.pods, gpus + more.gpus, units + more.units
        out.append(Share(name, units, pods, gpus, tuple(domains.items()), share.gpu_model))
    have = {s.cluster for s in out}
    return out + [s for s in added if s.cluster not in have]  # new clusters: the last ranks


def shrunk(
    current: list[ClusterShare], names: dict[uuid.UUID, str], cuts: dict[str, int]
) -> list[Share]:
    """The current shares less `cuts` (cluster -> units given back), the pods taken from the
    share's last domains (`planning.taken_back`, as the round freed them), each keeping its
    GPU model."""
    out = []
    for share in current:
        name = names[share.cluster_id]
        units = share.units - cuts.get(name, 0)
        per_unit = share.pods // share.units if share.units else share.pods
        per_pod = share.gpus // share.pods if share.pods else 0
        domains = {k: int(v) for k, v in (share.domains or {}).items()}
        for leaf, count in planning.taken_back(
            list(domains.items()), share.pods - units * per_unit
        ):
            domains[leaf] -= count
        pods = units * per_unit
        kept = tuple((leaf, count) for leaf, count in domains.items() if count)
        out.append(Share(name, units, pods, pods * per_pod, kept, share.gpu_model))
    return out


def resizing(
    shrinks: Sequence[planning.Shrink], grows: Sequence[Grow], elastic: dict[str, ElasticPlacement]
) -> list[ElasticPlacement]:
    """The running elastic jobs a round's commit may resize: those its shrinks take units from
    and those it grows."""
    keys = {cut.job_id for cut in shrinks} | {g.job_id for g in grows}
    return [elastic[key] for key in sorted(keys) if key in elastic]


async def lock_resizing(
    session: AsyncSession, seen: list[ElasticPlacement]
) -> tuple[dict[uuid.UUID, Placement], dict[uuid.UUID, Job]]:
    """Lock the placements of the jobs to resize, then the jobs, each in id order in one
    statement: the order the agents' reports lock them in (`dispatch/reports.apply_reports`).
    A resize ends the placement (an UPDATE, which locks its row) of a job it has locked; taken
    the other way round, a round and a report each holding the row the other waits for
    deadlock on Postgres. Rows the transaction locked already are returned without waiting."""
    if not seen:
        return {}, {}
    placements = {
        p.id: p
        for p in (
            await session.execute(
                select(Placement)
                .where(Placement.id.in_([s.placement_id for s in seen]))
                .order_by(Placement.id)
                .with_for_update(of=Placement)
                .execution_options(populate_existing=True)
            )
        ).scalars()
    }
    return placements, await lock_jobs(session, [s.job_id for s in seen])


async def cluster_names(session: AsyncSession) -> dict[uuid.UUID, str]:
    return dict((await session.execute(select(Cluster.id, Cluster.name))).all())


async def commit_resizes(
    session: AsyncSession,
    *,
    grows: Sequence[Grow] = (),
    shrinks: Sequence[planning.Shrink] = (),
    elastic: dict[str, ElasticPlacement],
    cluster_ids: dict[str, uuid.UUID],
    link_ids: dict[tuple[str, str], uuid.UUID],
    generation: int,
) -> list[str]:
    """The round's resizes (job ids): the plan's growth and the units given back (`shrinks`).
    A job that stopped running, or whose placement changed, since the round read it is left
    as it is."""
    added = {g.job_id: g for g in grows}
    cuts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for cut in shrinks:
        cuts[cut.job_id][cut.cluster] += cut.units
    names = {v: k for k, v in cluster_ids.items()}
    keys = sorted(k for k in set(added) | set(cuts) if k in elastic)
    placements, jobs = await lock_resizing(session, [elastic[k] for k in keys])
    resized = []
    for key in keys:
        seen = elastic[key]
        job, placement = jobs.get(seen.job_id), placements.get(seen.placement_id)
        if (
            job is None
            or job.state is not JobState.RUNNING
            or placement is None
            or placement.state is not PlacementState.ACTIVE
            or any(s.cluster_id not in names for s in placement.shares)
        ):
            continue
        if key in cuts:
            shares = shrunk(list(placement.shares), names, cuts[key])
            why, reserved = "gives back replicas to a waiting job that outranks it", None
        else:
            shares = grown(list(placement.shares), names, list(added[key].decision.shares))
            why, reserved = "room freed", _new_links(placement, shares, names, added[key], link_ids)
        await resize(
            session,
            job=job,
            placement=placement,
            shares=shares,
            cluster_ids=cluster_ids,
            generation=generation,
            why=why,
            links=reserved,
        )
        resized.append(key)
    return resized


def _new_links(
    placement: Placement,
    shares: list[Share],
    names: dict[uuid.UUID, str],
    grow: Grow,
    link_ids: dict[tuple[str, str], uuid.UUID],
) -> list[tuple[uuid.UUID, float]] | None:
    """The link bandwidth (link id, Gbps) of a grown job whose set of clusters changed;
    None: the same clusters, what it reserved stays."""
    if {s.cluster for s in shares} == {names[s.cluster_id] for s in placement.shares}:
        return None
    return [
        (link_ids[(b.a, b.b)] if (b.a, b.b) in link_ids else link_ids[(b.b, b.a)], b.gbps)
        for b in grow.links
    ]
