"""The policies the product ships besides CP-SAT, judged by the same packing rules:

- first-fit: the whole job in the first cluster (by name) where it fits; never split. What
  Kueue MultiKueue does.
- proportional: every job's units spread over the clusters in proportion to their free GPUs of
  its model, with no gang across clusters, no split policy and no bandwidth model (Karmada's
  dynamic weight). Its link reservations are what the traffic model says the split would need,
  reported even when a link cannot carry them: that is how often it would oversubscribe.
- greedy: in queue order, the whole job in the tightest cluster that fits, else a split over
  the clusters with most room, up to the job's limit, accepted only if every pair is linked
  with enough free bandwidth.
- backfill: greedy with CP-SAT's plan (`solver.planning`, `solver.reservations`): the planned
  order, the round's reservations (a job placed only within what they allow) and the stable
  cluster order. It warm-starts CP-SAT.

Each policy places into the pools it is given (and returns them); the caller rolls them back
if it wants the starting capacity again.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from volcano_global.solver.capacity import ClusterPool, job_models
from volcano_global.solver.model import (
    Decision,
    JobDecision,
    JobRequest,
    LinkBandwidth,
    Policy,
    Snapshot,
    link_key,
)
from volcano_global.solver.packing import Pools, pack_job
from volcano_global.solver.reservations import HoldBook
from volcano_global.solver.splitting import may_split, split_units
from volcano_global.solver.traffic import pair_demand_gbps


def first_fit(snapshot: Snapshot, jobs: list[JobRequest], base: Pools) -> tuple[Decision, Pools]:
    start = time.monotonic()
    pools = base
    room = _quota_room(snapshot)
    decided = []
    for job in jobs:
        decision = JobDecision(job.id, False)
        if room.get(job.queue, job.gpus) >= job.gpus:
            for name in sorted(eligible_clusters(job, pools)):
                shares, failed = pack_job(job, {name: job.units}, pools)
                if failed is None:
                    decision = JobDecision(job.id, True, shares=shares)
                    _charge(room, job)
                    break
        decided.append(decision)
    return _decision(Policy.FIRST_FIT, decided, start), pools


def proportional(snapshot: Snapshot, jobs: list[JobRequest], base: Pools) -> tuple[Decision, Pools]:
    start = time.monotonic()
    pools = base
    room = _quota_room(snapshot)
    decided = []
    for job in jobs:
        decision = JobDecision(job.id, False)
        free = {
            name: max(pools[name].free_gpus(m) for m in job_models(job, pools[name]))
            for name in eligible_clusters(job, pools)
        }
        total = sum(free.values())
        if total >= job.gpus and room.get(job.queue, job.gpus) >= job.gpus:
            units = _proportional_units(job.units, free)
            shares, failed = pack_job(job, units, pools)
            if failed is None:
                clusters = [s.cluster for s in shares]
                decision = JobDecision(
                    job.id, True, shares=shares, reservations=reservations_for(job, clusters)
                )
                _charge(room, job)
        decided.append(decision)
    return _decision(Policy.PROPORTIONAL, decided, start), pools


def greedy(
    snapshot: Snapshot,
    jobs: list[JobRequest],
    base: Pools,
    book: HoldBook | None = None,
    rank: dict[str, int] | None = None,
) -> tuple[Decision, Pools]:
    """The greedy splitter; with a `book` of holds and a stable cluster `rank`, the planned
    heuristic (BACKFILL, and CP-SAT's warm start)."""
    start = time.monotonic()
    pools = base
    room = _quota_room(snapshot)
    links = {link.key: link.free_gbps for link in snapshot.links}
    decided = []
    for job in jobs:
        decision = JobDecision(job.id, False)
        fits = _within_quota(job, room)
        if fits is not None:
            decision = place_greedily(fits, pools, links, book, rank) or decision
            if decision.admitted:
                if job.queue in room:
                    room[job.queue] -= sum(s.gpus for s in decision.shares)
                for r in decision.reservations:
                    links[link_key(r.a, r.b)] -= r.gbps
        decided.append(decision)
    policy = Policy.GREEDY if book is None else Policy.BACKFILL
    return _decision(policy, decided, start), pools


def place_greedily(
    job: JobRequest,
    pools: dict[str, ClusterPool],
    links: dict[tuple[str, str], float],
    book: HoldBook | None = None,
    rank: dict[str, int] | None = None,
) -> JobDecision | None:
    """The whole job in the tightest cluster that holds it (by `rank` first when given), else a
    split over the clusters with most room whose every pair is linked with enough free
    bandwidth; None if neither fits. With a `book`, within what the holds allow, and charged."""
    if book is not None:
        links = dict(links)
        for key in book.link_keys & links.keys():  # only links a hold reserved bandwidth on
            room = book.link_room(job, key)
            if room is not None:
                links[key] = min(links[key], room)
    placed, capacity = _whole(job, pools, book, rank)
    if placed is None and job.cluster_limit >= 2:
        placed = _split_greedily(job, pools, links, capacity)
    if placed is None and job.elastic:
        return _narrower(job, pools, links, book, rank, capacity)
    if placed is not None and book is not None:
        book.charge(
            job,
            {(s.cluster, job_models(job, pools[s.cluster])[0]): s.gpus for s in placed.shares},
            {link_key(r.a, r.b): r.gbps for r in placed.reservations},
        )
    return placed


def placed_reading_links(
    job: JobRequest, pools: dict[str, ClusterPool], links: dict[tuple[str, str], float]
) -> tuple[JobDecision | None, bool]:
    """`place_greedily(job, pools, links)` (no holds, no rank), and whether the answer read
    the links or the job's `allreduce_gbps`: only when a split was weighed that the units the
    clusters could take do not already rule out (`splitting.may_split`), or an elastic job
    was narrowed. Otherwise the answer is the same for any job of its `placement_key`."""
    placed, capacity = _whole(job, pools, None, None)
    if placed is not None:
        return placed, False
    reads = job.elastic or (job.cluster_limit >= 2 and may_split(job, capacity))
    if reads and job.cluster_limit >= 2:
        placed = _split_greedily(job, pools, links, capacity)
    if placed is None and job.elastic:
        placed = _narrower(job, pools, links, None, None, capacity)
    return placed, reads


def placement_key(job: JobRequest) -> tuple[object, ...]:
    """What `placed_reading_links` reads of a job when it reads no link: its shape and where
    it may run (not its id, priority, queue or `allreduce_gbps`)."""
    return (
        job.pods,
        job.gpus_per_pod,
        job.gpu_model,
        job.unit_pods,
        job.splittable,
        job.max_clusters,
        job.min_share_units,
        job.unit_tier,
        job.share_tier,
        job.allowed_clusters,
        job.min_units,
    )


def _whole(
    job: JobRequest,
    pools: dict[str, ClusterPool],
    book: HoldBook | None,
    rank: dict[str, int] | None,
) -> tuple[JobDecision | None, dict[str, int]]:
    """`place_greedily`'s first step: the whole job in the tightest cluster that holds it;
    with the units each cluster could take (every eligible one's when none holds it)."""
    eligible = eligible_clusters(job, pools)
    order = rank or {}
    # Units per cluster are worked out lazily: most rounds place a job whole in one of the
    # first clusters that have its GPUs free, and a large fleet's other clusters are never
    # asked (free GPUs bound the units from above, so the order and the answer are the same).
    known: dict[str, int] = {}

    def units(name: str) -> int:
        if name not in known:
            known[name] = _capacity(job, pools[name], book)
        return known[name]

    free = {c: _free(job, pools[c]) for c in eligible}
    for name in sorted(eligible, key=lambda c: (order.get(c, 0), free[c], c)):
        if free[name] < job.gpus or units(name) < job.units:
            continue
        shares, failed = pack_job(job, {name: job.units}, pools)
        if failed is None:
            return JobDecision(job.id, True, shares=shares), known
    return None, {name: units(name) for name in eligible}


def holds_whole(job: JobRequest, pools: dict[str, ClusterPool], name: str) -> bool:
    """Whether `place_greedily`'s first step places the job whole in this (eligible) cluster
    when it gets to it; if so `place_greedily` places it somewhere, since a cluster tried
    before that does not hold it leaves the pools as they were. The pools are left as they
    are."""
    pool = pools[name]
    if _free(job, pool) < job.gpus or _max_units(job, pool) < job.units:
        return False
    mark = pool.mark()
    _, failed = pack_job(job, {name: job.units}, pools)
    pool.rollback(mark)
    return failed is None


ELASTIC_TRIES = 4  # narrower widths an elastic job is tried at, widest first


def _within_quota(job: JobRequest, room: dict[str, int]) -> JobRequest | None:
    """The job as its queue's quota lets it run: whole, or an elastic job no wider than the
    room left (at least its fewest units); None if not even that fits."""
    left = room.get(job.queue)
    if left is None or left >= job.gpus:
        return job
    if not job.elastic or left < job.fewest_units * job.unit_gpus:
        return None
    units = left // job.unit_gpus
    return replace(job, pods=units * job.unit, min_units=min(job.min_units, units))


def _narrower(  # type: ignore[no-untyped-def]
    job: JobRequest, pools, links, book, rank, capacity: dict[str, int]
) -> JobDecision | None:
    """An elastic job at the widest width that fits, down to its fewest units."""
    if job.cluster_limit >= 2:
        room = sum(sorted(capacity.values(), reverse=True)[: job.cluster_limit])
    else:
        room = max(capacity.values(), default=0)
    widest = min(room, job.units - 1)
    for units in range(widest, max(job.min_units, widest - ELASTIC_TRIES + 1) - 1, -1):
        narrow = replace(job, pods=units * job.unit, min_units=0)
        placed = place_greedily(narrow, pools, links, book, rank)
        if placed is not None:
            return placed
    return None


def _split_greedily(
    job: JobRequest,
    pools: dict[str, ClusterPool],
    links: dict[tuple[str, str], float],
    capacity: dict[str, int],
) -> JobDecision | None:
    units = split_units(job, capacity, links)
    if units is None:
        return None
    shares, failed = pack_job(job, units, pools)
    if failed is not None:
        return None
    return JobDecision(job.id, True, shares=shares, reservations=reservations_for(job, list(units)))


def reservations_for(job: JobRequest, clusters: list[str]) -> tuple[LinkBandwidth, ...]:
    """What a split over these clusters reserves on each pair's link (traffic model)."""
    demand = pair_demand_gbps(job.allreduce_gbps, len(clusters))
    if demand <= 0:
        return ()
    names = sorted(clusters)
    return tuple(
        LinkBandwidth(a, b, math.ceil(demand * 1000) / 1000)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    )


def _proportional_units(units: int, free: dict[str, int]) -> dict[str, int]:
    total = sum(free.values())
    exact = {c: units * f / total for c, f in free.items()}
    result = {c: int(v) for c, v in exact.items()}
    for c in sorted(exact, key=lambda c: (-(exact[c] - result[c]), c))[
        : units - sum(result.values())
    ]:
        result[c] += 1
    return {c: u for c, u in result.items() if u}


def eligible_clusters(job: JobRequest, pools: dict[str, ClusterPool]) -> list[str]:
    return [
        name
        for name, pool in pools.items()
        if (job.allowed_clusters is None or name in job.allowed_clusters) and job_models(job, pool)
    ]


def _capacity(job: JobRequest, pool: ClusterPool, book: HoldBook | None) -> int:
    """Units of the job the cluster could take now, within what the holds allow."""
    found = _max_units(job, pool)
    if book is not None:
        left = book.room(job, pool.name, job_models(job, pool)[0])
        if left is not None:
            found = min(found, max(left, 0) // max(job.unit_gpus, 1))
    return found


def _max_units(job: JobRequest, pool: ClusterPool) -> int:
    return min(max(pool.max_units(job, m) for m in job_models(job, pool)), job.units)


def _free(job: JobRequest, pool: ClusterPool) -> int:
    return max(pool.free_gpus(m) for m in job_models(job, pool))


def _quota_room(snapshot: Snapshot) -> dict[str, int]:
    return {
        q.name: max(q.quota_gpus - q.used_gpus, 0)
        for q in snapshot.queues
        if q.quota_gpus is not None
    }


def _charge(room: dict[str, int], job: JobRequest) -> None:
    if job.queue in room:
        room[job.queue] -= job.gpus


def _decision(policy: Policy, decided: list[JobDecision], start: float) -> Decision:
    return Decision(
        policy=policy,
        status="HEURISTIC",
        jobs=tuple(decided),
        solve_seconds=time.monotonic() - start,
    )
