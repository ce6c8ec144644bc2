"""Time-sharing by attained service (issue 34; Tiresias' 2D-LAS, within a priority class): a
queue opts in (`RoundInput.time_sharing`, from the Queue's `global.volcano.sh/time-sharing`
annotations), and a running gang of such a queue that has received the most GPU-time yields to
waiting work of its priority class that has received less, once it has run its quantum since
its last (re)start: it is checkpointed, requeued at a demoted level (step 1 of the round orders
it after the less-served work of its class: `queue_order.fair_order`), and resumes later from
its checkpoint. Without it a gang that runs for hours holds its GPUs while short work of the
same class waits behind it, and no policy's placement can help (docs/benchmarks.md 3i).

Pure: the round's snapshot after its starts and evictions in, the demotions out, as
`preemption.Eviction`s of kind `TIMESHARE` (the server and the simulator apply them as they
apply evictions; the victim is told why in `Eviction.victim_reasons`).

Who may yield (a candidate), a whole running gang, for a waiting job of priority p:
- its queue time-shares, and it has run at least the queue's quantum (never less than
  `TimeSharing.min_run_s`) since its last start or restart (`RunningJob.run_s`): the minimum run
  between two demotions of one job, so at most 3600 / quantum of them an hour per job;
- its priority is p (priorities are never crossed: that is preemption's), and it is not
  annotated `volcano.sh/preemptable: "false"`;
- it has received more GPU-time over all its runs (`RunningJob.attained_gpu_s`) than the
  waiting job (`JobRequest.served_gpu_s`), and at least `TimeSharing.min_attained_gpu_s`;
- when the waiting job is of another queue, the candidate's queue still holds at least its
  deserved share (`fair_share`) without it (a queue that yields to its own job loses nothing);
- what yielding costs, the work since its last checkpoint plus its restore (`lost_s +
  restore_s`), is at most `TimeSharing.max_lost_s`.

Which yield, for each waiting job the round's starts and evictions left waiting, in queue
order, that its queue's quota has room for and that does not fit now:
1. the candidates that hold GPUs it could use, the most served first (then the least work
   lost, then id), taken in that order until it fits - whole or as a link-safe split, by the
   greedy policy's code (`baselines.place_greedily`), as preemption places;
2. then each victim, the least served first, is spared if it still fits without it;
3. steps 1-2 run over all candidates and over each cluster's alone; the set with the fewest
   victims, then the most served least-served victim, then the least work lost, is taken;
4. at most `TimeSharing.max_jobs` victims and `max_gpus` of their GPUs per round in all;
5. the set yields only if waiting would cost more (`TimeSharing.wait_weight`), as preemption's
   step 5 weighs it: the waiting job's GPUs x its expected wait for running work to make room,
   times the weight, must be at least the victims' lost GPU-hours. Without it, gangs yielded
   for room that running work was about to make, and lost work for nothing (section 3i).
A job only yields when the waiting job fits once it is gone (step 1), so freed GPUs are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from volcano_global.solver.free_pools import FreePools
from volcano_global.solver.model import (
    JobDecision,
    JobRequest,
    RunningJob,
    Snapshot,
    link_key,
)
from volcano_global.solver.preemption import (
    Eviction,
    Standing,
    expected_wait,
    lost_gpu_hours,
    may_help,
)

TIMESHARE = "timeshare"  # an `Eviction.kind`: a demotion by attained service
Links = dict[tuple[str, str], float]


@dataclass(frozen=True)
class TimeSharing:
    """The rule's limits; a queue's own quantum comes with `RoundInput.time_sharing`."""

    min_run_s: float = 1800.0  # a quantum is never shorter (the minimum between demotions)
    max_jobs: int = 2  # demotions per round, in all
    max_gpus: int = 1024  # demoted GPUs per round, in all
    # Work lost since the last checkpoint plus the restore, in seconds, above which a gang
    # does not yield this round (None: any); it yields in a later round, after a checkpoint.
    # A gang that never reports a checkpoint would lose its whole run: it does not yield.
    max_lost_s: float | None = 300.0
    min_attained_gpu_s: float = 0.0  # below this a gang never yields
    # Step 5: how many lost GPU-hours an hour of the waiting job's GPUs is worth (None: the
    # victims yield whatever they lose, however soon running work would make room).
    wait_weight: float | None = 1.0


@dataclass
class _Room:
    """What is left as the round's demotions are chosen: free capacity, links, standings,
    quota room, and the caps."""

    free: FreePools
    links: Links
    queues: dict[str, Standing]
    quota: dict[str, int]
    jobs_left: int
    gpus_left: int


def demote(
    left: Snapshot,
    waiting: list[JobRequest],
    *,
    quanta: Mapping[str, float],
    queues: Mapping[str, Standing],
    rules: TimeSharing | None = None,
) -> list[Eviction]:
    """The round's demotions (module docstring). `left` is what the round's starts and
    evictions leave (free capacity, links, quota use, the running jobs that may yield);
    `waiting` the jobs still waiting, in queue order; `quanta` the time-sharing queues'
    quanta in seconds."""
    rules = rules or TimeSharing()
    if not quanta or not waiting:
        return []
    room = _Room(
        FreePools(left.clusters),
        {link.key: link.free_gbps for link in left.links},
        dict(queues),
        {q.name: q.quota_gpus - q.used_gpus for q in left.queues if q.quota_gpus is not None},
        rules.max_jobs,
        rules.max_gpus,
    )
    taken: set[str] = set()
    out: list[Eviction] = []
    for job in waiting:
        if room.jobs_left <= 0 or job.grows or room.quota.get(job.queue, job.gpus) < job.gpus:
            continue
        candidates = [
            r
            for r in left.running
            if r.id not in taken and may_yield(r, job, quanta, room.queues, rules)
        ]
        chosen = _choose(job, candidates, room)
        if chosen is None:
            continue
        victims, placement = chosen
        rest = [r for r in left.running if r.id not in taken]
        if not _worth(job, victims, rest, room, rules):
            continue
        placement = _take(room, job, victims, placement)
        taken.update(v.id for v in victims)
        out.append(_demotion(job, victims, placement, quanta))
    return out


def may_yield(
    victim: RunningJob,
    job: JobRequest,
    quanta: Mapping[str, float],
    queues: Mapping[str, Standing],
    rules: TimeSharing,
) -> bool:
    """Whether the running `victim` may yield to the waiting `job` (the candidate rule)."""
    quantum = quanta.get(victim.queue)
    if quantum is None or not victim.preemptable or victim.priority != job.priority:
        return False
    if victim.run_s < max(quantum, rules.min_run_s):
        return False
    served = max(job.served_gpu_s, rules.min_attained_gpu_s)
    if victim.attained_gpu_s <= served or victim.attained_gpu_s < rules.min_attained_gpu_s:
        return False
    if rules.max_lost_s is not None and victim.lost_s + victim.restore_s > rules.max_lost_s:
        return False
    if victim.queue == job.queue:
        return True
    theirs = queues.get(victim.queue)
    return (
        theirs is not None
        and theirs.reclaimable
        and theirs.held - victim.total_gpus >= theirs.deserved
    )


def _worth(
    job: JobRequest,
    victims: tuple[RunningJob, ...],
    running: list[RunningJob],
    room: _Room,
    rules: TimeSharing,
) -> bool:
    """Step 5: the waiting job's GPUs x its expected wait without a demotion
    (`preemption.expected_wait`), times the weight, must be at least the victims' lost
    GPU-hours."""
    if rules.wait_weight is None:
        return True
    wait = expected_wait(job, running, room.free, room.links)
    lost = sum(lost_gpu_hours(v) for v in victims)
    return job.gpus * wait / 3600.0 * rules.wait_weight >= lost


def _order(victim: RunningJob) -> tuple[float, float, str]:
    """The most served first, then the least work lost."""
    return (-victim.attained_gpu_s, lost_gpu_hours(victim), victim.id)


def _choose(
    job: JobRequest, candidates: list[RunningJob], room: _Room
) -> tuple[tuple[RunningJob, ...], JobDecision] | None:
    """Step 3: the best set over all candidates and over each cluster's alone."""
    if not candidates or room.free.fits_without(job, [], room.links) is not None:
        return None  # nobody yields, or it waits for another reason: yielding won't help
    useful = [r for r in candidates if may_help(job, r)]
    by_cluster: dict[str, list[RunningJob]] = {}  # each cluster's, in the same order
    for r in useful:
        for cluster in dict.fromkeys(c for c, _, _ in r.gpus):
            by_cluster.setdefault(cluster, []).append(r)
    pools = [useful] + [by_cluster[c] for c in sorted(by_cluster)]
    best: tuple[tuple[float, ...], tuple[RunningJob, ...], JobDecision] | None = None
    for pool in pools:
        found = _greedy(job, pool, room)
        if found is None:
            continue
        victims, placement = found
        key = (
            len(victims),
            -min(v.attained_gpu_s for v in victims),
            round(sum(lost_gpu_hours(v) for v in victims), 6),
        )
        if best is None or key < best[0]:
            best = (key, victims, placement)
    return None if best is None else (best[1], best[2])


def _greedy(
    job: JobRequest, candidates: list[RunningJob], room: _Room
) -> tuple[tuple[RunningJob, ...], JobDecision] | None:
    """Steps 1 and 2 over these candidates, within the caps."""
    picked: list[RunningJob] = []
    placement = None
    for victim in sorted(candidates, key=_order):
        gpus = sum(v.total_gpus for v in picked) + victim.total_gpus
        if len(picked) + 1 > room.jobs_left or gpus > room.gpus_left:
            break
        if not _keeps_share(job, picked, victim, room.queues):
            continue
        picked.append(victim)
        placement = room.free.fits_without(job, picked, room.links)
        if placement is not None:
            break
    if placement is None:
        return None
    for victim in sorted(picked, key=_order, reverse=True):  # the least served spared first
        rest = [v for v in picked if v is not victim]
        fit = room.free.fits_without(job, rest, room.links) if rest else None
        if fit is not None:
            picked, placement = rest, fit
    return tuple(sorted(picked, key=_order)), placement


def _keeps_share(
    job: JobRequest,
    picked: list[RunningJob],
    victim: RunningJob,
    queues: Mapping[str, Standing],
) -> bool:
    """Another queue keeps its deserved share with this victim and those already picked from
    it gone (`may_yield` checks each victim alone)."""
    if victim.queue == job.queue:
        return True
    theirs = queues.get(victim.queue)
    taken = sum(v.total_gpus for v in picked if v.queue == victim.queue) + victim.total_gpus
    return theirs is not None and theirs.held - taken >= theirs.deserved


def _take(
    room: _Room, job: JobRequest, victims: tuple[RunningJob, ...], placement: JobDecision
) -> JobDecision:
    """The victims' GPUs and links freed, the job placed on them: what later demotions of the
    round see. Returns the placement as taken."""
    for v in victims:
        for b in v.links:
            room.links[link_key(b.a, b.b)] = room.links.get(link_key(b.a, b.b), 0.0) + b.gbps
        if v.queue in room.queues:
            s = room.queues[v.queue]
            room.queues[v.queue] = replace(s, held=s.held - v.total_gpus)
    placement = room.free.take(job, victims, room.links) or placement
    for r in placement.reservations:
        room.links[link_key(r.a, r.b)] -= r.gbps
    if job.queue in room.queues:
        s = room.queues[job.queue]
        room.queues[job.queue] = replace(s, held=s.held + job.gpus)
    if job.queue in room.quota:
        room.quota[job.queue] -= job.gpus
    room.jobs_left -= len(victims)
    room.gpus_left -= sum(v.total_gpus for v in victims)
    return placement


def _demotion(
    job: JobRequest,
    victims: tuple[RunningJob, ...],
    placement: JobDecision,
    quanta: Mapping[str, float],
) -> Eviction:
    where = ", ".join(f"{s.gpus} GPUs in {s.cluster}" for s in placement.shares)
    lost = sum(lost_gpu_hours(v) for v in victims)
    names = "; ".join(
        f"{v.name or v.id} ({v.total_gpus} GPUs, queue {v.queue}, "
        f"{v.attained_gpu_s / 3600:.1f} GPU-hours received)"
        for v in victims
    )
    reason = (
        f"time-sharing: {len(victims)} job(s) of priority {job.priority} that received more "
        f"GPU-time yield to it, {sum(v.total_gpus for v in victims)} GPUs, {lost:.1f} GPU-hours "
        f"lost: {names}; it received {job.served_gpu_s / 3600:.1f} GPU-hours and starts on "
        f"{where} once they are gone"
    )
    told = {v.id: demoted_reason(v, job, quanta[v.queue]) for v in victims}
    return Eviction(job.id, victims, placement, TIMESHARE, reason, told)


def demoted_reason(victim: RunningJob, job: JobRequest, quantum_s: float) -> str:
    """What a demoted job is told, in numbers."""
    return (
        f"demoted by time-sharing (queue {victim.queue}, quantum {quantum_s / 3600:.2g} h): it "
        f"received {victim.attained_gpu_s / 3600:.1f} GPU-hours over its runs and ran "
        f"{victim.run_s / 3600:.1f} h since its last start; {job.id} of the same priority "
        f"({job.served_gpu_s / 3600:.1f} GPU-hours received) runs in its place; it resumes "
        f"from its last checkpoint, {lost_gpu_hours(victim):.1f} GPU-hours of work lost "
        f"(since the checkpoint, and the restore), and waits behind less-served work"
    )
