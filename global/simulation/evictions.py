"""Preemption and reclaim in the simulator: the evictions of a round's plan (step 7 of
`solver.round_plan.plan_round`, the server's recipe) applied to the simulated fleet: each eviction's
victims leave their nodes at once and go back to the queue, and the preemptor starts on the
freed capacity at the same instant (a simulated member cluster deletes a share instantly; the
server waits for the agents to report the shares gone).

What an eviction costs: a victim loses its work since its start, or since its last checkpoint
when the scenario gives `SimOptions.checkpoint_s` (a checkpoint every that many seconds of its
run); it resumes with the rest of its work. A demotion by time-sharing is such an eviction; what the
victim's runs received (its attained service) is kept for the next rounds (`Simulation.served`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from volcano_global.simulation.running import Running
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver.preemption import Eviction
from volcano_global.solver.timesharing import TIMESHARE

if TYPE_CHECKING:
    from volcano_global.simulation.engine import JobRecord, Simulation


def lost_s(ran_s: float, checkpoint_s: float | None) -> float:
    """Seconds of a run an eviction now throws away."""
    return ran_s % checkpoint_s if checkpoint_s else ran_s


def apply(
    sim: Simulation,
    plan: Sequence[Eviction],
    pending: list[TraceJob],
    running: dict[str, Running],
    records: dict[str, JobRecord],
    now: float,
) -> tuple[set[str], list[tuple[str, str]]]:
    """The round's evictions: the victims leave their nodes and go back to the queue
    (appended to `pending`), the preemptors start on what they freed. Returns the preemptors
    started and the (victim, preemptor) pairs."""
    by_id = {j.id: j for j in pending}
    started: set[str] = set()
    evicted: list[tuple[str, str]] = []
    for e in plan:
        if e.preemptor not in by_id or any(v.id not in running for v in e.victims):
            continue
        for victim in e.victims:
            pending.append(_requeue(sim, running.pop(victim.id), records, now, e.kind))
            evicted.append((victim.id, e.preemptor))
        if sim.start(by_id[e.preemptor], e.placement, running, now):
            started.add(e.preemptor)
            records[e.preemptor].start = now
            records[e.preemptor].clusters = e.placement.clusters
    return started, evicted


def _requeue(
    sim: Simulation, run: Running, records: dict[str, JobRecord], now: float, kind: str
) -> TraceJob:
    sim.fleet.unbind(run.bound)
    sim.retired[run.job.id] = run.version  # its pending finish event no longer applies
    ran = now - run.start
    lost = lost_s(ran, sim.options.checkpoint_s)
    gpus = sum(g for *_, g in run.bound)
    record = records[run.job.id]
    record.preempted += 1
    record.lost_gpu_s += gpus * lost
    if kind == TIMESHARE:
        record.demoted += 1
        record.demoted_gpu_s += gpus * lost
    sim.served[run.job.id] = sim.served.get(run.job.id, 0.0) + gpus * ran
    record.start = None
    # Work done so far (at its speed), of which the part before the last checkpoint is kept.
    done = run.job.duration_s - run.work_left + run.working_s(now) / run.factor
    kept = done * (ran - lost) / ran if ran > 0 else 0.0
    return replace(run.job, duration_s=max(run.job.duration_s - kept, 1.0))


def held_by_queue(running: dict[str, Running]) -> dict[str, int]:
    """GPUs each queue's running jobs hold."""
    held: dict[str, int] = {}
    for run in running.values():
        held[run.job.queue] = held.get(run.job.queue, 0) + sum(g for *_, g in run.bound)
    return held
