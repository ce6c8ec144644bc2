"""The placement engine: a pure function from a scheduling snapshot to a decision.

`solve(snapshot, policy)` runs CP-SAT (the product) or one of the baseline policies on the
same input and returns, per job, admitted shares (units per cluster, pods per domain), link
reservations, and for every job left pending the reason in numbers.
"""

from __future__ import annotations

import time
from dataclasses import replace

from volcano_global.solver.baselines import (
    first_fit,
    greedy,
    place_greedily,
    proportional,
    reservations_for,
)
from volcano_global.solver.cpsat import cpsat_decision
from volcano_global.solver.model import (
    ClusterCapacity,
    Decision,
    JobDecision,
    JobRequest,
    Leaf,
    LinkBandwidth,
    LinkState,
    Policy,
    QueueState,
    RunningJob,
    Share,
    Snapshot,
    SolveOptions,
    link_key,
)
from volcano_global.solver.packing import Pools, pools_of
from volcano_global.solver.reasons import explain
from volcano_global.solver.reservations import Hold, HoldBook, Owed, plan_holds

__all__ = [
    "ClusterCapacity",
    "Decision",
    "JobDecision",
    "JobRequest",
    "Leaf",
    "LinkBandwidth",
    "LinkState",
    "Policy",
    "QueueState",
    "RunningJob",
    "Share",
    "Snapshot",
    "SolveOptions",
    "solve",
]


def solve(
    snapshot: Snapshot, policy: Policy = Policy.CPSAT, options: SolveOptions | None = None
) -> Decision:
    options = options or SolveOptions()
    check_snapshot(snapshot)
    window = list(snapshot.jobs[: options.window])
    start = time.monotonic()
    base = pools_of(snapshot.clusters)
    owed, holds = plan(snapshot, window, base, options) if policy.planned else ([], [])
    rank = stable_rank(snapshot)
    if policy is Policy.CPSAT:
        decision, pools = cpsat_decision(
            snapshot,
            window,
            options,
            base=base,
            deadline=start + options.time_limit_s,
            plan=(owed, holds),
            rank=rank,
        )
        decision = replace(
            decision, jobs=tuple(_with_reservations(j, window) for j in decision.jobs)
        )
    elif policy is Policy.BACKFILL:
        decision, pools = greedy(snapshot, window, base, HoldBook(holds), rank)
        decision = replace(decision, reserved=tuple((h.job_id, h.describe()) for h in holds))
    elif policy is Policy.FIRST_FIT:
        decision, pools = first_fit(snapshot, window, base)
    elif policy is Policy.PROPORTIONAL:
        decision, pools = proportional(snapshot, window, base)
    else:
        decision, pools = greedy(snapshot, window, base)
    decision = _explained(snapshot, decision, window, pools)
    outside = tuple(
        JobDecision(
            j.id, False, reason=f"outside this round's window of the first {options.window} jobs"
        )
        for j in snapshot.jobs[options.window :]
    )
    return replace(decision, jobs=decision.jobs + outside, solve_seconds=time.monotonic() - start)


def check_snapshot(snapshot: Snapshot) -> None:
    """Refuse inputs the model cannot mean anything for (a ValueError naming the job)."""
    seen: set[str] = set()
    for job in snapshot.jobs:
        if job.id in seen:
            raise ValueError(f"job {job.id}: duplicate id")
        seen.add(job.id)
        if job.pods < 1 or job.gpus_per_pod < 0 or job.unit_pods < 0:
            raise ValueError(f"job {job.id}: pods must be >= 1 and sizes >= 0")
        if job.pods % job.unit:
            raise ValueError(
                f"job {job.id}: unit of {job.unit} pods does not divide {job.pods} pods"
            )
        if job.max_clusters < 1 or job.min_share_units < 1 or job.allreduce_gbps < 0:
            raise ValueError(f"job {job.id}: max_clusters and min_share_units must be >= 1")
    for cluster in snapshot.clusters:
        for leaf in cluster.leaves:
            if leaf.free_nodes and min(leaf.free_nodes) < 0:  # (in C: every leaf, every round)
                raise ValueError(f"cluster {cluster.name}: negative node count")


def plan(
    snapshot: Snapshot, window: list[JobRequest], pools: Pools, options: SolveOptions
) -> tuple[list[Owed], list[Hold]]:
    """The jobs owed a reservation with their options, and the heuristic's holds
    (`reservations`), on the starting capacity, left unchanged."""
    links = {link.key: link.free_gbps for link in snapshot.links}

    def fits_now(job: JobRequest) -> bool:
        marks = {name: pool.mark() for name, pool in pools.items()}
        placed = place_greedily(job, pools, dict(links))
        for name, pool in pools.items():
            pool.rollback(marks[name])
        return placed is not None

    return plan_holds(snapshot, window, pools, fits_now=fits_now, limit=options.max_holds)


def stable_rank(snapshot: Snapshot) -> dict[str, int]:
    """Clusters by size (free GPUs plus what running jobs hold), smallest first: the order in
    which the planned policies fill clusters, the same every round, so that small work packs
    into the small clusters and the large ones stay whole for the gangs that need them."""
    size = {c.name: sum(leaf.free_gpus for leaf in c.leaves) for c in snapshot.clusters}
    for run in snapshot.running:
        for cluster, _, gpus in run.gpus:
            if cluster in size:
                size[cluster] += gpus
    return {name: i for i, name in enumerate(sorted(size, key=lambda n: (size[n], n)))}


def _with_reservations(decision: JobDecision, jobs: list[JobRequest]) -> JobDecision:
    if not decision.admitted or len(decision.shares) < 2:
        return decision
    job = next(j for j in jobs if j.id == decision.job_id)
    return replace(decision, reservations=reservations_for(job, list(decision.clusters)))


def _explained(
    snapshot: Snapshot,
    decision: Decision,
    jobs: list[JobRequest],
    pools: Pools,
) -> Decision:
    """Explain each pending job against what the admitted shares left (`pools` already holds
    them), and total the load per link."""
    by_id = {j.id: j for j in jobs}
    links = {link.key: link.free_gbps for link in snapshot.links}
    load = {link.key: link.reserved_gbps for link in snapshot.links}
    room = {
        q.name: max(q.quota_gpus - q.used_gpus, 0)
        for q in snapshot.queues
        if q.quota_gpus is not None
    }
    for d in decision.admitted:
        job = by_id[d.job_id]
        for r in d.reservations:
            key = link_key(r.a, r.b)
            links[key] = links.get(key, 0.0) - r.gbps
            load[key] = load.get(key, 0.0) + r.gbps
        if job.queue in room:
            room[job.queue] -= sum(s.gpus for s in d.shares)
    held = dict(decision.reserved)
    jobs_out = tuple(
        d
        if d.admitted or d.reason
        else replace(
            d,
            reason="; ".join(
                [explain(by_id[d.job_id], pools, links, room)]
                + ([held[d.job_id]] if d.job_id in held else [])
            ),
        )
        for d in decision.jobs
    )
    return replace(
        decision,
        jobs=jobs_out,
        link_load=tuple((a, b, round(g, 3)) for (a, b), g in sorted(load.items())),
    )
