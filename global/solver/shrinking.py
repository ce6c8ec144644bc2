"""Elastic jobs giving back units so a waiting job can start: a partial preemption, so it
follows the rules of whole-gang preemption (`preemption.may_take`, the same predicate): never
from a job annotated `volcano.sh/preemptable: "false"`, never for a job whose class says
`preemptionPolicy: Never`, only from a job that has run `Rules.min_run_s` since its last start
or resize, and only for a job of a higher priority (preemption) or by reclaim (its queue below
its deserved share, the giver's queue still at or above its own once the units are gone).

The resize interval (`planning.Hysteresis`) does not hold a shrink back: it keeps growth from
restarting jobs for small gains, but a waiting job that outranks an elastic job could evict it
whole under the same rules, and giving back units costs less than an eviction (which spends a
retry and the job's place in its queue). A shrink that suffices comes before an eviction
(`round_plan.plan_round`: the shrinks are step 3, the evictions step 7 and never of a job the
round resizes). The round (`round_plan.py`) calls it, on the server and in the simulator."""

from __future__ import annotations

from collections.abc import Mapping

from volcano_global.solver.model import JobRequest, RunningJob
from volcano_global.solver.planning import ElasticRun, Shrink
from volcano_global.solver.preemption import Rules, Standing, may_take


def shrinks(
    waiting: list[JobRequest],
    runs: list[ElasticRun],
    *,
    free_gpus: dict[tuple[str, str | None], int],
    cluster_models: dict[str, tuple[str, ...]],
    rules: Rules,
    queues: Mapping[str, Standing] | None = None,
) -> list[Shrink]:
    """Units elastic running jobs give back so a waiting job they may give to (the module
    docstring), in queue order, can start. For each such job that fits in no cluster's free
    GPUs (`free_gpus[(cluster, model)]`), the cluster where the fewest units given back make
    it fit whole; the jobs there give back units above their minimum width, the lowest
    priority and the most spare first, never below their minimum and never their last unit in
    a cluster (so a split's clusters, and the bandwidth they reserved, stay). Only
    whole-cluster fits are planned (a split beneficiary is not); GPUs per cluster, not nodes:
    the solver then places the beneficiary on what is free."""
    standing = dict(queues or {})
    free = dict(free_gpus)
    settled = [r for r in runs if r.spare > 0]
    left = {run.request.id: run.spare for run in settled}
    held = {run.request.id: dict(run.units_in) for run in settled}
    by_id = {run.request.id: run for run in settled}
    out: list[Shrink] = []
    for job in waiting:
        if job.gpus == 0 or not job.may_evict_for:
            continue
        givers = [
            run
            for run in settled
            if left[run.request.id] > 0 and _may_give(job, run, 1, rules, standing)
        ]
        if not givers:
            continue
        models = (job.gpu_model,) if job.gpu_model else None
        best: tuple[int, str, str | None, list[Shrink]] | None = None
        for cluster, own_models in sorted(cluster_models.items()):
            if job.allowed_clusters is not None and cluster not in job.allowed_clusters:
                continue
            for model in models or own_models:
                need = job.gpus - free.get((cluster, model), 0)
                if need <= 0:
                    best = (0, cluster, model, [])
                    break
                plan = _give_back(job, cluster, model, need, givers, left, held, rules, standing)
                if plan is not None and (best is None or sum(s.units for s in plan) < best[0]):
                    best = (sum(s.units for s in plan), cluster, model, plan)
            if best is not None and best[0] == 0:
                break
        if best is None:
            continue
        _, cluster, model, plan = best
        for s in plan:
            gpus = s.units * by_id[s.job_id].request.unit_gpus
            left[s.job_id] -= s.units
            held[s.job_id][cluster] -= s.units
            free[(cluster, model)] = free.get((cluster, model), 0) + gpus
            _move(standing, by_id[s.job_id].request.queue, -gpus)
        free[(cluster, model)] = free.get((cluster, model), 0) - job.gpus
        _move(standing, job.queue, job.gpus)
        out += plan
    return out


def _give_back(
    job: JobRequest,
    cluster: str,
    model: str | None,
    need: int,
    givers: list[ElasticRun],
    left: dict[str, int],
    held: dict[str, dict[str, int]],
    rules: Rules,
    standing: Mapping[str, Standing],
) -> list[Shrink] | None:
    """The units given back in `cluster` that free `need` GPUs of `model`, or None: from each
    giver as many as it may give (by reclaim, no more than keep its queue at its share)."""
    plan = []
    order = sorted(givers, key=lambda r: (r.request.priority, -left[r.request.id], r.request.id))
    for run in order:
        request = run.request
        if need <= 0:
            break
        if model is not None and request.gpu_model not in (None, model):
            continue
        there = held[request.id].get(cluster, 0)
        keep = 1 if len(run.units_in) > 1 else request.fewest_units
        units = min(left[request.id], max(there - keep, 0), -(-need // request.unit_gpus))
        while units > 0 and not _may_give(job, run, units, rules, standing):
            units -= 1
        if units > 0:
            plan.append(Shrink(request.id, cluster, units, job.id))
            need -= units * request.unit_gpus
    return plan if need <= 0 else None


def _may_give(
    job: JobRequest, run: ElasticRun, units: int, rules: Rules, standing: Mapping[str, Standing]
) -> bool:
    """Whether `run` may give `units` of its units to `job`: the preemption predicate, with
    the units as the GPUs taken and its last start or resize as the start of its run."""
    taken = RunningJob(
        run.request.id,
        (("", run.request.gpu_model or "", units * run.request.unit_gpus),),
        priority=run.request.priority,
        queue=run.request.queue,
        preemptable=run.preemptable,
        run_s=run.since_s,
    )
    return may_take(job, taken, rules, standing) is not None


def _move(standing: dict[str, Standing], queue: str, gpus: int) -> None:
    if queue in standing:
        s = standing[queue]
        standing[queue] = Standing(s.held + gpus, s.deserved, s.reclaimable)
