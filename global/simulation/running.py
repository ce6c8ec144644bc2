"""A job while it runs in the simulator (its pods on nodes, its clusters and link bandwidth,
its work left and speed), a trace job as the solver's request, and the simulator's clock as
the datetimes the queue order sorts by."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from volcano_global.simulation.nodes import Bound
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import JobRequest
from volcano_global.solver.copies import Copy
from volcano_global.solver.preemption import may_evict_for

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Running:
    job: TraceJob
    bound: list[Bound]
    clusters: list[str]
    reservations: list[tuple[str, str, float]]
    start: float
    work_left: float  # seconds of full-speed work
    factor: float = 1.0
    last: float = 0.0
    version: int = 0
    unit_broken: bool = False
    crossing_gbps: float = 0.0  # what it sends across cluster boundaries now
    width: int = 0  # units (data-parallel replicas) running: fewer than all for an elastic job
    shrinks: int = 0  # times it gave units back
    priced: bool = False  # given its first finish event
    resized_at: float = 0.0  # its start, or its last resize
    stalled_until: float = 0.0  # restarting after its last resize: no progress before this
    copies: tuple[Copy, ...] = ()  # its staging, while it runs (their rates held on links)
    staged_at: float = 0.0  # when its last copy ends
    # Copies not reserved on links (`DataOptions.reserve` off): bits left, and rate now.
    copy_bits: list[float] = field(default_factory=list)
    copy_gbps: list[float] = field(default_factory=list)

    def working_s(self, now: float) -> float:
        """Seconds since `last` in which it made progress: not those of its restart."""
        stalled = max(min(now, self.stalled_until) - max(self.last, self.resized_at), 0.0)
        return now - self.last - stalled

    @property
    def units(self) -> int:
        return self.job.pods // (self.job.unit_pods or self.job.pods)

    @property
    def growable(self) -> int:
        """Units an elastic job could still add (0 for a rigid one)."""
        return self.units - self.width if self.job.min_units else 0


def request(job: TraceJob, *, elastic: bool = False, served_gpu_s: float = 0.0) -> JobRequest:
    """`elastic`: the job's width range counts (the planned policies; the baselines, as Kueue
    and Karmada, place every gang whole). `served_gpu_s`: what its earlier runs received."""
    return JobRequest(
        job.id,
        pods=job.pods,
        gpus_per_pod=job.gpus_per_pod,
        gpu_model=job.gpu_model,
        unit_pods=job.unit_pods,
        priority=job.priority,
        queue=job.queue,
        splittable=job.splittable,
        max_clusters=job.max_clusters,
        unit_tier=job.unit_tier,
        allreduce_gbps=job.allreduce_gbps,
        min_units=job.min_units if elastic else 0,
        may_evict_for=may_evict_for(job.preemption_policy),
        served_gpu_s=served_gpu_s,
    )


def stamp(seconds: float) -> datetime:
    """Arrival as the datetime fair_order sorts by (submission time)."""
    return EPOCH + timedelta(seconds=seconds)
