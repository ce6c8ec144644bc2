"""Preemption and reclaim in the simulator: after a round's starts, the jobs still waiting are
given to `solver.preemption.preempt` (the server's code) over the simulated fleet; each
eviction's victims leave their nodes at once and go back to the queue, and the preemptor starts
on the freed capacity at the same instant (a simulated member cluster deletes a share
instantly; the server waits for the agents to report the shares gone).

What an eviction costs: a victim loses its work since its start, or since its last checkpoint
when the scenario gives `SimOptions.checkpoint_s` (a checkpoint every that many seconds of its
run); it resumes with the rest of its work.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from volcano_global.simulation.running import Running, request, stamp
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import Decision, JobDecision, Policy, Snapshot
from volcano_global.solver.fair_share import quota_states
from volcano_global.solver.preemption import Standing, preempt, standings

if TYPE_CHECKING:
    from volcano_global.simulation.engine import JobRecord, SimResult, Simulation


def lost_s(ran_s: float, checkpoint_s: float | None) -> float:
    """Seconds of a run an eviction now throws away."""
    return ran_s % checkpoint_s if checkpoint_s else ran_s


def evict(
    sim: Simulation,
    pending: list[TraceJob],
    running: dict[str, Running],
    records: dict[str, JobRecord],
    now: float,
    result: SimResult,
) -> set[str]:
    """Evict for the waiting jobs that may; requeue the victims (appended to `pending`) and
    start the preemptors. Returns the ids of the preemptors started."""
    rules = sim.options.preemption
    if rules is None or not pending or not running:
        return set()
    waiting = sorted(pending, key=lambda j: (-j.priority, j.arrival_s, j.id))
    held = held_by_queue(running)
    queues = queue_standings(sim, pending, held)
    snapshot = Snapshot(
        clusters=sim.fleet.capacities(),
        links=sim._links(running),
        jobs=tuple(request(j) for j in waiting),
        queues=quota_states(sim._tree(held), {j.queue for j in pending}),
        running=tuple(sim._running(running, stamp(now))),
    )
    pending_all = Decision(
        Policy.GREEDY, "FEASIBLE", tuple(JobDecision(j.id, False) for j in waiting)
    )
    done = preempt(snapshot, pending_all, rules=rules, queues=queues)
    by_id = {j.id: j for j in pending}
    started = set()
    for e in done:
        for victim in e.victims:
            pending.append(_requeue(sim, running.pop(victim.id), records, now))
            result.evictions.append((now, victim.id, e.preemptor))
        if sim._start(by_id[e.preemptor], e.placement, running, now):
            started.add(e.preemptor)
            records[e.preemptor].start = now
            records[e.preemptor].clusters = e.placement.clusters
    return started


def _requeue(sim: Simulation, run: Running, records: dict[str, JobRecord], now: float) -> TraceJob:
    sim.fleet.unbind(run.bound)
    sim.retired[run.job.id] = run.version  # its pending finish event no longer applies
    ran = now - run.start
    lost = lost_s(ran, sim.options.checkpoint_s)
    gpus = sum(g for *_, g in run.bound)
    record = records[run.job.id]
    record.preempted += 1
    record.lost_gpu_s += gpus * lost
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


def queue_standings(
    sim: Simulation, pending: list[TraceJob], held: dict[str, int]
) -> dict[str, Standing]:
    tree = sim._tree(held)
    want: dict[str, int] = {}
    for j in pending:
        want[j.queue] = want.get(j.queue, 0) + j.gpus
    tree = {n: replace(q, pending=want.get(n, 0)) for n, q in tree.items()}
    return standings(sim.capacity_gpus, tree, {n: q.reclaimable for n, q in sim.queues.items()})
