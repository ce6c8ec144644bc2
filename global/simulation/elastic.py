"""Elastic width in the simulator: the running elastic jobs as the round's input
(`planning.ElasticRun`, as the server reads them), and a round's shrinks and growth
(`solver.round_plan.plan_round`) applied to simulated nodes; and what a resize costs.

What a resize costs (a checkpoint-restart, as on the server): the job makes no progress for
`SimOptions.resize_restart_s` after it (saving, rescheduling its pods, loading the checkpoint
and forming the new world), holding its GPUs at the new width; and when the scenario gives
`SimOptions.checkpoint_s` it also loses its work since its last checkpoint, as an eviction
does (without, it is taken to save on the way down: the scheduler asks for the restart).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from volcano_global.simulation.evictions import lost_s
from volcano_global.simulation.nodes import Bound, Fleet
from volcano_global.simulation.running import Running, request, stamp
from volcano_global.solver import JobDecision, LinkBandwidth, planning
from volcano_global.solver.durations import DurationModel

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
                estimate_s=durations.remaining(
                    run.job.gpus, elapsed, run.job.estimate_s, queue=run.job.queue
                ),
                since_s=(clock - stamp(run.resized_at)).total_seconds(),
                preemptable=run.job.preemptable,
                domains=_domains(run),
                links=tuple(LinkBandwidth(a, b, g) for a, b, g in run.reservations),
                gpu_model=run.job.gpu_model or "",
            )
        )
    return out


def _domains(run: Running) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """Per cluster, its pods per leaf domain in the order they were bound."""
    per: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for cluster, leaf, *_ in run.bound:
        pods = per[cluster]
        if pods and pods[-1][0] == leaf:
            pods[-1] = (leaf, pods[-1][1] + 1)
        else:
            pods.append((leaf, 1))
    return tuple((cluster, tuple(pods)) for cluster, pods in per.items())


def give_back(
    fleet: Fleet, shrinks: Sequence[planning.Shrink], running: dict[str, Running]
) -> list[Cut]:
    """The plan's shrinks on the fleet: each job's last placed pods in the cluster leave
    their nodes (the pods `planning.ElasticRun.given_back` counted as free)."""
    out = []
    for cut in shrinks:
        run = running.get(cut.job_id)
        if run is None:
            continue
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
    anything there: `services/scheduling/round_apply.py`.)"""
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
