"""A round's plan, computed the same way by the server's scheduling loop and the simulator: the
order of the waiting jobs and what the solver is told about time (how long a waiting job is
expected to run, whether it is owed a reservation, when running jobs are expected to end).

Without a planned policy (the baselines, as Kueue MultiKueue and Karmada order work) the order
is priority, fair share, submission time, and nothing about time is passed on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import combinations

from volcano_global.solver.capacity import give_to
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.fair_share import QueueNode
from volcano_global.solver.model import (
    ClusterCapacity,
    JobDecision,
    JobRequest,
    LinkBandwidth,
    LinkState,
    Policy,
    RunningJob,
    evolve,
    link_key,
)
from volcano_global.solver.queue_order import Candidate, fair_order
from volcano_global.solver.traffic import pair_demand_gbps

RESERVE_AFTER_S = 1800.0  # waited this long: owed a reservation, first in its queue


def waiting(
    key: str,
    *,
    queue: str,
    priority: int,
    gpus: int,
    submitted_at: datetime,
    estimate_s: float | None,
    now: datetime,
    durations: DurationModel,
    reserve_after_s: float = RESERVE_AFTER_S,
    level: float = 0.0,
) -> Candidate:
    """`level`: the GPU-seconds a job of a time-sharing queue already received (else 0)."""
    return Candidate(
        key,
        queue,
        priority,
        gpus,
        submitted_at,
        service=durations.service(gpus, estimate_s),
        due=(now - submitted_at).total_seconds() >= reserve_after_s,
        level=level,
    )


def order(
    policy: Policy,
    jobs: list[Candidate],
    *,
    held: dict[str, int],
    weights: dict[str, int],
    tree: Mapping[str, QueueNode] | None = None,
) -> list[Candidate]:
    return fair_order(jobs, held=held, weights=weights, by_service=policy.planned, tree=tree)


def with_time(
    policy: Policy,
    request: JobRequest,
    candidate: Candidate,
    estimate_s: float | None,
    durations: DurationModel,
) -> JobRequest:
    if not policy.planned:
        return request
    return evolve(
        request, estimate_s=durations.likely_within(request.gpus, estimate_s), due=candidate.due
    )


def running(
    key: str,
    *,
    gpus: tuple[tuple[str, str, int], ...],
    links: tuple[LinkBandwidth, ...],
    started_at: datetime,
    estimate_s: float | None,
    now: datetime,
    durations: DurationModel,
    priority: int = 0,
    queue: str = "default",
    preemptable: bool = True,
    lost_s: float | None = None,
    pods: tuple[tuple[str, str, str, int, int], ...] = (),
    name: str = "",
    restore_s: float = 0.0,
    attained_gpu_s: float | None = None,
) -> RunningJob:
    """`lost_s`: work an eviction would lose (None: all of it since `started_at`);
    `attained_gpu_s`: GPU-seconds over all its runs (None: this run's alone)."""
    elapsed = max((now - started_at).total_seconds(), 0.0)
    total = sum(g for _, _, g in gpus)
    return RunningJob(
        key,
        gpus,
        links,
        ends_in_s=durations.remaining(total, elapsed, estimate_s, queue=queue),
        priority=priority,
        queue=queue,
        preemptable=preemptable,
        run_s=elapsed,
        lost_s=elapsed if lost_s is None else lost_s,
        pods=pods,
        name=name,
        restore_s=restore_s,
        attained_gpu_s=total * elapsed if attained_gpu_s is None else attained_gpu_s,
    )


# -- elastic width --------------------------------------------------------------------------
@dataclass(frozen=True)
class Hysteresis:
    """Resizes worth their restart: a job is resized again only `min_interval_s` after its
    last start or resize, and grows only by at least `min_growth` of its width (and a unit),
    so the fleet does not restart jobs for small gains."""

    min_interval_s: float = 600.0
    min_growth: float = 0.25

    def least_growth(self, width: int) -> int:
        """The fewest units a job of `width` units may grow by."""
        return max(1, math.ceil(self.min_growth * width - 1e-9))


@dataclass(frozen=True)
class ElasticRun:
    """A running elastic job as a round sees it: `request` is the whole job (all its units,
    `min_units` set), `units_in` the units it runs in each cluster now, `since_s` the seconds
    since its last start or resize."""

    request: JobRequest
    units_in: tuple[tuple[str, int], ...]
    estimate_s: float | None = None  # how long it is likely to run on
    since_s: float = math.inf
    preemptable: bool = True  # False: annotated volcano.sh/preemptable: "false"
    # Per cluster: its pods per leaf domain in placement order (what a shrink gives back),
    # and the link bandwidth it reserved.
    domains: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    links: tuple[LinkBandwidth, ...] = ()
    gpu_model: str = ""  # the model it runs on ("": the request's)

    @property
    def width(self) -> int:
        return sum(units for _, units in self.units_in)

    @property
    def growable(self) -> int:
        return self.request.units - self.width

    @property
    def spare(self) -> int:
        """Units above its minimum width: what it may give back."""
        return max(self.width - self.request.fewest_units, 0)

    def given_back(self, cut: Shrink) -> list[tuple[str, str, str, int, int]]:
        """The pods a shrink gives back, the last placed first: (cluster, leaf, model, pods,
        GPUs per pod)."""
        request = self.request
        there = dict(self.domains).get(cut.cluster, ())
        return [
            (
                cut.cluster,
                leaf,
                self.gpu_model or request.gpu_model or "",
                count,
                request.gpus_per_pod,
            )
            for leaf, count in taken_back(list(there), cut.units * request.unit)
        ]


@dataclass(frozen=True)
class Shrink:
    """`units` units an elastic job gives back in `cluster`, for `beneficiary`."""

    job_id: str
    cluster: str
    units: int
    beneficiary: str


def growth(
    runs: list[ElasticRun],
    *,
    lowest_priority: int | None,
    widen: bool = True,
    hysteresis: Hysteresis | None = None,
) -> list[JobRequest]:
    """What elastic running jobs could add, as requests after every waiting job and at the
    lowest priority among them: only a job whose last start or resize is `hysteresis`'s
    interval ago, by at least its least growth. With `widen`, a job that may split may grow
    into clusters it does not run in yet (up to its cluster limit); `grown_links` then keeps
    only growth whose new set of clusters is link-safe, and gives the bandwidth that set
    reserves. The rounds pass `widen` only while no waiting job is owed a reservation: the
    links a reservation holds for a split are not in what `grown_links` sees, and a grown job
    keeps its bandwidth until it ends."""
    hysteresis = hysteresis or Hysteresis()
    out = []
    for run in runs:
        least = hysteresis.least_growth(run.width)
        if (
            not run.request.elastic
            or run.growable < least
            or run.since_s < hysteresis.min_interval_s
        ):
            continue
        job, clusters = run.request, tuple(c for c, _ in run.units_in)
        wider = widen and job.splittable and job.cluster_limit > len(clusters)
        priority = job.priority if lowest_priority is None else min(lowest_priority, job.priority)
        out.append(
            replace(
                job,
                grows=True,
                pods=run.growable * job.unit,
                unit_pods=job.unit_pods,
                priority=priority,
                splittable=wider or len(clusters) > 1,
                max_clusters=job.cluster_limit if wider else len(clusters),
                min_share_units=1,
                allowed_clusters=None if wider else clusters,
                allreduce_gbps=0.0,  # the bandwidth of the grown set: grown_links
                estimate_s=run.estimate_s,
                due=False,
                min_units=least if least < run.growable else 0,
                may_evict_for=frozenset(),  # growth never evicts
            )
        )
    return out


def grown_links(
    decisions: tuple[JobDecision, ...],
    runs: list[ElasticRun],
    links: tuple[LinkState, ...],
    held: dict[str, tuple[LinkBandwidth, ...]],
) -> dict[str, tuple[LinkBandwidth, ...] | None]:
    """For each growth the solver admitted (by the running job's id): the link bandwidth the
    job reserves once grown, or None when its growth is refused. Growth in the clusters it
    runs in keeps what it holds; growth into new clusters needs, for the whole new set of k
    clusters, demand(k) on every pair (`traffic.pair_demand_gbps`: less per pair than before,
    more pairs), from what is free plus what the job itself held; a new cluster's share must
    hold the job's minimum share, and the set its cluster limit. In decision order: an earlier
    growth's bandwidth is not free for a later one."""
    free = {link.key: link.free_gbps for link in links}
    by_id = {run.request.id: run for run in runs}
    out: dict[str, tuple[LinkBandwidth, ...] | None] = {}
    for d in decisions:
        key = d.job_id
        if not d.admitted or key not in by_id:
            continue
        run = by_id[key]
        job, old = run.request, [c for c, _ in run.units_in]
        union = old + [c for c in d.clusters if c not in old]
        if union == old:
            out[key] = held.get(key, ())
            continue
        added = [s for s in d.shares if s.cluster not in old]
        need = pair_demand_gbps(job.allreduce_gbps, len(union))
        mine = {link_key(b.a, b.b): b.gbps for b in held.get(key, ())}
        pairs = [link_key(a, b) for a, b in combinations(union, 2)]
        safe = (
            len(union) <= job.cluster_limit
            and all(s.units >= job.min_share_units for s in added)
            and all(
                need <= 0 or (p in free and free[p] + mine.get(p, 0.0) >= need - 1e-9)
                for p in pairs
            )
        )
        if not safe:
            out[key] = None
            continue
        for p in pairs:
            if p in free:
                free[p] += mine.get(p, 0.0) - need
        out[key] = tuple(LinkBandwidth(a, b, need) for a, b in pairs if need > 0)
    return out


def taken_back(domains: list[tuple[str, int]], pods: int) -> list[tuple[str, int]]:
    """Which of a share's pods (leaf domain -> pods, in placement order) give back `pods`
    pods: the last placed first."""
    out = []
    for leaf, count in reversed(domains):
        if pods <= 0:
            break
        taken = min(count, pods)
        out.append((leaf, taken))
        pods -= taken
    return out


def freed(
    clusters: tuple[ClusterCapacity, ...], pods: list[tuple[str, str, str, int, int]]
) -> tuple[ClusterCapacity, ...]:
    """The clusters with `pods` given back: (cluster, leaf domain, model - "" for the leaf's
    own - pods, GPUs per pod).
    Which node each pod ran on is not in the aggregate: each frees the node that then has the
    most free GPUs (the best case for the job it was given back for; the solver's packing and
    the member cluster check the real nodes)."""
    by_cluster: dict[str, list[tuple[str, str, int, int]]] = {}
    for cluster, leaf, model, count, per_pod in pods:
        by_cluster.setdefault(cluster, []).append((leaf, model, count, per_pod))
    out = []
    for state in clusters:
        if state.name not in by_cluster:
            out.append(state)  # untouched: no copy of its leaves
            continue
        leaves = list(state.leaves)
        for leaf_name, model, count, per_pod in by_cluster[state.name]:
            for i, leaf in enumerate(leaves):
                name = leaf.path[0] if leaf.path else state.name
                if name != leaf_name or (model and leaf.gpu_model != model):
                    continue
                hist = list(leaf.free_nodes)
                give_to(hist, per_pod, count)
                leaves[i] = replace(leaf, free_nodes=tuple(hist))
                break
        out.append(replace(state, leaves=tuple(leaves)))
    return tuple(out)
