"""Policies judged against each other over the same jobs.

A per-policy average over "the jobs this policy finished" flatters a policy that leaves the hard
jobs waiting, and one over "the jobs every policy finished" drops exactly the jobs only a
splitter can run. So here every job counts that can be run at all without oversubscribing a
link (`never_placeable`: not even on the empty fleet; they are counted apart, with the reason,
`SimResult.left_out`): one a policy never finished is charged until the common horizon, the
last finish of any policy (or the last arrival), the same instant for every policy. That is a
lower bound on its true completion time, so it still favours the policy that could not run it,
but no longer by more than the others' extra work: charging each policy only to its own last
finish let a policy that left the large jobs waiting show an average below the bound.
Allocation while backlog counts the intervals in
which some job that every policy eventually started was waiting (a job one policy leaves
waiting for hours while the fleet idles is then not everyone's backlog).

Bounds no policy can beat, over all jobs: each job finishes no sooner than its full-speed
duration after it arrives; and the fleet does at most `capacity` GPU-seconds of work per second,
so a single machine of that speed running preemptive shortest-remaining-work-first on the jobs'
areas (GPUs x duration), which is optimal for the total completion time on it, finishes every
job set no later in total than any real schedule ("fluid SRPT").
"""

from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass

from volcano_global.simulation.engine import SimResult
from volcano_global.simulation.metrics import SIZE_CLASSES, intervals, link_use, size_class
from volcano_global.simulation.workload import TraceJob

SMALL_GPUS = 8  # "small jobs" for the no-regression check (p99 JCT)


@dataclass(frozen=True)
class Judged:
    policy: str
    jobs: int  # judged: every job but the never placeable
    never_placeable: int
    finished: int
    avg_jct_s: float  # every job; an unfinished one charged until the common horizon
    avg_jct_common_s: float  # the jobs every policy finished
    jct_by_size: dict[str, float]  # average JCT per size class (every job)
    p99_small_jct_s: float  # jobs of SMALL_GPUS or fewer that every policy finished
    large_jobs: int  # gangs of half an average cluster or more
    large_avg_jct_s: float
    large_wait_p95_s: float
    large_wait_max_s: float
    splitter_only_jobs: int  # larger than any one cluster
    splitter_only_finished: int
    splitter_only_avg_jct_s: float
    allocation_backlog: float  # while a job every policy started was waiting
    oversubscribed_s: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Bounds:
    avg_jct_duration_s: float  # average full-speed duration
    avg_jct_fluid_s: float  # fluid SRPT on the fleet's total GPUs

    @property
    def avg_jct_s(self) -> float:
        return max(self.avg_jct_duration_s, self.avg_jct_fluid_s)


def judge(results: list[SimResult]) -> list[Judged]:
    if not results:
        return []
    excluded = results[0].never_placeable
    jobs = [r.job for r in results[0].records if r.job.id not in excluded]
    judged = {j.id for j in jobs}
    finished = [{r.job.id for r in res.records if r.finish is not None} & judged for res in results]
    started = [{r.job.id for r in res.records if r.start is not None} & judged for res in results]
    common = set.intersection(*finished)
    everyone_started = set.intersection(*started)
    first = results[0]
    biggest = max(first.cluster_gpus.values(), default=0)
    large = {j.id for j in jobs if is_large(first, j)}
    splitter_only = {j.id for j in jobs if j.gpus > biggest}
    horizon = max(_horizon(res) for res in results)
    out = []
    for res in results:
        records = [r for r in res.records if r.job.id in judged]
        jct = {r.job.id: _or(r.finish, horizon) - r.job.arrival_s for r in records}
        wait = {r.job.id: _or(r.start, horizon) - r.job.arrival_s for r in records}
        by_size: dict[str, list[float]] = {label: [] for *_, label in SIZE_CLASSES}
        for job in jobs:
            by_size[size_class(job.gpus)].append(jct[job.id])
        small = sorted(jct[j.id] for j in jobs if j.gpus <= SMALL_GPUS and j.id in common)
        large_waits = sorted(wait[j] for j in large)
        out.append(
            Judged(
                policy=res.policy,
                jobs=len(jobs),
                never_placeable=len(excluded),
                finished=len(finished[len(out)]),
                avg_jct_s=_mean(jct.values()),
                avg_jct_common_s=_mean(jct[j] for j in common),
                jct_by_size={k: _mean(v) for k, v in by_size.items()},
                p99_small_jct_s=_quantile(small, 0.99),
                large_jobs=len(large),
                large_avg_jct_s=_mean(jct[j] for j in large),
                large_wait_p95_s=_quantile(large_waits, 0.95),
                large_wait_max_s=large_waits[-1] if large_waits else math.nan,
                splitter_only_jobs=len(splitter_only),
                splitter_only_finished=len(splitter_only & finished[len(out)]),
                splitter_only_avg_jct_s=_mean(jct[j] for j in splitter_only),
                allocation_backlog=backlog_allocation(res, everyone_started),
                oversubscribed_s=link_use(res)[1],
            )
        )
    return out


def verdict(judged: list[Judged]) -> str:
    """One line: the policy that finished the most jobs, then the lowest average JCT over the
    same jobs; ties named as ties."""
    if not judged:
        return "Verdict: no policy ran."
    best = max(judged, key=lambda j: (j.finished, -_or_inf(j.avg_jct_s)))
    tied = [
        j.policy for j in judged if (j.finished, j.avg_jct_s) == (best.finished, best.avg_jct_s)
    ]
    if len(tied) > 1:
        return (
            f"Verdict: {' and '.join(tied)} tie ({best.finished}/{best.jobs} finished, "
            f"average JCT {_seconds(best.avg_jct_s)} over the same jobs)."
        )
    others = [j for j in judged if j is not best]
    versus = "; ".join(f"{j.policy} {j.finished}/{j.jobs}, {_seconds(j.avg_jct_s)}" for j in others)
    return (
        f"Verdict: {best.policy} is best on these jobs: {best.finished}/{best.jobs} finished, "
        f"average JCT {_seconds(best.avg_jct_s)}" + (f" (vs {versus})." if versus else ".")
    )


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f} s"


def _or_inf(value: float) -> float:
    return math.inf if math.isnan(value) else value


def is_large(result: SimResult, job: TraceJob) -> bool:
    """A gang of half an average cluster or more."""
    return job.gpus >= result.capacity_gpus / max(len(result.cluster_gpus), 1) / 2


def bounds(result: SimResult, *, large: bool = False) -> Bounds:
    """Over the jobs `judge` judges (any policy's result of the trace will do); `large`: over
    its large gangs alone (a bound on their average too: the other jobs only take capacity
    from them)."""
    jobs = [r.job for r in result.records if r.job.id not in result.never_placeable]
    if large:
        jobs = [j for j in jobs if is_large(result, j)]
    capacity_gpus = result.capacity_gpus
    return Bounds(
        avg_jct_duration_s=_mean(j.duration_s for j in jobs),
        avg_jct_fluid_s=fluid_srpt_avg_jct(jobs, capacity_gpus),
    )


def fluid_srpt_avg_jct(jobs: list[TraceJob], capacity_gpus: int) -> float:
    """Average completion time minus arrival of preemptive SRPT on one machine that does
    `capacity_gpus` GPU-seconds of work per second, each job's work its GPUs x duration."""
    if not jobs or capacity_gpus <= 0:
        return math.nan
    arrivals = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
    left: list[tuple[float, int]] = []  # (remaining seconds on the machine, index)
    total, now, i = 0.0, arrivals[0].arrival_s, 0
    while i < len(arrivals) or left:
        if not left:
            now = max(now, arrivals[i].arrival_s)
        while i < len(arrivals) and arrivals[i].arrival_s <= now:
            job = arrivals[i]
            heapq.heappush(left, (max(job.gpus, 1) * job.duration_s / capacity_gpus, i))
            i += 1
        remaining, index = heapq.heappop(left)
        until = arrivals[i].arrival_s if i < len(arrivals) else math.inf
        if now + remaining <= until:
            now += remaining
            total += now - arrivals[index].arrival_s
        else:
            heapq.heappush(left, (remaining - (until - now), index))
            now = until
    return total / len(arrivals)


def backlog_allocation(result: SimResult, jobs: set[str]) -> float:
    """Time-weighted share of GPUs allocated while some job of `jobs` was waiting."""
    time = busy = 0.0
    for sample, length in intervals(result):
        if any(job in jobs for job in sample.pending):
            time += length
            busy += sample.allocated_gpus / max(result.capacity_gpus, 1) * length
    return busy / time if time else math.nan


def _horizon(result: SimResult) -> float:
    ends = [r.finish for r in result.records if r.finish is not None]
    ends += [r.job.arrival_s for r in result.records]
    return max(ends, default=0.0)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _mean(values) -> float:  # type: ignore[no-untyped-def]
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)] if ordered else math.nan
