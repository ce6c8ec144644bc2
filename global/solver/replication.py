"""Step 7d, the last of a round: copies of popular datasets ahead of demand (`DataOptions.
replicate_readers`). A dataset read by enough jobs lately gets a copy, without GPUs and
belonging to no job's start, in each region that has no cluster holding it, so every later
job there finds it local: its bytes cross between regions once, not once per job that stages
it. The copies are planned on what every job of the round (starts and their copies,
prefetches, grows, preemptors and their copies) left of the links (`RoundPlan.replicas`),
reserved like every copy, so they never oversubscribe a link nor take what a job needs; a
dataset already on its way into a region (`RoundInput.copying`, or a copy of the round) is not
sent again."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from volcano_global.solver.copies import Copy
from volcano_global.solver.data import DataNeeds, Item, free_links
from volcano_global.solver.gravity import DataOptions, copy_source
from volcano_global.solver.model import ClusterCapacity, LinkState, link_key

# How far back a job that read a dataset counts as one of its readers, by default (the
# simulator's and the server's `scheduling.data.reads_window_s`).
READS_WINDOW_S = 24 * 3600.0


@dataclass(frozen=True)
class Popularity:
    """How much a dataset was read lately, as the caller counts it: `readers`, the jobs that
    read it submitted within its window (waiting, running or ended); where it is and its
    size, as its DataSource says."""

    readers: int
    size_bytes: int | None
    holders: tuple[str, ...]


def popularity(
    needs: Mapping[str, DataNeeds],
    waiting: Iterable[str],
    recent: Mapping[str, Popularity],
) -> dict[str, Popularity]:
    """Per dataset: at least its waiting readers (a job may read it twice: once), at least
    `recent`'s count; where it is and its size from the waiting jobs' needs (the round's
    newest view), else from `recent`."""
    count: dict[str, int] = defaultdict(int)
    seen: dict[str, Popularity] = {}
    for job_id in waiting:
        for d in {d.name: d for d in needs.get(job_id, DataNeeds()).datasets}.values():
            if d.read_gbps is not None or not d.clusters:
                continue  # read remotely, or from outside the federation: no copy to make
            count[d.name] += 1
            seen[d.name] = Popularity(0, d.size_bytes, d.clusters)
    out = dict(recent)
    for name, p in seen.items():
        before = recent.get(name)
        readers = max(count[name], before.readers if before else 0)
        out[name] = Popularity(readers, p.size_bytes, p.holders)
    return out


def replicate(
    popular: Mapping[str, Popularity],
    clusters: Sequence[ClusterCapacity],
    links: Sequence[LinkState],
    options: DataOptions,
    regions: Mapping[str, str],
    copying: Mapping[str, Sequence[str]],
    barred: Mapping[str, Collection[str]] | None = None,
) -> tuple[Copy, ...]:
    """The round's copies ahead of demand: the most read datasets first (at least
    `replicate_readers` readers, a known size), one copy into each region without a holder
    or a copy on its way, to that region's cluster with the most free GPUs now that a link
    with at least `min_staging_gbps` left joins to a holder; from the fastest holder, at the
    rate a copy may take of what is left of that link. A cluster whose region is not known is
    in no region: never a destination, nor a region's holder (as its own region, every
    unlabelled cluster would get every popular dataset); it may still be a source. `barred`:
    dataset -> the clusters it gets no replica into now (copies there keep failing); the
    region's next cluster by free GPUs may get it instead."""
    if options.replicate_readers <= 0:
        return ()
    gpus = {c.name: sum(leaf.free_gpus for leaf in c.leaves) for c in clusters}
    members: dict[str, list[str]] = defaultdict(list)
    for c in sorted(gpus, key=lambda c: (-gpus[c], c)):
        if c in regions:
            members[regions[c]].append(c)
    free = dict(free_links(links))
    wanted = [
        (name, p)
        for name, p in popular.items()
        if p.readers >= options.replicate_readers and p.size_bytes and p.holders
    ]
    out = []
    for name, p in sorted(wanted, key=lambda x: (-x[1].readers, x[0])):
        there = set(p.holders) | set(copying.get(name, ()))
        for r in sorted(members):
            if there & set(members[r]):
                continue
            item = Item(name, p.size_bytes, p.holders)
            open_ = [d for d in members[r] if d not in (barred or {}).get(name, ())]
            copy = next(
                (c for c in (_one(item, d, free, options, regions) for d in open_) if c), None
            )
            if copy is not None:
                free[link_key(copy.source, copy.destination)] -= copy.gbps
                out.append(copy)
    return tuple(out)


def _one(
    item: Item,
    destination: str,
    free: Mapping[tuple[str, str], float],
    options: DataOptions,
    regions: Mapping[str, str],
) -> Copy | None:
    source = copy_source(item, destination, free, options, regions)
    if source is None:
        return None
    rate = min(free[link_key(source, destination)], options.staging_gbps)
    if rate < options.min_staging_gbps:
        return None
    return Copy(item.name, item.bytes or 0, source, destination, rate)
