"""The solver's input and output: frozen values, no database, no I/O."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from enum import StrEnum
from operator import mul
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from volcano_global.solver.reservations import Hold

_T = TypeVar("_T")


@dataclass(frozen=True)
class Leaf:
    """The lowest topology domain of a cluster (a tier-1 HyperNode) for one GPU model,
    summarised as a histogram: `free_nodes[v]` nodes have exactly `v` free GPUs (ready,
    schedulable nodes only). `path[i]` names the enclosing domain of tier i + 1
    (`path[0]` is the leaf itself); a cluster without HyperNodes has one leaf with `path=()`."""

    gpu_model: str
    free_nodes: tuple[int, ...]
    path: tuple[str, ...] = ()
    node_gpus: int = 0  # GPUs of each of its nodes when known (0: not known)

    @property
    def free_gpus(self) -> int:
        return sum(map(mul, range(len(self.free_nodes)), self.free_nodes))


def evolve(value: _T, **changes: object) -> _T:
    """`dataclasses.replace` for a frozen value without `__post_init__`, at a tenth of its
    cost: a round times every waiting job of the queue (10,000 and more)."""
    new = copy.copy(value)
    for name, item in changes.items():
        if not hasattr(value, name):
            raise TypeError(f"{type(value).__name__} has no field {name!r}")
        object.__setattr__(new, name, item)
    return new


@dataclass(frozen=True)
class ClusterCapacity:
    name: str
    leaves: tuple[Leaf, ...]


@dataclass(frozen=True)
class LinkState:
    """An undirected link; `capacity_gbps` per direction, `reserved_gbps` held by running jobs."""

    a: str
    b: str
    capacity_gbps: float
    reserved_gbps: float = 0.0

    @property
    def free_gbps(self) -> float:
        return max(self.capacity_gbps - self.reserved_gbps, 0.0)

    @property
    def key(self) -> tuple[str, str]:
        return link_key(self.a, self.b)


def link_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class Part:
    """One child Volcano Job of a HyperJob whose children differ (GPU model, pods, GPUs per
    pod, or the clusters they name: Volcano's heterogeneous HyperJob): whole in one cluster
    that has its model and that `allowed_clusters` allows. Its pods are uniform; `unit_pods`
    / `unit_tier` its partitions, `share_tier` its hard `networkTopology` (the child is one
    Volcano Job, so one share in the solver's sense)."""

    name: str  # the child's: `<replicatedJob>-<index>`
    pods: int
    gpus_per_pod: int
    gpu_model: str | None = None
    allowed_clusters: tuple[str, ...] | None = None
    unit_pods: int = 0
    unit_tier: int | None = None
    share_tier: int | None = None

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def shape(self) -> tuple[str | None, int]:
        """What one cluster's share of the job must have alike (one model, one pod size:
        what the shares' books read)."""
        return (self.gpu_model, self.gpus_per_pod)


@dataclass(frozen=True)
class JobRequest:
    """One pending gang. Its pods are uniform (`gpus_per_pod` GPUs of `gpu_model`); they come
    in units of `unit_pods` pods that always stay in one cluster. A splittable job may use up
    to `max_clusters` clusters with at least `min_share_units` units in each.

    `unit_tier`: every unit must fit inside one topology domain of this tier (Volcano
    `partitionPolicy.networkTopology` / a data-parallel replica that must stay under one
    switch). `share_tier`: the whole share in a cluster must fit inside one domain of this tier
    (the job's hard `networkTopology`, which the member cluster's Volcano enforces per share).
    `allreduce_gbps` is V/tau of the traffic model (see `traffic`): gradient bits per step over
    the time budget for communication; 0 when the job declares nothing."""

    id: str
    pods: int
    gpus_per_pod: int
    gpu_model: str | None = None
    unit_pods: int = 0  # 0: the whole job is one unit
    priority: int = 0
    queue: str = "default"
    splittable: bool = False
    max_clusters: int = 1
    min_share_units: int = 1
    unit_tier: int | None = None
    share_tier: int | None = None
    allreduce_gbps: float = 0.0
    allowed_clusters: tuple[str, ...] | None = None
    # For reservations and backfill (planned policies only): a run time it is likely to end
    # within (the user's runningEstimate, else from what jobs of its size ran: `durations`),
    # and whether it has waited long enough to be owed a reservation.
    estimate_s: float | None = None
    due: bool = False
    # Elastic data-parallel width (planned policies): the job may start with as few as
    # `min_units` of its units (0: all of them, a rigid gang).
    min_units: int = 0
    # What it may evict for when it cannot be placed (`preemption`): "preempt" (lower
    # priorities; its class says preemptionPolicy: PreemptLowerPriority) and "reclaim" (queues
    # above their deserved share); empty for a class with preemptionPolicy: Never.
    may_evict_for: frozenset[str] = frozenset()
    # What a running elastic job could add (`planning.growth`), under the running job's id;
    # never a waiting job.
    grows: bool = False
    # GPU-seconds its earlier runs received (a requeued job's attained service): time-sharing
    # (`timesharing`) demotes only a running gang that received more than the job it yields to.
    served_gpu_s: float = 0.0
    # A HyperJob whose children differ (`Part`), placed child by child, all or none
    # (`parts.place_parted`, step 5c of a round), never by the model: its `pods` is then 1 and
    # `gpus_per_pod` its GPUs in all (what ordering and quotas read).
    parts: tuple[Part, ...] = ()

    @property
    def elastic(self) -> bool:
        return 0 < self.min_units < self.units

    @property
    def fewest_units(self) -> int:
        return self.min_units if self.elastic else self.units

    @property
    def unit(self) -> int:
        return self.unit_pods or self.pods

    @property
    def units(self) -> int:
        return self.pods // self.unit

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def unit_gpus(self) -> int:
        return self.unit * self.gpus_per_pod

    @property
    def cluster_limit(self) -> int:
        return max(1, min(self.max_clusters, self.units)) if self.splittable else 1


@dataclass(frozen=True)
class QueueState:
    name: str
    quota_gpus: int | None = None
    used_gpus: int = 0


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling round sees. `jobs` come in queue order (priority, fair share,
    submission time); the solver considers a window of the first ones."""

    clusters: tuple[ClusterCapacity, ...]
    links: tuple[LinkState, ...] = ()
    jobs: tuple[JobRequest, ...] = ()
    queues: tuple[QueueState, ...] = ()
    running: tuple[RunningJob, ...] = ()


class Policy(StrEnum):
    CPSAT = "cpsat"  # the product: optimal split under bandwidth, gang and topology constraints
    FIRST_FIT = "first-fit"  # whole job, first cluster that fits (Kueue MultiKueue)
    PROPORTIONAL = "proportional"  # split by free capacity, no gang, no links (Karmada)
    GREEDY = "greedy"  # bandwidth-aware greedy splitter
    # The greedy splitter with CP-SAT's order, reservations and backfill: what the optimiser
    # adds over a heuristic given the same plan (an ablation, and a fallback).
    BACKFILL = "backfill"

    @property
    def planned(self) -> bool:
        """Whether the round orders short work first and reserves for waiting gangs."""
        return self in (Policy.CPSAT, Policy.BACKFILL)


@dataclass(frozen=True)
class SolveOptions:
    time_limit_s: float = 1.0  # for the whole round (warm start, search, packing)
    # CP-SAT's deterministic work limit; set (the simulator does) to make a seed reproduce the
    # same decisions on any machine, with time_limit_s only as a safety net.
    deterministic_time: float | None = None
    window: int = 200
    workers: int = 1  # deterministic; on 2 cores a second worker cost more than it found
    seed: int = 0
    priority_factor: int = 4  # weight of one priority level over the level below
    candidates_per_job: int = 8  # clusters the model considers per job
    max_holds: int = 2  # reservations per round (planned policies), one job each


@dataclass(frozen=True)
class Share:
    """A job's part in one cluster: `units` units, i.e. `pods` pods; `domains` maps the
    topology domain (or leaf) each pod group went to -> pods. `gpu_model`: the model of its
    GPUs - the job's, the one `packing.pack_job` chose for a job that names none, or a
    HyperJob whose children differ its children's (`parts.py`); None: the job's."""

    cluster: str
    units: int
    pods: int
    gpus: int
    domains: tuple[tuple[str, int], ...] = ()
    gpu_model: str | None = None


@dataclass(frozen=True)
class LinkBandwidth:
    """Bandwidth a decision reserves on the link between clusters a and b."""

    a: str
    b: str
    gbps: float


@dataclass(frozen=True)
class RunningJob:
    """A job that holds capacity now: its GPUs per (cluster, model), the link bandwidth it
    reserved, and when it is expected to end (seconds from the round; an estimate)."""

    id: str
    gpus: tuple[tuple[str, str, int], ...]
    links: tuple[LinkBandwidth, ...] = ()
    ends_in_s: float = 0.0
    # For preemption and reclaim (`preemption`): what it is, how long it has run, how much
    # work an eviction would lose (seconds since its start or last checkpoint), and where its
    # pods are: (cluster, leaf domain, model - "" for the leaf's own - pods, GPUs per pod).
    priority: int = 0
    queue: str = "default"
    preemptable: bool = True  # False: annotated volcano.sh/preemptable: "false"
    run_s: float = 0.0
    lost_s: float = 0.0
    pods: tuple[tuple[str, str, str, int, int], ...] = ()
    name: str = ""  # for reasons and events (namespace/name)
    # Seconds its newest checkpoint takes to reach another cluster: an evicted job that
    # cannot come back at once restores elsewhere, so an eviction costs that too.
    restore_s: float = 0.0
    # GPU-seconds received over all its runs, this one included (`timesharing`).
    attained_gpu_s: float = 0.0

    @property
    def total_gpus(self) -> int:
        return sum(g for _, _, g in self.gpus)


@dataclass(frozen=True)
class JobDecision:
    job_id: str
    admitted: bool
    shares: tuple[Share, ...] = ()
    reservations: tuple[LinkBandwidth, ...] = ()
    reason: str | None = None

    @property
    def clusters(self) -> tuple[str, ...]:
        return tuple(s.cluster for s in self.shares)


@dataclass(frozen=True)
class Decision:
    """`objective`: priority-weighted admitted GPUs of the answer (the primary objective);
    `bound`: CP-SAT's proven upper bound on it (for heuristics, the objective itself)."""

    policy: Policy
    status: str
    jobs: tuple[JobDecision, ...]
    objective: float = 0.0
    bound: float = 0.0
    solve_seconds: float = 0.0
    link_load: tuple[tuple[str, str, float], ...] = field(default=())
    reserved: tuple[tuple[str, str], ...] = ()  # (job id, the reservation it holds, in words)
    reserved_in_s: tuple[tuple[str, float], ...] = ()  # (job id, seconds until its hold starts)
    # The holds themselves (planned policies): what backfill beyond the window must respect.
    holds: tuple[Hold, ...] = field(default=(), compare=False)

    @property
    def gap(self) -> float:
        """Relative distance between the answer and the proven bound (0 = proven optimal;
        NaN when the search proved no bound in time)."""
        if self.status == "HEURISTIC":
            return 0.0 if self.bound <= self.objective else math.nan
        if not math.isfinite(self.bound):
            return math.nan
        if self.bound <= 0:
            return 0.0
        return max(self.bound - self.objective, 0.0) / self.bound

    @property
    def admitted(self) -> tuple[JobDecision, ...]:
        return tuple(j for j in self.jobs if j.admitted)

    def job(self, job_id: str) -> JobDecision:
        return next(j for j in self.jobs if j.job_id == job_id)
