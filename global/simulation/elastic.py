"""Elastic width in the simulator: the running elastic jobs as `solver.planning` sees them,
what they could add, the units they give back to a waiting job that may take them
(`solver.shrinking`), the units a growth decision binds - the same planning code as the
server's round (`services/scheduling/elastic.py`), over simulated nodes - and what a resize
costs.

What a resize costs (a checkpoint-restart, as on the server): the job makes no progress for
`SimOptions.resize_restart_s` after it (saving, rescheduling its pods, loading the checkpoint
and forming the new world), holding its GPUs at the new width; and when the scenario gives
`SimOptions.checkpoint_s` it also loses its work since its last checkpoint, as an eviction
does (without, it is taken to save on the way down: the scheduler asks for the restart).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime

from volcano_global.simulation.evictions import lost_s
from volcano_global.simulation.nodes import Bound, Fleet
from volcano_global.simulation.running import EPOCH, Running, request, stamp
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import JobDecision, JobRequest, LinkBandwidth, planning, shrinking
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.preemption import Rules, Standing

Cut = tuple[planning.Shrink, list[Bound]]  # units given back, and the pods they freed


def elastic_runs(
    running: dict[str, Running], clock: datetime, durations: DurationModel
) -> list[planning.ElasticRun]:
    """The running elastic jobs as `solver.planning` sees them."""
    out = []
    for run in running.values():
        if not run.job.min_units:
            continue
        units: dict[str, int] = defaultdict(int)
        for cluster, *_ in run.bound:
            units[cluster] += 1
        per_unit = run.job.unit_pods or run.job.pods
        elapsed = (clock - stamp(run.start)).total_seconds()
        out.append(
            planning.ElasticRun(
                request(run.job, elastic=True),
                tuple((c, pods // per_unit) for c, pods in units.items()),
                estimate_s=durations.remaining(run.job.gpus, elapsed, run.job.estimate_s),
                since_s=(clock - stamp(run.resized_at)).total_seconds(),
                preemptable=run.job.preemptable,
            )
        )
    return out


def growth(
    running: dict[str, Running],
    clock: datetime,
    pending: list[TraceJob],
    shrinking: Collection[str],
    *,
    durations: DurationModel,
    reserve_after_s: float,
    hysteresis: planning.Hysteresis,
) -> list[JobRequest]:
    """What elastic running jobs could add (`planning.growth`)."""
    lowest = min((j.priority for j in pending), default=None)
    runs = [r for r in elastic_runs(running, clock, durations) if r.request.id not in shrinking]
    now = (clock - EPOCH).total_seconds()
    due = any(now - j.arrival_s >= reserve_after_s for j in pending)
    return planning.growth(runs, lowest_priority=lowest, widen=not due, hysteresis=hysteresis)


def shrink(
    fleet: Fleet,
    pending: list[TraceJob],
    running: dict[str, Running],
    now: float,
    *,
    durations: DurationModel,
    reserve_after_s: float,
    rules: Rules,
    queues: Mapping[str, Standing],
    hysteresis: planning.Hysteresis,
) -> list[Cut]:
    """Elastic jobs give back units a waiting job may take from them (`shrinking.shrinks`,
    under the preemption `rules`), for this round's decision: the units and the pods they
    free."""
    runs = elastic_runs(running, stamp(now), durations)
    if not any(run.spare for run in runs):
        return []
    waiting = [
        replace(request(j), due=(now - j.arrival_s) >= reserve_after_s)
        for j in sorted(pending, key=lambda j: (-j.priority, j.arrival_s, j.id))
    ]
    free, models = fleet.free_gpus()
    out = []
    cuts = shrinking.shrinks(
        waiting,
        runs,
        free_gpus=free,
        cluster_models=models,
        rules=rules,
        queues=queues,
        hysteresis=hysteresis,
    )
    for cut in cuts:
        run = running[cut.job_id]
        pods = cut.units * (run.job.unit_pods or run.job.pods)
        there = [b for b in run.bound if b[0] == cut.cluster][-pods:]
        fleet.unbind(there)
        for entry in there:
            run.bound.remove(entry)
        run.width -= cut.units
        out.append((cut, there))
    return out


def unshrink(fleet: Fleet, cuts: list[Cut], running: dict[str, Running]) -> None:
    """Units given back whose nodes the round's starts did not take return to their job
    (the same nodes): a shrink happens only as far as a start used it. (The server, which
    does not see nodes, carries out a cluster's planned shrinks whenever the round starts
    anything there: `services/scheduling/commit.py`.)"""
    for cut, pods in cuts:
        run = running.get(cut.job_id)
        if run is None:
            continue
        per_unit = run.job.unit_pods or run.job.pods
        for first in range(0, len(pods), per_unit):
            unit = pods[first : first + per_unit]
            if fleet.take(unit):
                run.bound += unit
                run.width += 1


def grow(
    fleet: Fleet, jd: JobDecision, run: Running, reservations: tuple[LinkBandwidth, ...]
) -> None:
    """Add the units a growth decision placed; the job's clusters and link bandwidth become
    those of its grown set (`planning.grown_links`)."""
    for share in jd.shares:
        for leaf, pods in share.domains or ((share.cluster, share.pods),):
            got = fleet.bind(share.cluster, leaf, run.job.gpu_model, run.job.gpus_per_pod, pods)
            if got is None:
                return
            run.bound += got
        run.width += share.units
        if share.cluster not in run.clusters:
            run.clusters.append(share.cluster)
    run.reservations = [(r.a, r.b, r.gbps) for r in reservations]


def restart(run: Running, now: float, *, restart_s: float, checkpoint_s: float | None) -> float:
    """Charge a resize at `now` (the module docstring): returns the GPU-seconds it costs the
    job at its new width (the restart's, plus the work lost since its last checkpoint)."""
    lost = lost_s(now - run.resized_at, checkpoint_s) if checkpoint_s else 0.0
    run.work_left += lost / run.factor  # the work of those seconds, at the speed it ran
    run.stalled_until = now + restart_s
    run.resized_at = now
    run.priced = False  # a new finish event
    return (restart_s + lost) * sum(count for *_, count in run.bound)
