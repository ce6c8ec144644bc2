"""Data gravity: where a job's bytes are decides where it may start (step 1b of
`round_plan`; the copies after the solver, step 6b, are `copies.py`).

Step 1b, `steer`, before the solver: for each waiting job that reads data (`DataNeeds`), every
cluster is either a *holder* (it has every dataset the job must read locally, and its newest
checkpoint) or a place the job can start only after *staging*: the missing bytes over the
bandwidth a copy may take on the link from a cluster that holds them. The job may start at once
in a holder, so the round compares, per cluster, staging there with waiting for a holder - when
running jobs are expected to leave a holder room (their expected ends, by GPU counts as the
outcomes estimate it) - and lets the solver use the holders and every cluster whose staging
ends sooner than that wait: the earlier expected start, so the earlier expected completion for
the same run; only into clusters with room now, and near the fastest such copy. Priorities
and fair share are untouched: the order the solver sees is step 1's. What earlier jobs in the
order were promised counts (`Room.claim`), so the tenth job waiting for a busy holder is not
told the room the first will take.

Modes (`DataMode`): `gravity` (the above), `holders` (Volcano Global's DataDependencyAwareness:
only the clusters that hold the data, whatever the wait) and `oblivious` (place by GPUs, then
stage: MultiKueue-like, and this engine with the data term off). All three stage what a start
lacks through step 6b.

`Room` is an estimate by GPU counts per cluster and model, as `outcomes` estimates when room
comes; the solver, not this step, decides whether a job fits.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from volcano_global.solver.data import (
    CHECKPOINT,
    DataNeeds,
    Item,
    crosses_regions,
    duration_text,
    free_links,
    items,
    size_text,
    source_for,
)
from volcano_global.solver.model import (
    ClusterCapacity,
    JobRequest,
    LinkState,
    RunningJob,
    link_key,
)
from volcano_global.solver.room import DEFAULT_RUN_S, Room

NEAR_BEST = 1.25  # a copy this much slower than the fastest one still counts as fast
_NO_LINK, _NO_BANDWIDTH, _NO_SIZE = "no link", "no bandwidth", "no size"
_UNKNOWN_S = 1e18  # a copy of unknown size, when nothing else can serve: finite, last


class DataMode(StrEnum):
    GRAVITY = "gravity"
    HOLDERS = "holders"
    OBLIVIOUS = "oblivious"


@dataclass(frozen=True)
class DataOptions:
    mode: DataMode = DataMode.GRAVITY
    # The most one share's copies take on a link (a copier's rate), and the least they may
    # start with: below it the job waits for bandwidth rather than crawl.
    staging_gbps: float = 100.0
    min_staging_gbps: float = 10.0
    # False: copies are not reserved on the links; each asks for `staging_gbps` and gets what
    # the link's other flows leave (a system that stages outside the scheduler's view, the
    # MultiKueue-like baseline of bench/data_bench.py). Never the product's setting.
    reserve: bool = True
    # A job that waits for a holder has its data copied now, without GPUs, to the cluster
    # expected to have room for it before the holder does (`prefetch`). The server runs these
    # copies as `data_copies` (setting `scheduling.data.prefetch`, on by default there).
    prefetch: bool = False
    # A copy that leaves its region (egress, where clusters' regions are known) is weighed as
    # if it took this much longer (0.5: 1.5 times as long): it must save more than that over
    # waiting for a holder, and over staging inside the region, to be chosen.
    cross_region_margin: float = 0.0
    # A dataset read by at least this many jobs lately gets a copy, without GPUs, in each
    # region without a holder (`replication.replicate`); 0: never.
    replicate_readers: int = 0


@dataclass(frozen=True)
class Steer:
    """What step 1b decided for one job: the clusters it may use (None: any), why in words,
    and how long it is expected to wait for a holder (None: it need not)."""

    allowed: tuple[str, ...] | None
    note: str
    wait_s: float | None = None
    prefetch_to: str | None = None  # copy its data there now, while it waits


# -- step 1b --------------------------------------------------------------------------------
def steer(
    jobs: Sequence[JobRequest],
    needs: Mapping[str, DataNeeds],
    *,
    clusters: Sequence[ClusterCapacity],
    links: Sequence[LinkState],
    running: Sequence[RunningJob],
    options: DataOptions,
    copying: Mapping[str, Sequence[str]] | None = None,
    evicting: bool = False,
    regions: Mapping[str, str] | None = None,
    no_prefetch: Mapping[str, Sequence[str]] | None = None,
    no_copies_into: Mapping[str, str] | None = None,
) -> tuple[list[JobRequest], dict[str, Steer]]:
    """The jobs with the clusters their data lets them use (`allowed_clusters` narrowed),
    and for each job that reads data what was decided. `copying`: data already on its way
    (name -> destinations), never fetched again. `evicting`: the round may evict (a job that
    may evict may then be steered where it has no room yet). `regions`: cluster -> region,
    where known (copies that leave a region weigh `cross_region_margin` more). `no_prefetch`:
    job id -> clusters its data is not copied into while it waits (a copy there failed lately,
    or the cluster's agent cannot run one). `no_copies_into`: cluster -> why no job's data is
    copied into it while it waits (copies into it keep failing), said in the job's note. A
    cluster open to one probe copy is open here: step 6b (`copies.prefetch`) lets one job's
    copy go there, the first it can plan."""
    if options.mode is DataMode.OBLIVIOUS or not needs:
        return list(jobs), {}
    free = free_links(links)
    room = Room(clusters, running)
    names = [c.name for c in clusters]
    out, decided = [], {}
    refused = no_copies_into or {}
    for job in jobs:
        wanted, lost = _restorable(items(needs.get(job.id, DataNeeds())), names)
        if not wanted:
            out.append(job)
            if lost:
                decided[job.id] = Steer(None, lost)
            continue
        barred = frozenset((no_prefetch or {}).get(job.id, ()))
        s = _steer_one(
            job, wanted, names, free, room, options, evicting, regions or {}, barred,
            refused,
        )  # fmt: skip
        if lost:
            s = replace(s, note=f"{lost}; {s.note}")
        moving = [i.name for i in wanted if i.name in (copying or {})]
        if s.prefetch_to is not None and moving:  # on its way already: said, not fetched again
            where = {c for name in moving for c in (copying or {})[name]}
            note = s.note.removesuffix(f"; copying it to {s.prefetch_to} meanwhile")
            said = f"{', '.join(moving)} is being copied to {_list(sorted(where))} meanwhile"
            s = replace(s, prefetch_to=None, note=f"{note}; {said}")
        decided[job.id] = s
        out.append(_narrowed(job, s.allowed))
    return out, decided


def where_held(job: JobRequest, needs: DataNeeds | None) -> JobRequest:
    """`job` allowed only the clusters that hold all it reads (none: as it is)."""
    wanted = items(needs) if needs is not None else ()
    if not wanted:
        return job
    held = set.intersection(*(set(i.holders) for i in wanted))
    if job.allowed_clusters is not None:
        held &= set(job.allowed_clusters)
    return replace(job, allowed_clusters=tuple(sorted(held)))


def _restorable(wanted: tuple[Item, ...], names: list[str]) -> tuple[tuple[Item, ...], str]:
    """The items without a checkpoint no cluster of the round holds (its cluster left, or is
    not Ready: the job restarts without it rather than wait for a cluster that may not come
    back), and what is said of it."""
    gone = [i for i in wanted if i.name == CHECKPOINT and not set(i.holders) & set(names)]
    if not gone:
        return wanted, ""
    where = ", ".join(gone[0].holders)
    kept = tuple(i for i in wanted if i.name != CHECKPOINT)
    return kept, f"its checkpoint is in {where}, which is not in the round: starting without it"


def _steer_one(
    job: JobRequest,
    wanted: tuple[Item, ...],
    names: list[str],
    free: Mapping[tuple[str, str], float],
    room: Room,
    options: DataOptions,
    evicting: bool,
    regions: Mapping[str, str],
    barred: frozenset[str] = frozenset(),
    refused: Mapping[str, str] | None = None,
) -> Steer:
    """Step 1b for one job: run where its data is if room comes first there, else stage it
    where it would start sooner (`_faster`), else wait, copying it meanwhile (`_waits`)."""
    usable = [c for c in names if job.allowed_clusters is None or c in job.allowed_clusters]
    holders = tuple(c for c in usable if all(c in i.holders for i in wanted))
    if options.mode is DataMode.HOLDERS:
        return Steer(holders, f"{_what(wanted)}: only where it is ({_list(holders)})")
    wait, group = room.wait_s(job, holders)
    run = job.estimate_s or DEFAULT_RUN_S
    if wait == 0 and room.fits_now(job, holders):
        room.claim(group, 0.0, job.gpus, run)
        return Steer(holders, f"{_what(wanted)} is in {_list(holders)}, which has room")
    if wait == 0:  # enough GPUs, not in the shape the job needs: until the next end there
        wait = room.next_end(group)
    staged = {c: _stage_s(wanted, c, free, options, regions) for c in usable if c not in holders}
    weight = {
        c: 1.0 + options.cross_region_margin
        for c in staged
        if _leaves(wanted, c, free, options, regions)
    }
    faster = _faster(job, staged, wait, room, evicting and bool(job.may_evict_for), weight)
    if not faster and not math.isfinite(wait):  # no holder ever: copy what has no size too
        staged |= {c: (_UNKNOWN_S, v[1], v[2]) for c, v in staged.items() if v[2] == _NO_SIZE}
        faster = _faster(job, staged, wait, room, evicting and bool(job.may_evict_for), weight)
    target, refusal = (
        _prefetch_target(job, staged, wait, room, weight, barred, refused or {})
        if options.prefetch
        else (None, "")
    )
    need = job.unit_gpus if job.splittable and job.cluster_limit > 1 else job.gpus
    waits = not any(room.free_now(job, c) >= need for c in faster)  # no room now to stage in
    if faster and target is not None and waits:
        # Only an eviction could make room where it would stage: copying the data without
        # GPUs to where room comes first beats evicting to stage there (GPUs held while it
        # copies), when such a place exists (one a copy may go to now); else the eviction
        # path stays.
        faster = ()
    if not faster:
        note = _waiting_note(wanted, holders, staged, wait) + refusal
        return _waits(job, holders, note, wait, group, room, target, staged)
    best = faster[0]
    room.claim(tuple(room.keys(job, (best,))), 0.0, job.gpus, staged[best][0] + run)
    sooner = f", sooner than room in {_list(holders)} ({wait_text(wait)})" if holders else ""
    note = f"{_what(wanted)} is in {_list(_where(wanted))}; {_staging_text(best, *staged[best])}"
    # A refused prefetch is said only to a job that waits (not one that starts staging).
    return Steer(holders + faster, note + sooner + (refusal if waits else ""), wait)


def _prefetch_target(
    job: JobRequest,
    staged: Mapping[str, tuple[float, float, str]],
    wait: float,
    room: Room,
    weight: Mapping[str, float],
    barred: frozenset[str],
    refused: Mapping[str, str],
) -> tuple[str | None, str]:
    """The cluster where a copy started now and room for the job are both expected soonest,
    if sooner than a holder has room (a copy that leaves its region counted `weight` times
    its length, as for staging); never one of `barred`. With what is said when that cluster
    takes no copies now (`refused`: the next one is chosen, and the job waits the longer, so
    the caller says it only to a job that waits)."""

    def soonest(barred: frozenset[str]) -> str | None:
        ready = {
            c: max(room.wait_s(job, (c,))[0], seconds * weight.get(c, 1.0))
            for c, (seconds, *_) in staged.items()
            if math.isfinite(seconds) and c not in barred
        }
        best = min(ready, key=lambda c: (ready[c], c), default=None)
        return best if best is not None and ready[best] < wait else None

    target = soonest(barred)
    if target is None or target not in refused:
        return target, ""
    refusal = f"; not copying it to {target} meanwhile: {refused[target]}"
    return soonest(barred | frozenset(refused)), refusal


def _waits(
    job: JobRequest,
    holders: tuple[str, ...],
    note: str,
    wait: float,
    group: tuple[tuple[str, str], ...],
    room: Room,
    target: str | None,
    staged: Mapping[str, tuple[float, float, str]],
) -> Steer:
    """The job waits for room where its data is (`group`, in `wait` s), or, with a copy to
    `target` meanwhile, for the copy and room there, whichever its GPUs are claimed from."""
    run = job.estimate_s or DEFAULT_RUN_S
    if target is not None:
        ready = max(room.wait_s(job, (target,))[0], staged[target][0])
        room.claim(tuple(room.keys(job, (target,))), ready, job.gpus, run)
        return Steer(holders, f"{note}; copying it to {target} meanwhile", wait, target)
    if math.isfinite(wait):
        room.claim(group, wait, job.gpus, run)
    return Steer(holders, note, wait)


def _faster(
    job: JobRequest,
    staged: Mapping[str, tuple[float, float, str]],
    wait: float,
    room: Room,
    evicts: bool,
    weight: Mapping[str, float],
) -> tuple[str, ...]:
    """The clusters the job may stage into, fastest first: room for it now (a split job: for
    one of its units; a job that may evict: room or not, step 7 may make it), and a copy that
    ends before a holder is expected to have room and within `NEAR_BEST` of the fastest such
    copy - so a copy over a thin link between regions is not taken where a fat link inside the
    region serves nearly as soon. A copy that leaves its region counts `weight` times its
    length (`DataOptions.cross_region_margin`)."""
    need = job.unit_gpus if job.splittable and job.cluster_limit > 1 else job.gpus
    ready = {
        c: seconds * weight.get(c, 1.0)
        for c, (seconds, *_) in staged.items()
        if seconds * weight.get(c, 1.0) < wait and (evicts or room.free_now(job, c) >= need)
    }
    if not ready:
        return ()
    best = min(ready.values())
    near = [c for c, seconds in ready.items() if seconds <= best * NEAR_BEST + 60.0]
    return tuple(sorted(near, key=lambda c: (ready[c], c)))


def _waiting_note(
    wanted: tuple[Item, ...],
    holders: tuple[str, ...],
    staged: Mapping[str, tuple[float, float, str]],
    wait: float,
) -> str:
    """`dataset corpus (40 TiB) is in a; staging to b at 100 Gbps takes 55 min; a has room in
    about 20 min: waiting for a`."""
    text = f"{_what(wanted)} is in {_list(_where(wanted))}"
    reachable = {c: v for c, v in staged.items() if math.isfinite(v[0])}
    if reachable:
        best = min(reachable, key=lambda c: (reachable[c][0], c))
        text += "; " + _staging_text(best, *reachable[best])
    elif staged:
        text += "; " + _unstageable(staged)
    if holders:
        return f"{text}; {_list(holders)} has room {wait_text(wait)}: waiting for {_list(holders)}"
    return text + ": waiting"


def _staging_text(cluster: str, seconds: float, gbps: float, *_: str) -> str:
    if seconds == _UNKNOWN_S:
        return f"staging to {cluster} at {gbps:g} Gbps takes a time not known (its size is not)"
    return f"staging to {cluster} at {gbps:g} Gbps takes {duration_text(seconds)}"


def _unstageable(staged: Mapping[str, tuple[float, float, str]]) -> str:
    whys = {v[2] for v in staged.values()}
    if _NO_SIZE in whys:
        return "its size is not known, so staging cannot be weighed against waiting"
    if _NO_BANDWIDTH in whys:
        return "no link from it has bandwidth for staging now"
    return "no link joins it to another cluster of the round"


def wait_text(wait: float) -> str:
    return "at no time known" if not math.isfinite(wait) else f"in about {duration_text(wait)}"


def copy_source(
    item: Item,
    cluster: str,
    free: Mapping[tuple[str, str], float],
    options: DataOptions,
    regions: Mapping[str, str] | None,
) -> str | None:
    """Where a copy of `item` to `cluster` comes from, as these options weigh links."""
    return source_for(
        item, cluster, free, options.staging_gbps, regions, options.cross_region_margin
    )


def _stage_s(
    wanted: tuple[Item, ...],
    cluster: str,
    free: Mapping[tuple[str, str], float],
    options: DataOptions,
    regions: Mapping[str, str],
) -> tuple[float, float, str]:
    """Seconds until everything `wanted` is in `cluster`, the slowest link's rate, and why
    not ("" when it can): copies on different links run side by side, copies on one link
    share it (inf: some item cannot come, or its time cannot be known)."""
    on_link: dict[tuple[str, str], float] = defaultdict(float)
    rate: dict[tuple[str, str], float] = {}
    why = ""
    for item in wanted:
        if cluster in item.holders:
            continue
        source = copy_source(item, cluster, free, options, regions)
        if source is None:
            return math.inf, 0.0, _NO_LINK
        key = link_key(source, cluster)
        rate[key] = min(free[key], options.staging_gbps)
        if rate[key] < options.min_staging_gbps:
            return math.inf, 0.0, _NO_BANDWIDTH
        if item.bytes is None:
            why = _NO_SIZE  # it can come, in a time not known
        on_link[key] += (item.bytes or 0) * 8
    if why:
        return math.inf, min(rate.values()), why
    seconds = max((bits / (rate[k] * 1e9) for k, bits in on_link.items()), default=0.0)
    return seconds, min(rate.values(), default=0.0), ""


def _leaves(
    wanted: tuple[Item, ...],
    cluster: str,
    free: Mapping[tuple[str, str], float],
    options: DataOptions,
    regions: Mapping[str, str],
) -> bool:
    """Whether staging into `cluster` copies something from another region."""
    if not regions or not options.cross_region_margin:
        return False
    for item in wanted:
        if cluster in item.holders:
            continue
        source = copy_source(item, cluster, free, options, regions)
        if source is not None and crosses_regions(source, cluster, regions):
            return True
    return False


def _narrowed(job: JobRequest, allowed: tuple[str, ...] | None) -> JobRequest:
    if allowed is None:
        return job
    return replace(job, allowed_clusters=tuple(sorted(allowed)))


def _what(wanted: tuple[Item, ...]) -> str:
    return ", ".join(
        f"{'' if i.name == CHECKPOINT else 'dataset '}{i.name}"
        + (f" ({size_text(i.bytes)})" if i.bytes is not None else "")
        for i in wanted
    )


def _where(wanted: tuple[Item, ...]) -> tuple[str, ...]:
    return tuple(sorted({h for i in wanted for h in i.holders}))


def _list(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "no cluster"
