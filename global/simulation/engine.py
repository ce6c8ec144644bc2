"""The simulator: jobs arrive on a virtual clock and each scheduling round is decided by the
code the server runs - the queue order of `solver.queue_order` (priority, then weighted fair
share, then submission time) and `solver.solve` with the chosen policy - over the free capacity
of simulated nodes. What the server keeps in its database (free GPUs per leaf HyperNode, link
reservations, queue usage) is kept here in memory; placements bind pods to nodes best-fit inside
the leaf domains the decision names, as the simulated agent does. A round runs at every instant
something changed (an arrival or a completion). Deterministic for a seed: CP-SAT is given a
deterministic work limit, not a wall-clock one.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from volcano_global.simulation import elastic, evictions, left_out, solver_input, speed
from volcano_global.simulation.data import DataState
from volcano_global.simulation.nodes import Fleet
from volcano_global.simulation.options import SimOptions
from volcano_global.simulation.running import EPOCH, Running, request, stamp
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.staging import Copies
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import (
    JobDecision,
    LinkState,
    Policy,
    Snapshot,
    SolveOptions,
    solve,
)
from volcano_global.solver.copies import Copy
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.fair_share import QueueNode
from volcano_global.solver.outcomes import Status
from volcano_global.solver.round_plan import (
    RoundInput,
    RoundOptions,
    RoundPlan,
    Waiting,
    plan_round,
)


@dataclass
class JobRecord:
    job: TraceJob
    start: float | None = None
    finish: float | None = None
    clusters: tuple[str, ...] = ()
    slowest_factor: float = 1.0
    crossing_gbit: float = 0.0  # bits sent across cluster boundaries / 1e9
    preempted: int = 0  # times it was evicted
    lost_gpu_s: float = 0.0  # GPU-seconds of work evictions threw away (demotions included)
    demoted: int = 0  # of its evictions, the demotions by time-sharing
    demoted_gpu_s: float = 0.0  # GPU-seconds of work its demotions threw away
    resizes: int = 0  # elastic: times it was grown or shrunk (each a checkpoint-restart)
    resize_gpu_s: float = 0.0  # GPU-seconds its resizes cost (restarts, work lost)
    staging_s: float = 0.0  # seconds it held its GPUs while its data was copied in
    # The first expected start a round promised it while it waited (`Outcome.at`), and when
    # (seconds on the virtual clock): what `bench/promise_bench.py` holds against `start`.
    promised_at: float | None = None
    promised_on: float | None = None
    promised_as: str = ""  # the outcome's status then (Waiting, Reserved, WillPreempt)


@dataclass
class Sample:
    time: float
    allocated_gpus: int
    pending: tuple[str, ...]  # ids of the jobs waiting
    link_demand: dict[speed.Pair, float]  # what split jobs need on each link now


@dataclass
class SimResult:
    policy: str
    capacity_gpus: int
    links: dict[speed.Pair, float]
    records: list[JobRecord]
    cluster_gpus: dict[str, int] = field(default_factory=dict)
    never_placeable: frozenset[str] = frozenset()  # not even on the empty fleet, link-safely
    left_out: dict[str, str] = field(default_factory=dict)  # never_placeable: job -> why
    timeline: list[Sample] = field(default_factory=list)
    rounds: int = 0
    evictions: list[tuple[float, str, str]] = field(default_factory=list)  # (t, victim, by)
    moved_bytes: dict[speed.Pair, int] = field(default_factory=dict)  # staged, per link
    between_regions_bytes: int = 0  # staged between clusters of different regions
    replicated_bytes: int = 0  # of which copies ahead of demand (`RoundPlan.replicas`)

    @property
    def demotions(self) -> int:
        """Demotions by time-sharing."""
        return sum(r.demoted for r in self.records)

    @property
    def demoted_gpu_hours(self) -> float:
        """GPU-hours of work demotions threw away."""
        return sum(r.demoted_gpu_s for r in self.records) / 3600


PROMISES = frozenset({Status.WAITING, Status.RESERVED, Status.WILL_PREEMPT})


def promised(plan: RoundPlan, records: dict[str, JobRecord], now: float) -> None:
    """Keep each waiting job's first promised start (a later round's may be better informed;
    the first is what its user was told first)."""
    for job_id, o in plan.outcomes.items():
        record = records.get(job_id)
        if o.status in PROMISES and o.at is not None and record and record.promised_at is None:
            record.promised_at = (o.at - EPOCH).total_seconds()
            record.promised_on = now
            record.promised_as = o.status.value


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        jobs: list[TraceJob],
        policy: Policy,
        options: SimOptions | None = None,
    ) -> None:
        self.policy = policy
        self.options = options or SimOptions()
        self.jobs = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
        self.fleet = Fleet(scenario)
        self.capacity = {speed.pair(link.a, link.b): link.gbps for link in scenario.links}
        self.queues = {q.name: q for q in scenario.queues}
        self.quanta = {q.name: q.quantum_s for q in scenario.queues if q.quantum_s is not None}
        self.served: dict[str, float] = {}  # GPU-seconds a job's evicted runs received
        self.retired: dict[str, int] = {}  # an evicted job's last version (its old events)
        self.durations = DurationModel()  # what the scheduler learns from finished jobs
        self.capacity_gpus = self.fleet.capacity_gpus
        self.woken: set[tuple[str, float]] = set()  # (job, time) of the wake-ups scheduled
        self.data = DataState(scenario, self.jobs)
        self.regions = {c.name: c.region for c in scenario.clusters if c.region}
        self.copies = Copies(self.data, self.options.data)
        self.replicated = 0  # bytes copied ahead of demand

    def _tree(self, held: dict[str, int], pending: dict[str, int]) -> dict[str, QueueNode]:
        """The scenario's queues as the server's fair share and quotas read them."""
        return {
            name: QueueNode(
                name,
                parent=q.parent,
                weight=q.weight,
                capability=q.quota,
                deserved=q.deserved,
                guarantee=q.guarantee,
                held=held.get(name, 0),
                pending=pending.get(name, 0),
            )
            for name, q in self.queues.items()
        }

    # -- the run ----------------------------------------------------------------------------
    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        records = {j.id: JobRecord(j) for j in self.jobs}
        never = self.never_placeable()
        result = SimResult(
            self.policy.value,
            self.capacity_gpus,
            self.capacity,
            list(records.values()),
            dict(self.fleet.cluster_gpus),
            never,
            left_out.reasons(self.fleet, self.jobs, never),
        )
        events: list[tuple[float, int, str, str, int]] = []
        seq = 0
        for job in self.jobs:
            heapq.heappush(events, (job.arrival_s, seq, "arrive", job.id, 0))
            seq += 1
        by_id = {j.id: j for j in self.jobs}
        pending: list[TraceJob] = []
        running: dict[str, Running] = {}
        while events:
            now = events[0][0]
            while events and events[0][0] == now:
                _, _, kind, job_id, version = heapq.heappop(events)
                if kind == "arrive":
                    pending.append(by_id[job_id])
                elif kind == "wake":
                    pass  # an elastic job may grow now: the round below
                elif job_id in running and running[job_id].version == version:
                    done = running.pop(job_id)
                    self.durations.observe(
                        done.job.gpus,
                        now - done.start,
                        estimate=done.job.estimate_s,
                        queue=done.job.queue,
                    )
                    records[job_id].crossing_gbit += done.crossing_gbps * (now - done.last)
                    self.fleet.unbind(done.bound)
                    records[job_id].finish = now
                    if progress:
                        progress(1)
            self.copies.ended(running, records, now)
            self._advance(running, records, now)
            growing = self.policy.planned and any(r.growable for r in running.values())
            if pending or growing:
                pending = self._round(pending, running, records, result, now)
            for run in self._reprice(running, records, now):
                seq += 1
                finish = max(now, run.stalled_until) + run.work_left * run.factor
                heapq.heappush(events, (finish, seq, "finish", run.job.id, run.version))
            for at, job_id in self._wakes(running, now) + self._copy_ends(running, now):
                seq += 1
                heapq.heappush(events, (at, seq, "wake", job_id, -1))
            result.timeline.append(
                Sample(
                    now, self.fleet.allocated(), tuple(j.id for j in pending), self._demand(running)
                )
            )
        result.moved_bytes = dict(self.data.moved)
        result.between_regions_bytes = self.data.between_regions()
        result.replicated_bytes = self.replicated
        return result

    def _round(
        self,
        pending: list[TraceJob],
        running: dict[str, Running],
        records: dict[str, JobRecord],
        result: SimResult,
        now: float,
    ) -> list[TraceJob]:
        """One round at `now`, applied (its promises noted, starts and resizes, then
        evictions); the jobs still waiting."""
        plan = self.decide(pending, running, now)
        promised(plan, records, now)
        started = self._apply(plan, pending, running, records, now)
        result.rounds += 1
        pending = [j for j in pending if j.id not in started]
        started, evicted = evictions.apply(self, plan.evictions, pending, running, records, now)
        result.evictions += [(now, victim, by) for victim, by in evicted]
        return [j for j in pending if j.id not in started]

    def _copy_ends(self, running: dict[str, Running], now: float) -> list[tuple[float, str]]:
        """A round when a copy ends, once per copy."""
        out = [
            (at, key) for at, key in self.copies.ends(running, now) if (key, at) not in self.woken
        ]
        self.woken.update((key, at) for at, key in out)
        return out

    def _wakes(self, running: dict[str, Running], now: float) -> list[tuple[float, str]]:
        """A round when a narrow elastic job's resize interval ends (the server's loop runs
        rounds while one runs narrow; here rounds run at events, and without this one a job
        could wait for its growth until some other job arrives or ends)."""
        if not self.policy.planned:
            return []
        out = []
        for run in running.values():
            at = run.resized_at + self.options.hysteresis.min_interval_s
            if run.growable and at > now and (run.job.id, at) not in self.woken:
                self.woken.add((run.job.id, at))
                out.append((at, run.job.id))
        return out

    def never_placeable(self) -> frozenset[str]:
        """Jobs CP-SAT cannot place even on the empty fleet without oversubscribing a link (a
        policy that runs them does so only by oversubscribing); one solve per job shape."""
        empty = Snapshot(clusters=self.fleet.capacities(), links=self._links({}))
        verdict: dict[tuple[object, ...], bool] = {}
        out = set()
        for job in self.jobs:
            shape = (replace(request(job), id="probe", priority=0, queue="default"),)
            if shape not in verdict:
                # The work limit decides, not the wall clock: a loaded machine must not
                # change which jobs are judged.
                options = SolveOptions(
                    deterministic_time=1.0, time_limit_s=self.options.time_limit_s
                )
                decision = solve(replace(empty, jobs=shape), Policy.CPSAT, options)
                verdict[shape] = decision.jobs[0].admitted
            if not verdict[shape]:
                out.add(job.id)
        return frozenset(out)

    def round_input(
        self, pending: list[TraceJob], running: dict[str, Running], now: float
    ) -> RoundInput:
        """What a round at `now` decides from, as the server reads it from its database."""
        held = evictions.held_by_queue(running)  # an elastic job: its width
        asking: dict[str, int] = defaultdict(int)
        for j in pending:
            asking[j.queue] += j.gpus
        clock = stamp(now)
        planned = self.policy.planned
        return RoundInput(
            clock,
            self.fleet.capacities(),
            self._links(running),
            tuple(
                Waiting(
                    request(j, elastic=planned, served_gpu_s=self.served.get(j.id, 0.0)),
                    stamp(j.arrival_s),
                    j.estimate_s,
                )
                for j in pending
            ),
            self._tree(held, dict(asking)),
            running=tuple(
                solver_input.running_jobs(
                    running,
                    clock,
                    self.durations,
                    checkpoint_s=self.options.checkpoint_s,
                    staging_gbps=self.options.data.staging_gbps,
                    served=self.served,
                )
            )
            if planned or self.options.preemption is not None or self.data or self.quanta
            else (),
            elastic=tuple(elastic.elastic_runs(running, clock, self.durations)) if planned else (),
            durations=self.durations,
            fleet_gpus=self.capacity_gpus,
            reclaimable={name: q.reclaimable for name, q in self.queues.items()},
            data={j.id: self.data.needs(j) for j in (*pending, *self._elastic(running))}
            if self.data
            else {},
            copying=self.copies.copying(running),
            time_sharing=self.quanta,
            regions=self.regions,
            popularity=self.data.popularity(now, self.options.reads_window_s)
            if self.data and self.options.data.replicate_readers > 0
            else {},
        )

    def _elastic(self, running: dict[str, Running]) -> list[TraceJob]:
        """Running elastic jobs (their growth stays where their data is)."""
        return [r.job for r in running.values() if r.job.min_units] if self.policy.planned else []

    def decide(self, pending: list[TraceJob], running: dict[str, Running], now: float) -> RoundPlan:
        """One round at `now`: the server's recipe (`solver.round_plan.plan_round`)."""
        options = RoundOptions(
            solve=SolveOptions(
                time_limit_s=self.options.time_limit_s,
                window=self.options.window,
                deterministic_time=self.options.deterministic_time,
                max_holds=self.options.max_holds,
            ),
            preemption=self.options.preemption,
            hysteresis=self.options.hysteresis,
            reserve_after_s=self.options.reserve_after_s,
            whole_queue=self.options.whole_queue,
            backfill_limit=self.options.backfill_limit,
            data=self.options.data,
            long_work=self.options.long_work,
            time_sharing=self.options.time_sharing,
        )
        return plan_round(self.round_input(pending, running, now), self.policy, options)

    def _apply(
        self,
        plan: RoundPlan,
        pending: list[TraceJob],
        running: dict[str, Running],
        records: dict[str, JobRecord],
        now: float,
    ) -> set[str]:
        """The plan's shrinks, starts and growth on the fleet (its evictions: `evictions.apply`);
        the ids of the jobs started."""
        by_id = {j.id: j for j in pending}
        widths = {key: run.width for key, run in running.items()}
        cuts = elastic.give_back(self.fleet, plan.shrinks, running)
        started = set()
        for jd in plan.starts:
            copies = plan.staging.get(jd.job_id, ())
            if self.start(by_id[jd.job_id], jd, running, now, copies):
                started.add(jd.job_id)
                records[jd.job_id].start = now
                records[jd.job_id].clusters = jd.clusters
        for copies in plan.prefetch.values():
            self.copies.fetch(copies, now)
        for copy in plan.replicas:  # each its own: its data arrives when it ends
            self.copies.fetch((copy,), now)
            self.replicated += copy.bytes
        elastic.unshrink(self.fleet, cuts, running)
        for grow in plan.grows:
            elastic.grow(self.fleet, grow.decision, running[grow.job_id], grow.links)
        for cut, _ in cuts:
            if cut.beneficiary in started and cut.job_id in running:
                running[cut.job_id].shrinks += 1
        for key, width in widths.items():
            run = running.get(key)
            if run is not None and run.width != width:
                records[key].resizes += 1
                records[key].resize_gpu_s += elastic.restart(
                    run,
                    now,
                    restart_s=self.options.resize_restart_s,
                    checkpoint_s=self.options.checkpoint_s,
                )
        return started

    def start(
        self,
        job: TraceJob,
        jd: JobDecision,
        running: dict[str, Running],
        now: float,
        copies: tuple[Copy, ...] = (),
    ) -> bool:
        """Bind the decision's pods; its copies run first (the job makes no progress, its GPUs
        held, until the last ends: as a share waits in Staging on a member cluster)."""
        bound: list[tuple[str, str, str, int, int]] = []
        unit_broken = False
        for share in jd.shares:
            for leaf, pods in share.domains or ((share.cluster, share.pods),):
                if job.unit_tier and job.unit_pods and pods % job.unit_pods:
                    unit_broken = True
                got = self.fleet.bind(share.cluster, leaf, job.gpu_model, job.gpus_per_pod, pods)
                if got is None:
                    self.fleet.unbind(bound)
                    return False
                bound += got
        running[job.id] = Running(
            job,
            bound,
            list(jd.clusters),
            [(r.a, r.b, r.gbps) for r in jd.reservations],
            start=now,
            resized_at=now,
            work_left=job.duration_s,
            version=self.retired.get(job.id, 0),
            last=now,
            unit_broken=unit_broken,
            width=sum(share.units for share in jd.shares),
        )
        self.copies.start(running[job.id], job, jd.clusters, copies)
        return True

    # -- solver input -----------------------------------------------------------------------
    def _links(self, running: dict[str, Running]) -> tuple[LinkState, ...]:
        reserved: dict[speed.Pair, float] = defaultdict(float)
        for run in running.values():
            for a, b, gbps in run.reservations:
                reserved[speed.pair(a, b)] += gbps
        for p, gbps in self.copies.reserved(running):
            reserved[p] += gbps
        return tuple(
            LinkState(a, b, cap, min(reserved.get((a, b), 0.0), cap))
            for (a, b), cap in sorted(self.capacity.items())
        )

    # -- speed ------------------------------------------------------------------------------
    def _demand(self, running: dict[str, Running]) -> dict[speed.Pair, float]:
        total: dict[speed.Pair, float] = defaultdict(float)
        for run in running.values():
            for p, d in speed.needs(run.job.allreduce_gbps, run.clusters).items():
                total[p] += d
        for p, gbps in self.copies.demand(running):  # staging takes its rate as it copies
            total[p] += gbps
        return dict(total)

    def _advance(
        self, running: dict[str, Running], records: dict[str, JobRecord], now: float
    ) -> None:
        """Bring every running job's progress (and what it sent across clusters) to `now`, at
        the speed it ran, before a round may resize it."""
        for job_id, run in running.items():
            records[job_id].crossing_gbit += run.crossing_gbps * (now - run.last)
            run.work_left -= run.working_s(now) / run.factor
            self.copies.advance(run, now)
            run.last = now

    def _reprice(
        self, running: dict[str, Running], records: dict[str, JobRecord], now: float
    ) -> list[Running]:
        """Recompute every running job's speed (its progress brought to `now` by `_advance`
        before the round); return the jobs whose finish time moved (they get a new finish
        event)."""
        demands = {
            job_id: speed.needs(run.job.allreduce_gbps, run.clusters)
            for job_id, run in running.items()
        }
        granted = speed.grants(demands | self.copies.flows(running), self.capacity)
        moved = self.copies.regrant(running, granted, now)
        for job_id, run in running.items():
            record = records[job_id]
            run.crossing_gbps = 2 * sum(granted[job_id].values())  # both directions
            factor = speed.step_factor(
                comm_share=run.job.comm_share,
                need=demands[job_id],
                got=granted[job_id],
                unit_broken=run.unit_broken,
            )
            record.slowest_factor = max(record.slowest_factor, factor)
            factor *= run.units / max(run.width, 1)  # fewer replicas: proportionally slower
            if factor != run.factor or not run.priced:
                run.factor, run.priced = factor, True
                if run not in moved:
                    run.version += 1
                    moved.append(run)
        return moved
