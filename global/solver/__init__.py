"""The placement engine: a pure function from a scheduling snapshot to a decision.

`solve(snapshot, policy)` runs CP-SAT (the product) or one of the baseline policies on the
same input and returns, per job, admitted shares (units per cluster, pods per domain), link
reservations, and for every job left pending the reason in numbers.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace

from volcano_global.bounds import GPUS_PER_POD
from volcano_global.solver.baselines import (
    first_fit,
    greedy,
    place_greedily,
    proportional,
    reservations_for,
)
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

log = logging.getLogger(__name__)
MAX_PODS = 1_000_000  # pods of one job the model takes (the API's limit is lower)
ISOLATION_LIMIT_S = 0.2  # time limit of each one-job round that looks for a failing job

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
    "failed",
    "solve",
    "solve_with_pools",
]


def solve(
    snapshot: Snapshot, policy: Policy = Policy.CPSAT, options: SolveOptions | None = None
) -> Decision:
    """Every job gets an answer, whatever one job holds: a job the model cannot mean
    anything for is set aside with the reason (`screen`), and should the round still fail -
    a defect, logged - the jobs it fails on are found by solving each alone and set aside,
    and the round runs again without them."""
    return solve_with_pools(snapshot, policy, options)[0]


def solve_with_pools(
    snapshot: Snapshot, policy: Policy = Policy.CPSAT, options: SolveOptions | None = None
) -> tuple[Decision, Pools | None]:
    """`solve`, and the clusters' pools its admitted jobs were packed into (None: the round
    failed). A round that goes on placing (`whole_queue.backfilled`) may take them instead of
    building the clusters' pools again, where they hold what replaying the decision would."""
    options = options or SolveOptions()
    check_clusters(snapshot)
    jobs, set_aside = screen(snapshot.jobs)
    snapshot = replace(snapshot, jobs=jobs)
    try:
        decision, pools = _solve(snapshot, policy, options)
    except Exception as exc:
        log.exception("a %s round failed; looking for the jobs it fails on", policy.value)
        decision, more, pools = _without_culprits(snapshot, policy, options, exc)
        set_aside += more
    return replace(decision, jobs=decision.jobs + set_aside), pools


def _without_culprits(
    snapshot: Snapshot, policy: Policy, options: SolveOptions, error: Exception
) -> tuple[Decision, tuple[JobDecision, ...], Pools | None]:
    alone = replace(options, time_limit_s=min(options.time_limit_s, ISOLATION_LIMIT_S))
    culprits: list[JobDecision] = []
    for job in snapshot.jobs[: options.window]:
        try:
            _solve(replace(snapshot, jobs=(job,)), policy, alone)
        except Exception as exc:
            culprits.append(JobDecision(job.id, False, reason=f"set aside: {_why(exc)}"))
    aside = {c.job_id for c in culprits}
    rest = replace(snapshot, jobs=tuple(j for j in snapshot.jobs if j.id not in aside))
    try:
        decision, pools = _solve(rest, policy, options)
    except Exception as exc:
        log.exception("the %s round failed again without %d jobs", policy.value, len(aside))
        reason = f"the scheduling round failed ({_why(exc)}; first: {_why(error)})"
        return failed(policy, rest.jobs, reason), tuple(culprits), None
    return decision, tuple(culprits), pools


def failed(policy: Policy, jobs: tuple[JobRequest, ...], reason: str) -> Decision:
    """A round that could not be solved: every job waits, with `reason`."""
    return Decision(policy, "ERROR", tuple(JobDecision(j.id, False, reason=reason) for j in jobs))


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def _solve(snapshot: Snapshot, policy: Policy, options: SolveOptions) -> tuple[Decision, Pools]:
    if policy is Policy.CPSAT:
        # ortools is imported when a CP-SAT round first runs: a CLI call or an agent that
        # only reads the solver's types does not pay its second of import time. Imported
        # before the round's clock starts, or a server's first round spends its limit on it.
        from volcano_global.solver.cpsat import cpsat_decision
    window = list(snapshot.jobs[: options.window])
    start = time.monotonic()
    base = pools_of(snapshot.clusters)
    rank = stable_rank(snapshot, base)
    owed, holds = plan(snapshot, window, base, options) if policy.planned else ([], [])
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
        decision = replace(
            decision,
            reserved=tuple((h.job_id, h.describe()) for h in holds),
            reserved_in_s=tuple((h.job_id, h.start_in_s) for h in holds),
            holds=tuple(holds),
        )
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
    decision = replace(
        decision, jobs=decision.jobs + outside, solve_seconds=time.monotonic() - start
    )
    return decision, pools


def screen(jobs: tuple[JobRequest, ...]) -> tuple[tuple[JobRequest, ...], tuple[JobDecision, ...]]:
    """The jobs the model can mean something for, and the others set aside with the reason
    (sizes the API's bounds keep out; a job stored before them, or a caller of this package
    that skipped them, is refused here rather than failing the round)."""
    seen: set[str] = set()
    kept: list[JobRequest] = []
    refused: list[JobDecision] = []
    for job in jobs:
        why = None if job.id not in seen else "duplicate id"
        why = why or _unmodellable(job)
        seen.add(job.id)
        if why:
            refused.append(JobDecision(job.id, False, reason=f"set aside: {why}"))
        else:
            kept.append(job)
    return tuple(kept), tuple(refused)


def _unmodellable(job: JobRequest) -> str | None:
    if not 1 <= job.pods <= MAX_PODS or job.unit_pods < 0:
        return f"pods must be in [1, {MAX_PODS}] and the unit >= 0"
    if not 0 <= job.gpus_per_pod <= GPUS_PER_POD.high:
        return f"GPUs per pod must be in [0, {GPUS_PER_POD.high:g}]"
    if job.pods % job.unit:
        return f"unit of {job.unit} pods does not divide {job.pods} pods"
    if job.max_clusters < 1 or job.min_share_units < 1:
        return "max_clusters and min_share_units must be >= 1"
    if not 0 <= job.allreduce_gbps < math.inf:  # (more than any link: it cannot split)
        return "the all-reduce rate must be a finite number of Gbps >= 0"
    if job.estimate_s is not None and not 0 <= job.estimate_s < math.inf:
        return "the estimate must be a finite number of seconds"
    if not -(2**31) <= job.priority < 2**31:
        return "priority must be a 32-bit integer"
    return None


def check_clusters(snapshot: Snapshot) -> None:
    """Refuse an inventory the model cannot mean anything for (a ValueError naming it)."""
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


def stable_rank(snapshot: Snapshot, base: Pools) -> dict[str, int]:
    """Clusters by size (free GPUs plus what running jobs hold), smallest first: the order in
    which the planned policies fill clusters, the same every round, so that small work packs
    into the small clusters and the large ones stay whole for the gangs that need them. Free
    GPUs come from the round's starting pools (`base`, untouched yet: summed once there)."""
    size = {
        c.name: sum(base[c.name].free_gpus(m) for m in base[c.name].models())
        for c in snapshot.clusters
    }
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
