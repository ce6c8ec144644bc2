"""Every waiting job is considered (steps 1d and 5b of a round, `round_plan.py`): the solver
plans the window (the first `SolveOptions.window` jobs in queue order); the jobs beyond it go
through two cheap passes, so that a round's cost grows with the queue by a few dictionary
operations per job, not by a model.

1d. `assign`, before the solve, on a few columns of each job (GPUs, pods, GPU model, queue: what
    the server reads for the whole queue, `services/scheduling/round_input.py`): a first fit
    at cluster level, in queue order, over the jobs beyond the window, on the round's starting
    free GPUs per (cluster, model) and the nodes' pod slots, within each leaf queue's quota
    room. Each job gets a candidate cluster, or no room now with the reason in numbers. The
    window's own demand is not charged: the pass over-counts what is left, so that no job the
    window leaves room for is missed; what is really left is `backfill`'s affair. At most
    `limit` candidates a round: the server reads those (and the window) in full.
5b. `backfill`, after the solve, on what the window's starts left: each candidate in queue
    order, whole in one cluster (its candidate first, then the others by their free GPUs,
    fewest first), packed into domains by the same rules as every policy, within its queue's
    quota room and what the round's reservations allow (`reservations.HoldBook`: a job that
    would still run when a hold starts takes only the hold's spare, so it delays no job ahead
    that holds one). A candidate that no longer fits waits, with why.

Beyond the window a job starts whole or not at all: splits (which reserve link bandwidth) and
narrower elastic widths are planned by the solver, for the window's jobs. The window's
decisions, reservations and proven gap are the solver's, unchanged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from volcano_global.jobspec.accelerators import is_npu_model
from volcano_global.solver import screen
from volcano_global.solver.capacity import ClusterPool, job_models
from volcano_global.solver.fair_share import QueueNode, quota_states
from volcano_global.solver.free_pools import after, replays_alike, reserved
from volcano_global.solver.model import (
    ClusterCapacity,
    Decision,
    JobDecision,
    JobRequest,
    Snapshot,
)
from volcano_global.solver.packing import Pools, pack_job
from volcano_global.solver.reservations import HoldBook

if TYPE_CHECKING:
    from volcano_global.solver.round_plan import RoundInput, RoundOptions

TRIES = 4  # clusters a candidate is packed into before it waits (its candidate first)
Key = tuple[str, str]  # (cluster, GPU model)


@dataclass(frozen=True)
class Line:
    """The waiting jobs in queue order, cut at the window: what the solver plans, the jobs
    beyond it, and the fast pass's answer for each of those."""

    window: list[JobRequest]
    beyond: list[JobRequest] = field(default_factory=list)
    assigned: dict[str, Assigned] = field(default_factory=dict)


def cut(
    data: RoundInput, waiting: list[JobRequest], options: RoundOptions, *, planned: bool
) -> Line:
    """Step 1d: the window, and the fast pass over the jobs beyond it (`assign`). Without
    `RoundOptions.whole_queue`, or for a policy that is not `planned` (the baselines stand
    for other systems, as they schedule), every job goes to the solver, which plans the
    first `window` and tells the others they are outside it (as before this step). A job
    beyond the window the model cannot mean something for is set aside, as in it."""
    size = options.solve.window
    if not options.whole_queue or not planned or len(waiting) <= size:
        return Line(waiting)
    beyond, refused = screen(tuple(waiting[size:]))
    queues = rooms(data.tree, {w.request.queue for w in data.waiting})
    assigned = assign(beyond, data.clusters, queues, limit=options.backfill_limit)
    assigned |= {d.job_id: Assigned(None, d.reason) for d in refused}
    return Line(
        waiting[:size], list(beyond) + [_by_id(waiting, d.job_id) for d in refused], assigned
    )


def _by_id(jobs: Sequence[JobRequest], job_id: str) -> JobRequest:
    return next(j for j in jobs if j.id == job_id)


def rooms(tree: Mapping[str, QueueNode], waiting: Iterable[str]) -> dict[str, int]:
    """GPUs each capped leaf queue may still take (`fair_share.quota_states`), with jobs
    waiting in the leaf queues `waiting` (the whole queue's)."""
    return {
        q.name: max(q.quota_gpus - q.used_gpus, 0)
        for q in quota_states(tree, set(waiting))
        if q.quota_gpus is not None
    }


@dataclass(frozen=True)
class Filled:
    """What step 5b leaves: the decision with the jobs beyond the window, and the clusters'
    pools and the links' bandwidth after every start (None: nothing was beyond). The pools
    are handed on to step 7, which places its trials on them (`round_plan._left`): read
    `left()` or the pools before step 7, never after."""

    decision: Decision
    beyond: tuple[JobRequest, ...] = ()
    pools: Pools | None = None
    links: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def left(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot with what the starts took (as `free_pools.remaining`)."""
        pools = self.pools
        if pools is None:
            return snapshot
        return replace(
            snapshot,
            clusters=tuple(pools[c.name].state() for c in snapshot.clusters),
            links=tuple(
                replace(x, reserved_gbps=x.reserved_gbps + self.links.get(x.key, 0.0))
                for x in snapshot.links
            ),
        )


def backfilled(
    snapshot: Snapshot,
    decision: Decision,
    line: Line,
    data: RoundInput,
    *,
    evicting: bool,
    solved: Pools | None = None,
) -> Filled:
    """Step 5b: the decision with one for every job beyond the window (`backfill`, on what
    the window's starts leave). `evicting`: the round may evict (step 7 runs after this one):
    no job of a lower priority than a window job left unplaced starts here, so that it does
    not take the room that job would evict for. `solved`: the pools the solve packed the
    decision into, taken (and changed) instead of built again where they hold what `after`
    would (`replays_alike`)."""
    if not line.beyond:
        return Filled(decision)
    if decision.status == "ERROR":  # no holds were planned: nothing may start behind the window
        why = next((d.reason for d in decision.jobs), "the round failed")
        more = tuple(JobDecision(j.id, False, reason=why) for j in line.beyond)
        return Filled(replace(decision, jobs=decision.jobs + more), tuple(line.beyond))
    if solved is not None and replays_alike(decision, solved):
        pools, links = solved, reserved(decision)
    else:
        pools, links = after(snapshot, decision)
    queues = rooms(
        held_after(data.tree, decision, line.window), {w.request.queue for w in data.waiting}
    )
    floor = preemptors_priority(decision, line.window) if evicting else None
    more = backfill(line.beyond, line.assigned, pools, decision, line.window, queues, floor)
    filled = replace(decision, jobs=decision.jobs + more)
    return Filled(filled, tuple(line.beyond), pools, links)


def preemptors_priority(decision: Decision, window: Sequence[JobRequest]) -> int | None:
    """The highest priority among the window's jobs the solver left waiting (None: none)."""
    placed = {d.job_id for d in decision.admitted}
    waiting = [j.priority for j in window if j.id not in placed]
    return max(waiting, default=None)


def held_after(
    tree: Mapping[str, QueueNode], decision: Decision, window: Sequence[JobRequest]
) -> dict[str, QueueNode]:
    """The queue tree with what the window's starts hold: the rooms left beyond the window
    (a capped parent's room is shared among its leaves with jobs waiting)."""
    queue_of = {j.id: j.queue for j in window}
    taken: dict[str, int] = defaultdict(int)
    for d in decision.admitted:
        if d.job_id in queue_of:
            taken[queue_of[d.job_id]] += sum(s.gpus for s in d.shares)
    return {
        name: replace(node, held=node.held + taken[name]) if taken.get(name) else node
        for name, node in tree.items()
    }


@dataclass(frozen=True)
class Assigned:
    """The fast pass's answer for one job beyond the window: a candidate cluster, or none and
    why (`reason`)."""

    cluster: str | None
    reason: str = ""


class _Room:
    """Free GPUs and pod slots per (cluster, model), from the leaves' node histograms."""

    def __init__(self, clusters: Iterable[ClusterCapacity]) -> None:
        nodes: dict[Key, list[int]] = defaultdict(lambda: [0] * 9)
        for state in clusters:
            for leaf in state.leaves:
                acc = nodes[(state.name, leaf.gpu_model)]
                if len(acc) < len(leaf.free_nodes):
                    acc.extend([0] * (len(leaf.free_nodes) - len(acc)))
                for v, n in enumerate(leaf.free_nodes):
                    if n:
                        acc[v] += n
        self.nodes = dict(nodes)
        self.free = {key: sum(v * n for v, n in enumerate(h)) for key, h in self.nodes.items()}
        self.slots: dict[tuple[str, str, int], int] = {}
        # Fewest free GPUs first: small jobs fill the fuller clusters, large ones find room.
        self.order = sorted(self.free, key=lambda k: (self.free[k], k))

    def pod_slots(self, key: Key, gpus_per_pod: int) -> int:
        found = self.slots.get((*key, gpus_per_pod))
        if found is None:
            h = self.nodes[key]
            found = sum(n * (v // gpus_per_pod) for v, n in enumerate(h)) if gpus_per_pod else 10**9
            self.slots[(*key, gpus_per_pod)] = found
        return found

    def fits(self, job: JobRequest, key: Key) -> bool:
        return self.free[key] >= job.gpus and self.pod_slots(key, job.gpus_per_pod) >= job.pods

    def take(self, job: JobRequest, key: Key) -> None:
        self.free[key] -= job.gpus
        if job.gpus_per_pod:
            self.slots[(*key, job.gpus_per_pod)] -= job.pods


def assign(
    jobs: Sequence[JobRequest],
    clusters: Iterable[ClusterCapacity],
    quota_room: Mapping[str, int],
    *,
    limit: int,
) -> dict[str, Assigned]:
    """Step 1d: for each job (beyond the window, in queue order) a candidate cluster, or none
    and why. `quota_room`: GPUs each capped leaf queue may still take."""
    room = _Room(clusters)
    quota = dict(quota_room)
    failed: dict[tuple[object, ...], str] = {}  # a shape that found no room: later ones neither
    out: dict[str, Assigned] = {}
    taken = 0
    for job in jobs:
        left = quota.get(job.queue)
        if left is not None and left < job.gpus:
            out[job.id] = Assigned(None, _quota_reason(job, left))
            continue
        shape = (job.gpu_model, job.gpus, job.gpus_per_pod, job.pods, job.allowed_clusters)
        key = None if shape in failed else _first_fit(job, room)
        if key is None:
            why = failed.get(shape) or _no_room(job)
            failed[shape] = why
            out[job.id] = Assigned(None, why)
        elif taken >= limit:
            out[job.id] = Assigned(
                None,
                f"no room looked for this round: a round backfills at most {limit} jobs beyond "
                "its window, and as many are ahead of it",
            )
        else:
            room.take(job, key)
            if left is not None:
                quota[job.queue] = left - job.gpus
            taken += 1
            out[job.id] = Assigned(key[0])
    return out


def _first_fit(job: JobRequest, room: _Room) -> Key | None:
    return next((k for k in room.order if _may_use(job, k) and room.fits(job, k)), None)


def _may_use(job: JobRequest, key: Key) -> bool:
    """As `capacity.job_models`: its model, or for a job that names none any GPU model but
    an NPU's (an Ascend job always names its chip)."""
    if job.gpu_model is not None and key[1] != job.gpu_model:
        return False
    if job.gpu_model is None and job.gpus_per_pod and is_npu_model(key[1]):
        return False
    return job.allowed_clusters is None or key[0] in job.allowed_clusters


def below(floor: int) -> str:
    return (
        f"waits behind a job of priority {floor} ahead of it in line, which may evict to "
        "start: the room it would make is not taken from behind"
    )


def _quota_reason(job: JobRequest, left: int) -> str:
    return (
        f"queue {job.queue} may take {max(left, 0)} more GPUs, after the jobs ahead of it in "
        f"line; it needs {job.gpus}"
    )


def _no_room(job: JobRequest) -> str:
    """Why a job found no cluster, in its own numbers only: the reasons of thousands of jobs
    are written when they change, so they leave out what moves every round (free GPUs)."""
    model = f" of {job.gpu_model}" if job.gpu_model else ""
    fewest = f"{job.pods} pods of {job.gpus_per_pod} GPUs" if job.pods > 1 else f"{job.gpus} GPUs"
    why = (
        f"no room now: no cluster it may use has {fewest}{model} free for it whole, after "
        "the jobs ahead of it in line"
    )
    if job.cluster_limit >= 2:
        why += "; beyond the round's window a job starts only whole, in one cluster"
    return why


def backfill(
    jobs: Sequence[JobRequest],
    assigned: Mapping[str, Assigned],
    pools: Pools,
    decision: Decision,
    window: Sequence[JobRequest],
    quota_room: Mapping[str, int],
    floor: int | None = None,
) -> tuple[JobDecision, ...]:
    """Step 5b: the candidates (`assigned` a cluster) in order, each whole in one cluster of
    `pools` (what the window's starts left; consumed), within the round's holds and the
    queues' quota room after the window's starts (`quota_room`); none of a priority below
    `floor` (a window job that may evict waits at that priority). A decision for every job
    of `jobs`."""
    book = book_after(decision, window, pools)
    quota = dict(quota_room)
    out: list[JobDecision] = []
    failed: dict[tuple[object, ...], str] = {}
    for job in jobs:
        fast = assigned.get(job.id)
        if fast is None or fast.cluster is None:
            out.append(JobDecision(job.id, False, reason=fast.reason if fast else "waiting"))
            continue
        if floor is not None and job.priority < floor:
            out.append(JobDecision(job.id, False, reason=below(floor)))
            continue
        left = quota.get(job.queue)
        if left is not None and left < job.gpus:
            out.append(JobDecision(job.id, False, reason=_quota_reason(job, left)))
            continue
        placed, why = _place(job, fast.cluster, pools, book, failed)
        if placed is None:
            out.append(JobDecision(job.id, False, reason=why))
            continue
        if left is not None:
            quota[job.queue] = left - job.gpus
        out.append(placed)
    return tuple(out)


def _place(
    job: JobRequest,
    candidate: str,
    pools: Pools,
    book: HoldBook,
    failed: dict[tuple[object, ...], str],
) -> tuple[JobDecision | None, str]:
    """The job whole in its candidate cluster, else in the other clusters with its GPUs free
    (fewest first), at most TRIES; within what the holds allow it."""
    binding = tuple(h.binds(job) for h in book.holds)
    shape = (job.gpu_model, job.gpus_per_pod, job.pods, job.unit, job.unit_tier, job.share_tier)
    shape += (job.allowed_clusters, binding)
    if shape in failed:
        return None, failed[shape]
    held: str | None = None
    for name in _tries(job, candidate, pools):
        models = job_models(job, pools[name])
        if not models:
            continue
        # pack_job may use any of its models: each must leave the holds their room, and each
        # is charged (over-charging only loses a start; under-charging delays a hold).
        if any(_short(book.room(job, name, m), job.gpus) for m in models):
            held = held or _held_by(book, job, name)
            continue
        shares, missing = pack_job(job, {name: job.units}, pools)
        if missing is None:
            book.charge(job, {(name, m): job.gpus for m in models}, {})
            return JobDecision(job.id, True, shares=shares), ""
    why = held or (
        f"no room after the round's starts: no cluster it may use holds its {job.gpus} GPUs "
        f"whole (at the round's start {candidate} had room for it)"
    )
    failed[shape] = why
    return None, why


def _short(allowed: int | None, gpus: int) -> bool:
    return allowed is not None and allowed < gpus


def _tries(job: JobRequest, candidate: str, pools: Pools) -> Iterator[str]:
    """Its candidate cluster, then the others with its GPUs free, fewest first (asked only
    when the candidate no longer holds it); at most TRIES."""
    if candidate in pools and _free(job, pools[candidate]) >= job.gpus:
        yield candidate
    others = sorted(
        (free, name)
        for name, pool in pools.items()
        if name != candidate
        and (job.allowed_clusters is None or name in job.allowed_clusters)
        and (free := _free(job, pool)) >= job.gpus
    )
    yield from (name for _, name in others[: TRIES - 1])


def _free(job: JobRequest, pool: ClusterPool) -> int:
    models = job_models(job, pool)
    return pool.free_gpus(models[0]) if models else 0


def _held_by(book: HoldBook, job: JobRequest, cluster: str) -> str:
    hold = next(h for h in book.holds if h.binds(job) and cluster in h.clusters)
    return (
        f"waits for the reservation ahead of it: the GPUs free in {cluster} are held for "
        f"{hold.job_id}, and it may still run when they are due"
    )


def book_after(decision: Decision, window: Sequence[JobRequest], pools: Pools) -> HoldBook:
    """The round's holds, with what the window's starts already took of their spare."""
    book = HoldBook(list(decision.holds))
    if not book.holds:
        return book
    by_id = {j.id: j for j in window}
    for d in decision.admitted:
        job = by_id.get(d.job_id)
        if job is None:
            continue
        gpus = {}
        for s in d.shares:
            # which of its models the solver used is not known here: each is charged
            for m in job_models(job, pools[s.cluster]) if s.cluster in pools else [""]:
                gpus[(s.cluster, m)] = s.gpus
        book.charge(job, gpus, {})
    return book
