"""When the warm start is already optimal: a round that has room for every job of its window
needs no search.

The CP-SAT model's objective (`cpsat_model`) is, lexicographically, the value of the jobs that
start and of their width, then the secondary terms: clusters a job spans beyond one, link
traffic, and the fit rank of the clusters its GPUs go to. Each term has a bound that holds
for every answer, taken term by term: every job of the window admitted at its full width; one
cluster per job, so no extra cluster and no traffic; and each job's GPUs in the lowest fit rank
among the clusters that have room for one of its units at the round's start. A warm start that
meets every bound meets the objective's upper bound, so it is optimal, and building the model
and searching could only find an answer of equal value. With a reservation owed or planned the
bound is not taken (a round that owes one is never this simple).
"""

from __future__ import annotations

from volcano_global.solver.capacity import job_models
from volcano_global.solver.model import Decision, JobRequest
from volcano_global.solver.packing import Pools


def fit_floors(jobs: list[JobRequest], pools: Pools, fit_rank: dict[str, int]) -> dict[str, int]:
    """Each job's lowest fit rank among the clusters with room for one of its units in
    `pools` (the round's starting capacity, before any placement). A job that has no such
    cluster gets no entry: the bound cannot be met for it."""
    floors: dict[str, int] = {}
    for job in jobs:
        unit = job.unit_gpus
        ranks = [
            fit_rank[name]
            for name, pool in pools.items()
            if any(pool.free_gpus(m) >= unit for m in job_models(job, pool))
        ]
        if ranks:
            floors[job.id] = min(ranks)
    return floors


def whole_at_full_width(jobs: list[JobRequest], answer: Decision) -> bool:
    """Every job of the window admitted in one cluster at its full width (the bound of the
    value of what starts, of the clusters a job spans and of the traffic)."""
    decided = {d.job_id: d for d in answer.jobs}
    for job in jobs:
        decision = decided.get(job.id)
        if decision is None or not decision.admitted or len(decision.shares) != 1:
            return False
        if job.elastic and decision.shares[0].units < job.units:
            return False
    return True


def at_fit_floors(
    jobs: list[JobRequest], answer: Decision, floors: dict[str, int], fit_rank: dict[str, int]
) -> bool:
    """Every job's GPUs in a cluster of its floor's fit rank (the bound of the fit term), for
    an answer that is `whole_at_full_width`."""
    decided = {d.job_id: d for d in answer.jobs}
    return all(
        not job.unit_gpus or fit_rank[decided[job.id].shares[0].cluster] == floors.get(job.id)
        for job in jobs
    )
