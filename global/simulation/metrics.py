"""What a simulated run achieved, and the fluid lower bounds no policy can beat.

Bounds, over the jobs the policy finished (the ones its averages are over): a job finishes no
sooner than its full-speed duration after it arrives, so the average JCT is at least the
average duration; the makespan is at least the last arrival-plus-duration after the first
arrival, and at least the total GPU-time divided by the GPUs there are (the fluid bound). A
policy "beating" either means the simulator is broken.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

from volcano_global.simulation.engine import SimResult
from volcano_global.simulation.workload import TraceJob

SIZE_CLASSES = [
    (1, 1, "1"),
    (2, 8, "2-8"),
    (9, 64, "9-64"),
    (65, 256, "65-256"),
    (257, None, ">256"),
]


@dataclass(frozen=True)
class Summary:
    policy: str
    jobs: int
    finished: int
    avg_jct_s: float
    p99_jct_s: float
    makespan_s: float
    avg_jct_bound_s: float
    makespan_bound_s: float
    gpu_allocation: float  # time-weighted allocated / total GPUs over the run
    queueing_by_size: dict[str, float]  # mean start - arrival (s) per GPU-count class
    split_jobs: int
    slowed_jobs: int  # ran slower than full speed (bandwidth or topology)
    crossing_tb: float  # data sent across cluster boundaries (terabytes)
    link_utilisation: dict[str, float]  # time-weighted granted / capacity per link
    oversubscribed_s: float  # time some link's split jobs needed more than its capacity
    rounds: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def summarise(result: SimResult) -> Summary:
    records = result.records
    done = [r for r in records if r.finish is not None and r.start is not None]
    jcts = sorted(r.finish - r.job.arrival_s for r in done)  # type: ignore[operator]
    first = min((r.job.arrival_s for r in records), default=0.0)
    last = max((r.finish for r in done), default=first)  # type: ignore[type-var]
    queueing: dict[str, list[float]] = {label: [] for *_, label in SIZE_CLASSES}
    for r in done:
        queueing[size_class(r.job.gpus)].append(r.start - r.job.arrival_s)  # type: ignore[operator]
    utilisation, oversubscribed = link_use(result)
    return Summary(
        policy=result.policy,
        jobs=len(records),
        finished=len(done),
        avg_jct_s=sum(jcts) / len(jcts) if jcts else math.nan,
        p99_jct_s=jcts[max(math.ceil(0.99 * len(jcts)) - 1, 0)] if jcts else math.nan,
        makespan_s=last - first,
        avg_jct_bound_s=sum(r.job.duration_s for r in done) / max(len(done), 1),
        makespan_bound_s=makespan_bound(result, [r.job for r in done]),
        gpu_allocation=allocation(result),
        queueing_by_size={k: (sum(v) / len(v) if v else math.nan) for k, v in queueing.items()},
        split_jobs=sum(1 for r in done if len(r.clusters) > 1),
        slowed_jobs=sum(1 for r in done if r.slowest_factor > 1.0 + 1e-9),
        crossing_tb=sum(r.crossing_gbit for r in records) / 8 / 1000,
        link_utilisation=utilisation,
        oversubscribed_s=oversubscribed,
        rounds=result.rounds,
    )


def makespan_bound(result: SimResult, jobs: list[TraceJob]) -> float:
    if not jobs:
        return 0.0
    first = min(j.arrival_s for j in jobs)
    chain = max(j.arrival_s + j.duration_s for j in jobs) - first
    fluid = sum(j.gpus * j.duration_s for j in jobs) / max(result.capacity_gpus, 1)
    return max(chain, fluid)


def size_class(gpus: int) -> str:
    for low, high, label in SIZE_CLASSES:
        if gpus >= low and (high is None or gpus <= high):
            return label
    return SIZE_CLASSES[-1][2]


def intervals(result: SimResult):  # type: ignore[no-untyped-def]
    samples = result.timeline
    for here, after in itertools.pairwise(samples):
        yield here, after.time - here.time


def allocation(result: SimResult) -> float:
    """Time-weighted share of the GPUs allocated over the run."""
    total = busy = 0.0
    for sample, length in intervals(result):
        total += length
        busy += sample.allocated_gpus / max(result.capacity_gpus, 1) * length
    return busy / total if total else 0.0


def link_use(result: SimResult) -> tuple[dict[str, float], float]:
    used = {p: 0.0 for p in result.links}
    total = oversubscribed = 0.0
    for sample, length in intervals(result):
        total += length
        over = False
        for p, demand in sample.link_demand.items():
            capacity = result.links.get(p)
            if capacity is None:
                continue
            used[p] += min(demand, capacity) / capacity * length
            over = over or demand > capacity * (1 + 1e-9)
        if over:
            oversubscribed += length
    return {
        f"{a}<->{b}": (v / total if total else 0.0) for (a, b), v in used.items()
    }, oversubscribed
