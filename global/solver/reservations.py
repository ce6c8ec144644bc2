"""Reservations and backfill for gangs that have waited (the planned policies).

A due job (it has waited `reserve_after`; `planning`) that does not fit now is owed a hold: a
time `start_in_s` at which, by the running jobs' expected ends, enough GPUs are free for it -
in one cluster, or in a split whose clusters are pairwise linked with the bandwidth it needs
then - and the GPUs (and link bandwidth) it will take there. Its options (`Owed`) are the
earliest such time in each cluster and the earliest split; the heuristic takes the soonest,
CP-SAT chooses among them with what starts now (`cpsat_holds`). Until then other jobs may still use
those GPUs, but only jobs likely to end before `start_in_s` (`JobRequest.estimate_s`: the
user's estimate, else the 75th percentile of what their size class ran), or within the spare:
what will be free at `start_in_s` beyond the hold (EASY backfilling). Holds are recomputed
every round from what is running, so a running job that overruns moves its hold later, and
the hold's job is first in line when its GPUs are free (it is `due`). Two holds of a round
never share a cluster.

Capacity here is in GPUs per (cluster, model), capped by the units the cluster could hold if
all its nodes were free (its domains' shape: a unit of 8 pods that must stay under one ToR
never fits a cluster whose ToRs have fewer than 8 nodes, however many GPUs free up there) when
the size of its nodes is known (`Leaf.node_gpus`: the simulator knows it, the server reads it
from its nodes when all of a leaf's nodes have the same GPUs; a leaf of mixed sizes, no cap).
Which nodes are free is the packer's affair when the hold's job starts.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field, replace

from volcano_global.solver.capacity import ClusterPool, job_models
from volcano_global.solver.model import ClusterCapacity, JobRequest, Snapshot, link_key
from volcano_global.solver.splitting import split_units
from volcano_global.solver.traffic import pair_demand_gbps

Key = tuple[str, str]  # (cluster, model)


@dataclass(frozen=True)
class Hold:
    job_id: str
    start_in_s: float
    gpus: dict[Key, int]  # held for the job from start_in_s
    spare: dict[Key, int]  # free at start_in_s beyond the hold: room for jobs that outlast it
    link_spare: dict[tuple[str, str], float] = field(default_factory=dict)

    def binds(self, job: JobRequest) -> bool:
        """Whether the job, started now, would still run at the hold's start."""
        if job.id == self.job_id:
            return False
        return job.estimate_s is None or job.estimate_s > self.start_in_s

    @property
    def clusters(self) -> set[str]:
        return {c for c, _ in self.gpus}

    def describe(self) -> str:
        where = ", ".join(f"{g} GPUs in {c}" for (c, _), g in sorted(self.gpus.items()))
        return f"reserved: {where} expected free in {self.start_in_s:,.0f} s"


class HoldBook:
    """What the holds still allow, charged as a heuristic policy admits jobs."""

    def __init__(self, holds: list[Hold]) -> None:
        self.holds = holds
        self.left = [dict(h.spare) for h in holds]
        self.link_left = [dict(h.link_spare) for h in holds]
        self.link_keys = frozenset(key for h in holds for key in h.link_spare)

    def room(self, job: JobRequest, cluster: str, model: str) -> int | None:
        """GPUs of `model` in `cluster` the job may take (None: no hold limits it)."""
        found = [
            left[(cluster, model)]
            for hold, left in zip(self.holds, self.left, strict=True)
            if (cluster, model) in left and hold.binds(job)
        ]
        return min(found) if found else None

    def link_room(self, job: JobRequest, key: tuple[str, str]) -> float | None:
        found = [
            left[key]
            for hold, left in zip(self.holds, self.link_left, strict=True)
            if key in left and hold.binds(job)
        ]
        return min(found) if found else None

    def charge(
        self, job: JobRequest, gpus: dict[Key, int], links: dict[tuple[str, str], float]
    ) -> None:
        for hold, left, link_left in zip(self.holds, self.left, self.link_left, strict=True):
            if not hold.binds(job):
                continue
            for key, g in gpus.items():
                if key in left:
                    left[key] -= g
            for key, g in links.items():
                if key in link_left:
                    link_left[key] -= g


@dataclass(frozen=True)
class Owed:
    """A due job that does not fit now and the reservations it could have: the earliest time
    in each cluster it could run in whole, and the earliest split, soonest first."""

    job: JobRequest
    options: tuple[Hold, ...]


def plan_holds(
    snapshot: Snapshot,
    jobs: list[JobRequest],
    pools: dict[str, ClusterPool],
    *,
    fits_now,  # type: ignore[no-untyped-def]  # (job) -> bool
    limit: int,
) -> tuple[list[Owed], list[Hold]]:
    """The due jobs owed a reservation (the first `limit` of them that do not fit now) with
    their options, and the heuristic's holds: each the soonest option on clusters no earlier
    hold of the round took."""
    timeline = _Timeline(snapshot, pools)
    owed: list[Owed] = []
    for job in jobs:
        if len(owed) >= limit:
            break
        if job.due and not fits_now(job):
            options = timeline.options(job)
            if options:
                owed.append(Owed(job, options))
    holds: list[Hold] = []
    taken: set[str] = set()
    for entry in owed:
        hold = next((h for h in entry.options if not h.clusters & taken), None)
        if hold is not None:
            holds.append(hold)
            taken |= hold.clusters
    return owed, holds


class _Timeline:
    """Free GPUs and bandwidth at the running jobs' expected ends."""

    def __init__(self, snapshot: Snapshot, pools: dict[str, ClusterPool]) -> None:
        self.pools = pools
        self.releases: dict[Key, list[tuple[float, int]]] = defaultdict(list)
        self.link_releases: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for run in snapshot.running:
            for cluster, model, gpus in run.gpus:
                self.releases[(cluster, model)].append((max(run.ends_in_s, 0.0), gpus))
            for r in run.links:
                self.link_releases[link_key(r.a, r.b)].append((max(run.ends_in_s, 0.0), r.gbps))
        self.links_now = {link.key: link.free_gbps for link in snapshot.links}
        self._empty: dict[str, ClusterPool | None] = {}
        self._link_curve = {key: _curve(rel) for key, rel in self.link_releases.items()}
        # The links' bandwidth changes only when a running split job ends: asked at every
        # running job's end (thousands on a large fleet), it is worked out once per change.
        self._link_times = sorted(t for rel in self.link_releases.values() for t, _ in rel)
        self._links_seen: dict[int, dict[tuple[str, str], float]] = {}

    def most_units(self, job: JobRequest, cluster: str, model: str) -> int:
        """Units of the job the cluster could hold with every node free (all of them when a
        leaf's node size is not known: no cap rather than a wrong one)."""
        if cluster not in self._empty:
            state = self.pools[cluster].state()
            known = all(leaf.node_gpus for leaf in state.leaves)
            self._empty[cluster] = ClusterPool(_all_free(state)) if known else None
        pool = self._empty[cluster]
        return job.units if pool is None else min(pool.max_units(job, model), job.units)

    def options(self, job: JobRequest) -> tuple[Hold, ...]:
        models: dict[str, str] = {}  # cluster -> the model the job would use there
        for name, pool in self.pools.items():
            if job.allowed_clusters is not None and name not in job.allowed_clusters:
                continue
            found = job_models(job, pool)
            if found:
                models[name] = max(
                    found,
                    key=lambda m, p=pool, n=name: p.free_gpus(m) + _total(self.releases[(n, m)]),
                )
        if not models or job.gpus_per_pod == 0:
            return ()
        times = sorted(
            {0.0}
            | {t for name, m in models.items() for t, _ in self.releases[(name, m)]}
            | {t for rel in self.link_releases.values() for t, _ in rel}
        )
        most = {name: self.most_units(job, name, m) for name, m in models.items()}
        whole_left = {name for name in models if most[name] >= job.units}
        split_found = job.cluster_limit < 2
        out: list[Hold] = []
        avail = {name: self.pools[name].free_gpus(m) for name, m in models.items()}
        # The GPUs free at t, kept up to date end by end: worked out anew at every t, they
        # cost 100 clusters' curves at each of thousands of running jobs' ends, per job.
        ends = sorted(
            (t, name, g) for name, m in models.items() for t, g in self.releases[(name, m)]
        )
        total, done, unit_gpus = sum(avail.values()), 0, max(job.unit_gpus, 1)
        # Once one cluster could take every unit, `split_units` stops at it and `_split` finds
        # no split, then or later (ends only free GPUs): thousands of ends not asked again.
        need = max(job.units, job.min_share_units)
        one_holds = any(min(avail[n] // unit_gpus, most[n]) >= need for n in models)
        for t in times:
            while done < len(ends) and ends[done][0] <= t:
                _, name, gpus = ends[done]
                avail[name] += gpus
                total += gpus
                done += 1
                one_holds = one_holds or min(avail[name] // unit_gpus, most[name]) >= need
            for name in sorted(whole_left):
                if avail[name] // unit_gpus >= job.units:
                    whole_left.discard(name)
                    out.append(self._hold(job, t, {name: job.units}, avail, models))
            # A split needs its units' GPUs free over the clusters (`_split` finds none else).
            if not split_found and not one_holds and total // unit_gpus >= job.units:
                units = _split(job, avail, most, self._links_at(t))
                if units is not None:
                    split_found = True
                    out.append(self._hold(job, t, units, avail, models))
            if not whole_left and (split_found or one_holds):
                break
        # Soonest first; at the same time whole before split, then the tightest cluster.
        return tuple(sorted(out, key=lambda h: (h.start_in_s, len(h.gpus), sum(h.spare.values()))))

    def _links_at(self, t: float) -> dict[tuple[str, str], float]:
        """Free bandwidth per link at t (read only: shared between the times it is the same
        at, those with as many link releases before them)."""
        step = bisect.bisect_right(self._link_times, t)
        out = self._links_seen.get(step)
        if out is None:
            out = self._links_seen[step] = {}
            for k, free in self.links_now.items():
                times, totals = self._link_curve.get(k, ((), (0.0,)))
                out[k] = free + totals[bisect.bisect_right(times, t)]
        return out

    def _hold(  # type: ignore[no-untyped-def]
        self, job: JobRequest, t: float, units: dict[str, int], avail, models
    ) -> Hold:
        gpus = {(c, models[c]): u * job.unit_gpus for c, u in units.items()}
        demand = pair_demand_gbps(job.allreduce_gbps, len(units)) if len(units) > 1 else 0.0
        names = sorted(units)
        links = self._links_at(t)
        link_spare = {
            link_key(a, b): max(links.get(link_key(a, b), 0.0) - demand, 0.0)
            for i, a in enumerate(names)
            for b in names[i + 1 :]
        }
        return Hold(
            job.id,
            t,
            gpus,
            spare={(c, models[c]): avail[c] - g for (c, _), g in gpus.items()},
            link_spare=link_spare,
        )


def _split(
    job: JobRequest,
    avail: dict[str, int],
    most: dict[str, int],
    links: dict[tuple[str, str], float],
) -> dict[str, int] | None:
    """Units per cluster for a split of the job on `avail` GPUs (at most `most` units in each)
    over the clusters with most room, pairwise linked with enough bandwidth (the greedy
    splitter's rule on aggregate capacity); None if there is none."""
    capacity = {c: min(g // max(job.unit_gpus, 1), most[c]) for c, g in avail.items()}
    units = split_units(job, capacity, links)
    return units if units is not None and len(units) >= 2 else None


def _all_free(state: ClusterCapacity) -> ClusterCapacity:
    """The cluster with every node free."""
    return replace(
        state,
        leaves=tuple(
            replace(leaf, free_nodes=(0,) * leaf.node_gpus + (sum(leaf.free_nodes),))
            for leaf in state.leaves
        ),
    )


def _curve(rel):  # type: ignore[no-untyped-def]
    """(sorted end times, cumulative amount freed by each: totals[i] after the first i)."""
    ordered = sorted(rel)
    totals = [0]
    for _, amount in ordered:
        totals.append(totals[-1] + amount)
    return tuple(t for t, _ in ordered), tuple(totals)


def _total(rel: list[tuple[float, int]]) -> int:
    return sum(g for _, g in rel)
