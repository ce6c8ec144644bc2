"""Preemption and reclaim: which running gangs a waiting gang may evict so that it can start.

Pure: the round's snapshot (free capacity, links, running jobs) and its decision in, the
evictions out. The server's scheduling loop and the simulator call the same `preempt`.

Who may evict (the preemptor): a job the round left pending, whose priority class does not
say `preemptionPolicy: Never` (`JobRequest` carries `may_evict_for` as the set of reasons it
may evict for: `may_evict_for(policy)`) and whose queue has room for it under every capability
on its path (what the round's admitted jobs left), in queue order, at most `Rules.max_jobs`
victims and `Rules.max_gpus` of their GPUs per round in all. What an elastic job could grow by
never evicts.

Who may be evicted (a candidate), a whole running job, never part of a gang:
- it is not annotated `volcano.sh/preemptable: "false"` (`RunningJob.preemptable`);
- it has run at least `Rules.min_run_s` (Volcano has no such floor; without it a fleet at
  load 1 evicts the same jobs over and over);
- and either (preemption) its priority is lower than the preemptor's and the preemptor's
  class says `PreemptLowerPriority`; or (reclaim) the preemptor's queue holds, with the
  preemptor, no more than it deserves (`solver.fair_share`), the candidate's queue is
  `reclaimable` and still holds at least what it deserves without the candidate (Volcano's
  `proportion` plugin: a queue is reclaimed from only above its deserved share).

The victims (the rule, exactly):
1. candidates in the order lowest priority first, then fewest GPU-hours of work lost (GPUs x
   seconds since its start or last checkpoint, `RunningJob.lost_s`, plus the seconds its
   checkpoint takes to reach another cluster, `restore_s`), then the latest started, then id;
2. taken in that order, each freeing its GPUs (per leaf domain) and the link bandwidth it
   reserved, until the preemptor fits - whole or as a link-safe split, by the greedy policy's
   fit and split code (`baselines.place_greedily`); none if the cap would be passed first;
3. then every victim, the highest priority and most GPU-hours lost first, is spared if the
   preemptor still fits without it (Kubernetes' "reprieve");
4. steps 2-3 are run over all the candidates and over each cluster's alone (those with GPUs
   in it); of the sets found, the one whose highest victim priority is lowest, then with the
   fewest GPU-hours lost, then the fewest victims, is taken (Kubernetes picks its node by the
   same first and last keys, with the sum of priorities between).
5. the set is evicted only if waiting would cost more (`Rules.wait_weight`, 1 by default):
   the preemptor's GPUs x its expected wait, times the weight, must be at least the victims'
   lost GPU-hours. The expected wait is when running work is expected to leave room for it
   without evictions: the running jobs' expected ends (`RunningJob.ends_in_s`), earliest first,
   until it fits. A gang that running work will make room for soon waits; one whose victims
   lost little (young, or recently checkpointed) or that would wait long evicts. Without it,
   big gangs that had run for hours were evicted for room that running work would soon have
   made (docs/benchmarks.md section 3c). The next round asks again.
The preemptor's placement on the freed capacity is returned and consumed, so a later
preemptor of the same round does not count on the same GPUs. The per-cluster sets matter: taken
over the whole fleet, the lowest-priority, least-lost candidates may be scattered over
clusters none of which then holds the gang, and filling it takes the big jobs anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from volcano_global.jobspec.priority_classes import NEVER
from volcano_global.solver.baselines import holds_whole, placed_reading_links, placement_key
from volcano_global.solver.fair_share import QueueNode, fair_shares
from volcano_global.solver.free_pools import Asked, FreePools, with_links_of
from volcano_global.solver.model import (
    Decision,
    JobDecision,
    JobRequest,
    RunningJob,
    Snapshot,
    link_key,
)
from volcano_global.solver.packing import Pools

PREEMPT = "preempt"
RECLAIM = "reclaim"


@dataclass(frozen=True)
class Rules:
    min_run_s: float = 600.0  # a job runs this long before it may be evicted
    max_jobs: int = 4  # victims per round, in all
    max_gpus: int = 1024  # victims' GPUs per round, in all
    max_lost_gpu_hours: float | None = None  # work victims lose per round, in all (None: no cap)
    # How many lost GPU-hours an hour of a waiting preemptor's GPU is worth (step 5 of the
    # rule); None evicts whenever a set is found, however soon room would come.
    wait_weight: float | None = 1.0


@dataclass(frozen=True)
class Standing:
    """A queue as reclaim sees it: GPUs held now, GPUs deserved (fair share), reclaimable."""

    held: int
    deserved: int
    reclaimable: bool = True


@dataclass(frozen=True)
class Eviction:
    """`preemptor` starts on `placement` once every one of `victims` is gone."""

    preemptor: str
    victims: tuple[RunningJob, ...]
    placement: JobDecision
    kind: str  # RECLAIM when every victim was taken by reclaim alone, else PREEMPT
    reason: str
    # What each victim is told, by id (time-sharing's demotions); empty: that it was preempted.
    victim_reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return sum(v.total_gpus for v in self.victims)


def may_evict_for(preemption_policy: str) -> frozenset[str]:
    """What a job of a class with this `preemptionPolicy` may evict for: nothing for Never
    (Kubernetes: such a pod waits, it never preempts), else preemption and reclaim."""
    return frozenset() if preemption_policy == NEVER else frozenset({PREEMPT, RECLAIM})


def standings(
    capacity_gpus: int, tree: Mapping[str, QueueNode], reclaimable: Mapping[str, bool]
) -> dict[str, Standing]:
    """Every queue as reclaim sees it: what it holds, what it deserves of `capacity_gpus`
    (`fair_share`, with what its jobs wait for), and whether it may be reclaimed from."""
    shares = fair_shares(capacity_gpus, tree)
    return {
        name: Standing(node.held, shares[name].deserved, reclaimable.get(name, True))
        for name, node in tree.items()
        if name in shares
    }


def lost_gpu_hours(job: RunningJob, *, later_s: float = 0.0) -> float:
    """What evicting `job` (`later_s` from now) costs: the work it loses and the restore of
    its checkpoint, in GPU-hours."""
    return job.total_gpus * (job.lost_s + later_s + job.restore_s) / 3600.0


def victim_order(job: RunningJob) -> tuple[int, float, float, str]:
    return (job.priority, lost_gpu_hours(job), job.run_s, job.id)


def preempt(
    snapshot: Snapshot,
    decision: Decision,
    *,
    rules: Rules | None = None,
    queues: dict[str, Standing] | None = None,
    pools: Pools | None = None,
) -> list[Eviction]:
    """The evictions of one round (see the module docstring). `snapshot.clusters` and `links`
    must be what is free after the round's admitted jobs (the simulator builds it after its
    starts); the jobs `decision` did not admit, in `snapshot.jobs` order, may evict.
    `pools`: the clusters' pools in that state, if the caller has them (else built here);
    the evictions' placements are taken from them."""
    rules = rules or Rules()
    queues = dict(queues or {})
    admitted = {d.job_id for d in decision.jobs if d.admitted}
    room = _quota_room(snapshot, admitted)
    free = FreePools(snapshot.clusters, pools)
    links = {link.key: link.free_gbps for link in snapshot.links}
    taken: set[str] = set()
    asked = Asked()  # answers that hold until the next eviction
    jobs_left, gpus_left = rules.max_jobs, rules.max_gpus
    lost_left = rules.max_lost_gpu_hours if rules.max_lost_gpu_hours is not None else float("inf")
    out: list[Eviction] = []
    for job in snapshot.jobs:
        if (
            job.id in admitted
            or not job.may_evict_for
            or jobs_left <= 0
            or job.grows
            or room.get(job.queue, job.gpus) < job.gpus
        ):
            continue
        allowed = [
            (r, kind)
            for r in snapshot.running
            if r.id not in taken and (kind := may_take(job, r, rules, queues)) is not None
        ]
        chosen = _choose(job, allowed, free, links, (jobs_left, gpus_left, lost_left), asked)
        if chosen is None:
            continue
        victims, placement = chosen
        running = [r for r in snapshot.running if r.id not in taken]
        wait = expected_wait(job, running, free, links, asked)
        if not _worth(job, victims, wait, rules):
            continue
        kinds = {kind for r, kind in allowed if r in victims}
        taken.update(v.id for v in victims)
        placement = _evict(job, victims, placement, free, links, queues, room)
        asked = Asked()  # the pools changed
        jobs_left -= len(victims)
        gpus_left -= sum(v.total_gpus for v in victims)
        lost_left -= sum(lost_gpu_hours(v) for v in victims)
        kind = RECLAIM if kinds == {RECLAIM} else PREEMPT
        reason = _reason(job, victims, placement, wait)
        out.append(Eviction(job.id, victims, placement, kind, reason))
    return out


def _quota_room(snapshot: Snapshot, admitted: set[str]) -> dict[str, int]:
    """GPUs each capped queue has left after the round's admitted jobs."""
    room = {q.name: q.quota_gpus - q.used_gpus for q in snapshot.queues if q.quota_gpus is not None}
    for job in snapshot.jobs:
        if job.id in admitted and job.queue in room:
            room[job.queue] -= job.gpus
    return room


def _evict(
    job: JobRequest,
    victims: tuple[RunningJob, ...],
    placement: JobDecision,
    free: FreePools,
    links: dict[tuple[str, str], float],
    queues: dict[str, Standing],
    room: dict[str, int],
) -> JobDecision:
    """The books after `job` evicts `victims`: their GPUs, links and queues' holdings freed,
    the job's taken; its placement in the freed pools (or `placement` if none is found)."""
    for v in victims:
        for b in v.links:
            links[link_key(b.a, b.b)] = links.get(link_key(b.a, b.b), 0.0) + b.gbps
        if v.queue in queues:
            s = queues[v.queue]
            queues[v.queue] = replace(s, held=s.held - v.total_gpus)
    placement = free.take(job, victims, links) or placement
    for r in placement.reservations:
        links[link_key(r.a, r.b)] -= r.gbps
    if job.queue in queues:
        s = queues[job.queue]
        queues[job.queue] = replace(s, held=s.held + job.gpus)
    if job.queue in room:
        room[job.queue] -= job.gpus
    return placement


def expected_wait(
    job: JobRequest,
    running: list[RunningJob],
    free: FreePools,
    links: dict[tuple[str, str], float],
    asked: Asked | None = None,
) -> float:
    """Seconds until running work is expected to leave room, with no eviction, for the job
    (which does not fit now): the running jobs end at their `ends_in_s`, earliest first,
    until it fits (infinite if it never does). With `asked`, an answer that read no link is
    given again to a job of the same `placement_key` (`free_pools.Asked`)."""
    key = (placement_key(job), tuple(r.id for r in running))
    if asked is not None and key in asked.waits:
        return asked.waits[key]
    wait, reads = _expected_wait(job, running, free, links)
    if asked is not None and not reads:
        asked.waits[key] = wait
    return wait


def _expected_wait(
    job: JobRequest,
    running: list[RunningJob],
    free: FreePools,
    links: dict[tuple[str, str], float],
) -> tuple[float, bool]:
    """`expected_wait`, and whether a fit it tried read the links. Found by bisection over
    how many have ended (more room never undoes a fit of the greedy placement): a large
    server runs thousands of jobs, and a placement tried after each would cost seconds a
    round."""
    ending = sorted(running, key=lambda r: (r.ends_in_s, r.id))
    if not ending:
        return float("inf"), False
    usable = free.usable(job)
    outer = free.mark()
    ended, room = 0, dict(links)  # the first `ended` have ended, kept until the answer
    reads = False

    def fits(i: int) -> bool:
        """Whether the job fits once the first i have ended (i > ended); a miss keeps them
        ended (bisection only looks further on from a miss), a fit does not."""
        nonlocal ended, room, reads
        if _fits_whole_in_one(job, free, ending[ended:i], usable):
            return True
        kept = free.mark()
        free.give_back(ending[ended:i], usable)
        more = with_links_of(room, ending[ended:i])  # added in the same order as one by one
        placed = free.mark()
        found, read = placed_reading_links(job, free.pools, more)
        found, reads = found is not None, reads or read
        free.rollback(placed)
        if found:
            free.rollback(kept)
        else:
            ended, room = i, more
        return found

    try:
        if not fits(len(ending)):
            return float("inf"), reads
        low, high = 0, len(ending)  # fits(high); not known at low (0: nothing ended, never fits)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if fits(mid) else (mid, high)
        return ending[high - 1].ends_in_s, reads
    finally:
        free.rollback(outer)


def _fits_whole_in_one(
    job: JobRequest, free: FreePools, ending: list[RunningJob], usable: set[str]
) -> bool:
    """A shortcut of `expected_wait`'s fit, exact when it says yes: whether the job fits
    whole, once these have ended too, in the cluster where they free most (only that
    cluster's pods given back: with thousands of running jobs, the bisection's first steps
    end most of the fleet's, and the job mostly fits whole in one cluster long before)."""
    gained: dict[str, int] = {}
    for r in ending:
        for cluster, _, gpus in r.gpus:
            if cluster in usable:
                gained[cluster] = gained.get(cluster, 0) + gpus
    if not gained:
        return False
    best = max(sorted(gained), key=lambda c: gained[c])
    kept = free.mark()
    try:
        free.give_back([r for r in ending if any(p[0] == best for p in r.pods)], {best})
        return holds_whole(job, free.pools, best)
    finally:
        free.rollback(kept)


def _worth(job: JobRequest, victims: tuple[RunningJob, ...], wait: float, rules: Rules) -> bool:
    """Step 5: waiting costs the preemptor's GPUs x its expected wait (times the weight);
    evicting costs the victims' lost work."""
    if rules.wait_weight is None:
        return True
    lost = sum(lost_gpu_hours(v) for v in victims)
    return job.gpus * wait / 3600.0 * rules.wait_weight >= lost


def may_take(
    job: JobRequest, victim: RunningJob, rules: Rules, queues: Mapping[str, Standing]
) -> str | None:
    """Whether the waiting `job` may take `victim.gpus` from the victim, and by which rule
    (PREEMPT or RECLAIM; None: it may not). The victim is a whole gang here; an elastic job's
    shrink (`shrinking.py`) asks with only the units it would give back."""
    if not victim.preemptable or victim.run_s < rules.min_run_s:
        return None
    if PREEMPT in job.may_evict_for and victim.priority < job.priority:
        return PREEMPT
    mine, theirs = queues.get(job.queue), queues.get(victim.queue)
    if (
        RECLAIM in job.may_evict_for
        and mine is not None
        and theirs is not None
        and victim.queue != job.queue
        and mine.held + job.gpus <= mine.deserved
        and theirs.reclaimable
        and theirs.held - victim.total_gpus >= theirs.deserved
    ):
        return RECLAIM
    return None


def _choose(
    job: JobRequest,
    allowed: list[tuple[RunningJob, str]],
    free: FreePools,
    links: dict[tuple[str, str], float],
    left: tuple[int, int, float],
    asked: Asked | None = None,
) -> tuple[tuple[RunningJob, ...], JobDecision] | None:
    if free.fits_without(job, [], links, asked) is not None:
        return None  # pending for another reason (quota, a reservation): evicting won't help
    useful = [r for r, _ in allowed if may_help(job, r)]
    by_cluster: dict[str, list[RunningJob]] = {}  # each cluster's, in the same order
    for r in useful:
        for cluster in dict.fromkeys(c for c, _, _ in r.gpus):
            by_cluster.setdefault(cluster, []).append(r)
    pools = [useful] + [by_cluster[c] for c in sorted(by_cluster)]
    best: tuple[tuple[float, ...], tuple[RunningJob, ...], JobDecision] | None = None
    for candidates in pools:
        found = _greedy(job, candidates, free, links, left, asked)
        if found is None:
            continue
        victims, placement = found
        key = (
            max(v.priority for v in victims),
            round(sum(lost_gpu_hours(v) for v in victims), 6),
            len(victims),
        )
        if best is None or key < best[0]:
            best = (key, victims, placement)
    return None if best is None else (best[1], best[2])


def _greedy(
    job: JobRequest,
    candidates: list[RunningJob],
    free: FreePools,
    links: dict[tuple[str, str], float],
    left: tuple[int, int, float],
    asked: Asked | None = None,
) -> tuple[tuple[RunningJob, ...], JobDecision] | None:
    """Steps 2 and 3 of the rule over these candidates, within what the caps leave."""
    jobs_left, gpus_left, lost_left = left
    picked: list[RunningJob] = []
    placement = None
    for victim in sorted(candidates, key=victim_order):
        if (
            len(picked) + 1 > jobs_left
            or sum(v.total_gpus for v in picked) + victim.total_gpus > gpus_left
            or sum(lost_gpu_hours(v) for v in picked) + lost_gpu_hours(victim) > lost_left + 1e-9
        ):
            break
        picked.append(victim)
        placement = free.fits_without(job, picked, links, asked)
        if placement is not None:
            break
    if placement is None:
        return None
    for victim in sorted(picked, key=victim_order, reverse=True):  # reprieve
        rest = [v for v in picked if v is not victim]
        fit = free.fits_without(job, rest, links, asked) if rest else None
        if fit is not None:
            picked, placement = rest, fit
    return tuple(sorted(picked, key=victim_order)), placement


def may_help(job: JobRequest, victim: RunningJob) -> bool:
    """Whether the victim holds GPUs the job could use (its model, clusters it may run in)."""
    return any(
        (job.gpu_model in (None, model))
        and (job.allowed_clusters is None or cluster in job.allowed_clusters)
        for cluster, model, _ in victim.gpus
    )


def _reason(
    job: JobRequest, victims: tuple[RunningJob, ...], placement: JobDecision, wait: float
) -> str:
    where = ", ".join(f"{s.gpus} GPUs in {s.cluster}" for s in placement.shares)
    lost = sum(lost_gpu_hours(v) for v in victims)
    names = "; ".join(
        f"{v.name or v.id} (priority {v.priority}, queue {v.queue}, {v.total_gpus} GPUs, "
        f"ran {v.run_s / 3600:.1f} h, {lost_gpu_hours(v):.1f} GPU-hours lost)"
        for v in victims
    )
    return (
        f"evicting {len(victims)} job(s), {sum(v.total_gpus for v in victims)} GPUs, "
        f"{lost:.1f} GPU-hours lost, the lowest priority and least work first: {names}; "
        f"priority {job.priority} starts on {where} once they are gone ({_waiting(job, wait)})"
    )


def _waiting(job: JobRequest, wait: float) -> str:
    if wait == float("inf"):
        return "running work alone would never make room"
    return (
        f"waiting for running work to make room: {wait / 3600:.1f} h expected, "
        f"{job.gpus * wait / 3600:.1f} GPU-hours"
    )
