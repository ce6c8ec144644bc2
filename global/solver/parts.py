"""Step 5c of a round (`round_plan.py`): the HyperJobs whose children differ - in GPU model,
pods, GPUs per pod or the clusters they name (Volcano's heterogeneous HyperJob, `model.Part`)
- placed child by child, all children or none (the cross-cluster gang).

The model (`cpsat_model`) plans jobs of one pod shape; such a job is taken out of the line
before the window is cut (`split_off`) and placed after the solve and the backfill (5b), on
what they left, in queue order, within the round's reservations (`reservations.HoldBook`),
its queue's quota room and the links' free bandwidth:

- each child whole in one cluster that has its GPU model (among others or alone; a child
  that names none, a cluster of one model: its member Job pins none) and that its
  `clusterNames` allow;
- a cluster's share holds children of one GPU model and pod size (the shares' books read one
  model and pod size per share: the share carries its model, `Share.gpu_model`, as the job
  names none), and only children next to each other in the document (a share owns a
  contiguous range of the job's ranks, `jobspec/members.py`): a cluster, once left, is not
  returned to;
- at most `max_clusters` clusters (`spec.maxDomains`), and for a job that declares
  communication, every pair of them linked with the traffic model's demand free
  (`traffic.pair_demand_gbps`), which the placement reserves as for any split.

A depth-first search over the children in document order - the cluster before first (fewer
crossings), then the unused clusters that hold the child, fewest free GPUs of its model first
- within `MAX_TRIES` placements per job. Such a job never evicts, is owed no reservation and
starts only at all its children (a first version: docs/placement.md, "HyperJobs whose
children differ").
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from volcano_global.solver import whole_queue
from volcano_global.solver.baselines import reservations_for
from volcano_global.solver.capacity import job_models
from volcano_global.solver.free_pools import after, replays_alike, reserved
from volcano_global.solver.model import (
    JobDecision,
    JobRequest,
    LinkBandwidth,
    Part,
    Share,
    Snapshot,
    link_key,
)
from volcano_global.solver.packing import Pools, pack_job
from volcano_global.solver.reservations import HoldBook
from volcano_global.solver.traffic import pair_demand_gbps

if TYPE_CHECKING:
    from volcano_global.solver.round_plan import RoundInput

MAX_TRIES = 500  # children placed (and taken back) while one job's search goes on


def split_off(line: Sequence[JobRequest]) -> tuple[list[JobRequest], list[JobRequest]]:
    """The line without the jobs placed child by child, and those, each in its order."""
    return [j for j in line if not j.parts], [j for j in line if j.parts]


def part_request(job: JobRequest, part: Part) -> JobRequest:
    """One child as the packing reads a job: whole in one cluster."""
    return JobRequest(
        id=job.id,
        pods=part.pods,
        gpus_per_pod=part.gpus_per_pod,
        gpu_model=part.gpu_model,
        unit_pods=part.unit_pods,
        priority=job.priority,
        queue=job.queue,
        unit_tier=part.unit_tier,
        share_tier=part.share_tier,
        allowed_clusters=part.allowed_clusters,
        estimate_s=job.estimate_s,
    )


def placed(
    snapshot: Snapshot,
    filled: whole_queue.Filled,
    line: whole_queue.Line,
    jobs: Sequence[JobRequest],
    data: RoundInput,
    *,
    evicting: bool,
    solved: Pools | None,
) -> whole_queue.Filled:
    """Step 5c on what steps 5 and 5b left (`filled`): the decision with one for every
    parted job, and the pools and links after their starts. `evicting` and `solved` as in
    `whole_queue.backfilled`."""
    if not jobs:
        return filled
    decision = filled.decision
    if decision.status == "ERROR":  # no holds were planned: nothing starts behind the window
        why = next((d.reason for d in decision.jobs if d.reason), "the round failed")
        more = tuple(JobDecision(j.id, False, reason=why) for j in jobs)
        return replace(filled, decision=replace(decision, jobs=decision.jobs + more))
    if filled.pools is not None:
        pools, taken = filled.pools, dict(filled.links)
    elif solved is not None and replays_alike(decision, solved):
        pools, taken = solved, reserved(decision)
    else:
        pools, taken = after(snapshot, decision, filled.beyond)
    started = [*line.window, *line.beyond]
    queues = whole_queue.rooms(
        whole_queue.held_after(data.tree, decision, started),
        {w.request.queue for w in data.waiting},
    )
    room = Room(
        pools,
        {x.key: x.free_gbps - taken.get(x.key, 0.0) for x in snapshot.links},
        whole_queue.book_after(decision, started, pools),
        queues,
    )
    floor = whole_queue.preemptors_priority(decision, line.window) if evicting else None
    more = place_parted(jobs, room, floor)
    links = dict(taken)
    for d in more:
        for r in d.reservations:
            links[link_key(r.a, r.b)] = links.get(link_key(r.a, r.b), 0.0) + r.gbps
    return whole_queue.Filled(
        replace(decision, jobs=decision.jobs + more), (*filled.beyond, *jobs), pools, links
    )


@dataclass
class Room:
    """What the round leaves for the parted jobs, consumed as they start: the clusters' pools,
    the links' free bandwidth, the reservations' spare and the capped queues' GPUs."""

    pools: Pools
    links: dict[tuple[str, str], float]
    book: HoldBook
    quota: dict[str, int] = field(default_factory=dict)


def place_parted(
    jobs: Sequence[JobRequest], room: Room, floor: int | None = None
) -> tuple[JobDecision, ...]:
    """Step 5c: a decision for each job, in order; `room` is consumed by the starts. None of
    a priority below `floor` starts (a window job that may evict waits at that priority)."""
    out = []
    for job in jobs:
        left = room.quota.get(job.queue)
        if floor is not None and job.priority < floor:
            why = (
                f"waits behind a job of priority {floor} ahead of it in line, which may evict "
                "to start: the room it would make is not taken from behind"
            )
        elif left is not None and left < job.gpus:
            why = f"queue {job.queue} may take {max(left, 0)} more GPUs now; it needs {job.gpus}"
        else:
            placed, why = _place(job, room)
            if placed is not None:
                if left is not None:
                    room.quota[job.queue] = left - job.gpus
                out.append(placed)
                continue
        out.append(JobDecision(job.id, False, reason=why))
    return tuple(out)


@dataclass
class _Frame:
    """One child's turn in the search: the clusters still to try, and where it went."""

    tries: Iterator[str]
    cluster: str = ""  # where it went (when placed) or was last tried
    placed: bool = False
    mark: int = 0
    domains: tuple[tuple[str, int], ...] = ()


def _place(job: JobRequest, room: Room) -> tuple[JobDecision | None, str]:
    """The job's children placed (the pools, links and book charged), or None and why. A
    child no cluster has its GPUs free for (counts only) fails it before any search."""
    short = next((p for p in _alike(job) if not _counted(job, p, room)), None)
    if short is not None:
        return None, _no_room(job, short, room)
    frames, exhausted = _search(job, room)
    if frames is None:
        return None, _why_not(job, room, exhausted=exhausted)
    return _started(job, frames, reservations_for(job, _clusters(frames)), room), ""


def _search(job: JobRequest, room: Room) -> tuple[list[_Frame] | None, bool]:
    """Depth first over the children in order: every child placed (in the pools, with the
    links free for the clusters used), or None and whether the tries ran out first."""
    frames = [_Frame(_candidates(job, [], room))]
    tried = 0
    while frames:
        frame = frames[-1]
        _undo(frame, room)  # a child placed before tries its next cluster
        for cluster in frame.tries:
            if tried >= MAX_TRIES:
                for f in reversed(frames):
                    _undo(f, room)
                return None, True
            tried, frame.cluster = tried + 1, cluster
            _put(job, job.parts[len(frames) - 1], frame, frames, room)
            if frame.placed:
                break
        if not frame.placed:
            frames.pop()
        elif len(frames) < len(job.parts):
            frames.append(_Frame(_candidates(job, frames, room)))
        elif _links_free(job, reservations_for(job, _clusters(frames)), room):
            return frames, False
    return None, False


def _candidates(job: JobRequest, frames: list[_Frame], room: Room) -> Iterator[str]:
    """Where the next child may go: the cluster of the child before it (if of its shape),
    then the clusters the job does not use yet that hold it, fewest free GPUs first (looked
    for only when asked: the pools are then as they were when the frame began)."""
    part = job.parts[len(frames)]
    used = _clusters(frames)
    before = frames[-1].cluster if frames else ""
    first = []
    if before and job.parts[len(frames) - 1].shape == part.shape:
        if _may_use(job, part, before):
            first.append(before)
    if len(used) >= _limit(job):
        return iter(first)
    return itertools.chain(first, _unused(job, part, set(used), room))


def _unused(job: JobRequest, part: Part, used: set[str], room: Room) -> Iterator[str]:
    request = part_request(job, part)
    fitting = []
    for name, pool in room.pools.items():
        if name in used or not _may_host(job, part, name, room):
            continue
        free = max((pool.free_gpus(m) for m in job_models(request, pool)), default=-1)
        if free >= part.gpus:
            fitting.append((free, name))
    yield from (name for _, name in sorted(fitting))


def _put(job: JobRequest, part: Part, frame: _Frame, frames: list[_Frame], room: Room) -> None:
    """The child in `frame.cluster` if it fits there within the holds' spare (with what the
    children before it took there); `frame.placed` says whether it did."""
    cluster = frame.cluster
    request = part_request(job, part)
    pool = room.pools[cluster]
    models = job_models(request, pool)
    if room.book.holds:  # within their spare, with what the children before took there
        before = zip(job.parts, frames[:-1], strict=False)
        taken = sum(p.gpus for p, f in before if f.cluster == cluster)
        for m in models:
            allowed = room.book.room(job, cluster, m)
            if allowed is not None and allowed < taken + part.gpus:
                return
    mark = pool.mark()
    shares, missing = pack_job(request, {cluster: request.units}, room.pools)
    if missing is None and models:
        frame.placed, frame.mark = True, mark
        frame.domains = shares[0].domains if shares else ()


def _undo(frame: _Frame, room: Room) -> None:
    """The frame's child taken back out of its cluster (the children after it already are)."""
    if frame.placed:
        room.pools[frame.cluster].rollback(frame.mark)
    frame.placed, frame.domains = False, ()


def _may_use(job: JobRequest, part: Part, cluster: str) -> bool:
    """Whether the child may run in the cluster: its `clusterNames`, and where the job's data
    lets it start (step 1b may narrow the job's clusters, `gravity.steer`)."""
    return all(
        names is None or cluster in names for names in (part.allowed_clusters, job.allowed_clusters)
    )


def _may_host(job: JobRequest, part: Part, cluster: str, room: Room) -> bool:
    """Whether the child may open a share in the cluster: it may use it, and a child of GPUs
    that names no model only in a cluster of one model. Its member Job pins no model (a
    Kubernetes agent adds no node selector for the share's), so in a cluster of several its
    pods could run on another model's GPUs than the ones its share's books hold."""
    unpinned = part.gpu_model is None and part.gpus_per_pod > 0
    return _may_use(job, part, cluster) and not (unpinned and len(room.pools[cluster].models()) > 1)


def _limit(job: JobRequest) -> int:
    """Clusters the job may span (`spec.maxDomains`; at most one per child)."""
    return max(1, min(job.max_clusters, len(job.parts)))


def _clusters(frames: list[_Frame]) -> list[str]:
    """The clusters the placed children use, in order of first use."""
    return list(dict.fromkeys(f.cluster for f in frames if f.placed))


def _links_free(job: JobRequest, links: tuple[LinkBandwidth, ...], room: Room) -> bool:
    for r in links:
        key = link_key(r.a, r.b)
        free = room.links.get(key)
        held = room.book.link_room(job, key)
        if free is None or free < r.gbps or (held is not None and held < r.gbps):
            return False
    return True


def _started(
    job: JobRequest, frames: list[_Frame], links: tuple[LinkBandwidth, ...], room: Room
) -> JobDecision:
    """The placed children as shares, one per run of children in one cluster (document
    order: the ranks' order), and the book and links charged."""
    shares: list[Share] = []
    gpus: dict[tuple[str, str], int] = {}
    for part, frame in zip(job.parts, frames, strict=True):
        cluster = frame.cluster
        for m in job_models(part_request(job, part), room.pools[cluster]) or [""]:
            gpus[(cluster, m)] = gpus.get((cluster, m), 0) + part.gpus
        if shares and shares[-1].cluster == cluster:
            last = shares[-1]
            domains = dict(last.domains)
            for leaf, pods in frame.domains:
                domains[leaf] = domains.get(leaf, 0) + pods
            shares[-1] = Share(
                cluster,
                last.units + 1,
                last.pods + part.pods,
                last.gpus + part.gpus,
                tuple(sorted(domains.items())),
                part.gpu_model,
            )
        else:
            shares.append(Share(cluster, 1, part.pods, part.gpus, frame.domains, part.gpu_model))
    charged = {link_key(r.a, r.b): r.gbps for r in links}
    room.book.charge(job, gpus, charged)
    for key, gbps in charged.items():
        room.links[key] -= gbps
    return JobDecision(job.id, True, shares=tuple(shares), reservations=links)


def _why_not(job: JobRequest, room: Room, *, exhausted: bool) -> str:
    """Why the job waits: the first child that fits in no cluster it may use (within the
    round's reservations), else that its children do not fit together."""
    short = next((p for p in _alike(job) if not _fits_alone(job, p, room)), None)
    if short is not None:
        return _no_room(job, short, room)
    if exhausted:
        return (
            f"no placement of its {len(job.parts)} children found within {MAX_TRIES} tries "
            "this round; no child starts until all can"
        )
    demand = pair_demand_gbps(job.allreduce_gbps, 2)
    link = f", each pair linked with {demand:g} Gbps free for two (less for more)" if demand else ""
    return (
        f"its {len(job.parts)} children fit one by one but not together in at most "
        f"{_limit(job)} clusters{link} (a cluster holds adjacent children of one GPU "
        "model and pod size); no child starts until all can"
    )


def _alike(job: JobRequest) -> list[Part]:
    """The first child of each kind (what fitting alone reads), in order."""
    first: dict[tuple[object, ...], Part] = {}
    for p in job.parts:
        first.setdefault(
            (
                p.gpu_model,
                p.pods,
                p.gpus_per_pod,
                p.allowed_clusters,
                p.unit_pods,
                p.unit_tier,
                p.share_tier,
            ),
            p,
        )
    return list(first.values())


def _no_room(job: JobRequest, part: Part, room: Room) -> str:
    model = f" of {part.gpu_model}" if part.gpu_model else ""
    where = "any cluster"
    if part.allowed_clusters is not None or job.allowed_clusters is not None:
        where = ", ".join(n for n in room.pools if _may_use(job, part, n)) or "none"
    mixed = [n for n in room.pools if _may_use(job, part, n) and not _may_host(job, part, n, room)]
    skipped = (
        f"; naming no GPU model, not in clusters of several ({', '.join(mixed)})" if mixed else ""
    )
    return (
        f"no room now for child {part.name}: {part.pods} pods of {part.gpus_per_pod} "
        f"GPUs{model} whole in one cluster it may use ({where}), after the round's "
        f"starts and within its reservations{skipped}; no child starts until all can"
    )


def _counted(job: JobRequest, part: Part, room: Room) -> bool:
    """Whether a cluster the child may use has its GPUs of its model free (counts only)."""
    request = part_request(job, part)
    return any(
        _may_host(job, part, name, room)
        and max((pool.free_gpus(m) for m in job_models(request, pool)), default=-1) >= part.gpus
        for name, pool in room.pools.items()
    )


def _fits_alone(job: JobRequest, part: Part, room: Room) -> bool:
    """Whether the child alone fits in a cluster it may use (nothing kept)."""
    for name in room.pools:
        if _may_host(job, part, name, room):
            frame = _Frame(iter(()), cluster=name)
            _put(job, part, frame, [frame], room)
            if frame.placed:
                _undo(frame, room)
                return True
    return False


__all__ = ["MAX_TRIES", "Room", "part_request", "place_parted", "split_off"]
