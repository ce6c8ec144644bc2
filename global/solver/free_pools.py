"""What is free while a round's evictions are chosen (`preemption.preempt`, `timesharing`):
the snapshot less the round's admitted jobs (`remaining`, `after`), and the pools a trial
eviction gives victims' pods back to and rolls back from (`FreePools`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property

from volcano_global.solver.baselines import (
    eligible_clusters,
    place_greedily,
    placed_reading_links,
    placement_key,
)
from volcano_global.solver.capacity import ClusterPool
from volcano_global.solver.model import (
    ClusterCapacity,
    Decision,
    JobDecision,
    JobRequest,
    RunningJob,
    Snapshot,
    link_key,
)
from volcano_global.solver.packing import Pools, pools_of


@dataclass
class Asked:
    """Answers given while the pools and the running jobs stay as they are (between two of
    a round's evictions: every trial rolls back), by the question: `FreePools.fits_without`'s
    by the job's `placement_key` and the victims' ids, `preemption.expected_wait`'s by the
    key and the running jobs' ids. Only answers that read no link are kept: those are the
    same for any job of that key (two preemptors of one shape differ in their
    `allreduce_gbps`, which only a split reads)."""

    placements: dict[tuple[object, ...], JobDecision | None] = field(default_factory=dict)
    waits: dict[tuple[object, ...], float] = field(default_factory=dict)


class FreePools:
    """What is free while a round's evictions are chosen: one pool per cluster, built once.
    A trial (`fits_without`: victims' pods given back, the job placed) is rolled back after
    it; `take` keeps its changes. The same answers as placing on `pools_of(without(state,
    victims))` (`ClusterPool.give_back` is `planning.freed`'s rule), without building every
    cluster's pool for every trial (a round tries hundreds of victim sets on a fleet of tens
    of thousands of leaves). A trial gives back only in the clusters the job may use: the
    placement reads no other."""

    def __init__(self, clusters: tuple[ClusterCapacity, ...], pools: Pools | None = None) -> None:
        self._clusters = clusters
        if pools is not None:  # the caller's, in the state `clusters` describes
            self.pools = pools

    @cached_property
    def pools(self) -> Pools:
        """Built when a preemptor is first weighed: most rounds have none."""
        return pools_of(self._clusters)

    def fits_without(
        self,
        job: JobRequest,
        victims: list[RunningJob] | tuple[RunningJob, ...],
        links: dict[tuple[str, str], float],
        asked: Asked | None = None,
    ) -> JobDecision | None:
        """Where the job would go with the victims gone (None: nowhere); nothing kept. With
        `asked`, an answer that read no link is given again to a job of the same
        `placement_key` with the same victims (`Asked`)."""
        key = (placement_key(job), tuple(v.id for v in victims))
        if asked is not None and key in asked.placements:
            known = asked.placements[key]
            return None if known is None else replace(known, job_id=job.id)
        marks = self.mark()
        try:
            self.give_back(victims, self.usable(job))
            placed, reads = placed_reading_links(job, self.pools, with_links_of(links, victims))
        finally:
            self.rollback(marks)
        if asked is not None and not reads:
            asked.placements[key] = placed
        return placed

    def take(
        self,
        job: JobRequest,
        victims: tuple[RunningJob, ...],
        links: dict[tuple[str, str], float],
    ) -> JobDecision | None:
        """The victims gone and the job placed, for good; `links` must already count the
        victims' bandwidth as free."""
        self.give_back(victims, self.pools.keys())
        return place_greedily(job, self.pools, links)

    def usable(self, job: JobRequest) -> set[str]:
        """The clusters the job may use (`baselines.eligible_clusters`: the same while the
        pools change)."""
        return set(eligible_clusters(job, self.pools))

    def give_back(self, victims: Iterable[RunningJob], clusters: Collection[str]) -> None:
        """The victims' pods given back in these clusters (the others' left as they are)."""
        pods: dict[str, list[tuple[str, str, int, int]]] = {}
        for v in victims:
            for cluster, leaf, model, count, per_pod in v.pods:
                if cluster in clusters:
                    pods.setdefault(cluster, []).append((leaf, model, count, per_pod))
        for cluster, given in pods.items():
            self.pools[cluster].give_back(given)

    def mark(self) -> list[tuple[ClusterPool, int]]:
        return [(pool, pool.mark()) for pool in self.pools.values()]

    def rollback(self, marks: list[tuple[ClusterPool, int]]) -> None:
        for pool, mark in marks:
            pool.rollback(mark)


def with_links_of(
    links: dict[tuple[str, str], float], victims: list[RunningJob] | tuple[RunningJob, ...]
) -> dict[tuple[str, str], float]:
    """The links' free bandwidth with what the victims reserved given back."""
    free = dict(links)
    for v in victims:
        for b in v.links:
            free[link_key(b.a, b.b)] = free.get(link_key(b.a, b.b), 0.0) + b.gbps
    return free


def remaining(snapshot: Snapshot, decision: Decision, more: Iterable[JobRequest] = ()) -> Snapshot:
    """The snapshot with what the decision's admitted jobs take out of its clusters (their
    shares' pods, per leaf domain) and links: what `preempt` starts from. `more`: admitted
    jobs that are not in the snapshot (beyond the round's window)."""
    pools, taken = after(snapshot, decision, more)
    return replace(
        snapshot,
        clusters=tuple(pools[c.name].state() for c in snapshot.clusters),
        links=tuple(
            replace(x, reserved_gbps=x.reserved_gbps + taken.get(x.key, 0.0))
            for x in snapshot.links
        ),
    )


def after(
    snapshot: Snapshot, decision: Decision, more: Iterable[JobRequest] = ()
) -> tuple[dict[str, ClusterPool], dict[tuple[str, str], float]]:
    """The clusters' pools less the decision's admitted shares, and the bandwidth its
    admitted jobs reserve per link."""
    pools = {c.name: ClusterPool(c) for c in snapshot.clusters}
    models = {j.id: j.gpu_model for j in (*snapshot.jobs, *more)}
    for d in decision.jobs:
        if not d.admitted:
            continue
        for share in d.shares:
            pool = pools.get(share.cluster)
            per_pod = share.gpus // share.pods if share.pods else 0
            if pool is None or per_pod == 0:
                continue
            model = share.gpu_model or models.get(d.job_id)
            for leaf, pods in share.domains:
                pool.take_from_leaf(leaf, model, per_pod, pods)
    return pools, reserved(decision)


def reserved(decision: Decision) -> dict[tuple[str, str], float]:
    """The bandwidth the decision's admitted jobs reserve per link."""
    taken: dict[tuple[str, str], float] = {}
    for d in decision.admitted:
        for r in d.reservations:
            taken[link_key(r.a, r.b)] = taken.get(link_key(r.a, r.b), 0.0) + r.gbps
    return taken


def replays_alike(decision: Decision, pools: Pools) -> bool:
    """Whether `pools`, the ones the decision's admitted shares were packed into (the solve's,
    in its packing order), hold what `after` replaying them in decision order would. Every
    leaf taken from must be the only one of its name in its cluster (`after` finds it by
    name). A leaf that takes pods of one size holds the same in any order: `_take_from` fills
    the nodes with the fewest free GPUs first, so taking p pods then q leaves what taking
    p + q does. Takes of different sizes need not commute (nodes with 4 and 6 free: a 2-GPU
    pod then a 4-GPU one leave 2 and 2, the other order 0 and 4): such a leaf (a few dozen of
    a round's hundreds) is replayed alone, in decision order, and compared."""
    takes: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for d in decision.admitted:
        for share in d.shares:
            per_pod = share.gpus // share.pods if share.pods else 0
            if per_pod == 0:
                continue
            if share.cluster not in pools:
                return False
            for leaf, pods in share.domains:
                takes.setdefault((share.cluster, leaf), []).append((per_pod, pods))
    for (cluster, leaf), done in takes.items():
        pool = pools[cluster]
        if not pool.only_leaf_named(leaf):
            return False
        if len({size for size, _ in done}) > 1 and not pool.replays_to(leaf, done):
            return False
    return True
