"""Step 6b of a round (`round_plan`), after the solver: the copies each start needs where
its data is not (`stage`), reserved on the links the round's split starts left, so staging and
split jobs together never oversubscribe a link; and, for the simulator's experiment, the
copies made for waiting jobs while they wait (`prefetch`). Where a job may start given its
data is step 1b, `gravity.py`."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from volcano_global.solver.data import (
    CHECKPOINT,
    DataNeeds,
    Item,
    duration_text,
    free_links,
    items,
    size_text,
)
from volcano_global.solver.gravity import DataOptions, Steer, copy_source, wait_text
from volcano_global.solver.model import JobDecision, LinkState, link_key


@dataclass(frozen=True)
class Copy:
    """One copy a start waits for: `bytes` of `data` from `source` to `destination` at
    `gbps`, reserved on their link while it runs."""

    data: str
    bytes: int
    source: str
    destination: str
    gbps: float

    @property
    def seconds(self) -> float:
        return self.bytes * 8 / (self.gbps * 1e9) if self.gbps > 0 else math.inf


def stage(
    starts: Sequence[JobDecision],
    needs: Mapping[str, DataNeeds],
    links: Sequence[LinkState],
    options: DataOptions,
    steered: Mapping[str, Steer] | None = None,
    copying: Mapping[str, Sequence[str]] | None = None,
    regions: Mapping[str, str] | None = None,
    planned: Mapping[tuple[str, str], str] | None = None,
) -> tuple[dict[str, tuple[Copy, ...]], dict[str, str]]:
    """The copies each start needs, on the links as the round's starts leave them (each
    start's copies then taken from what is left), and the starts that cannot stage now with
    the reason (they wait): no link with the minimum rate left; data already on its way to
    that cluster (`copying`, from earlier rounds; `planned`, this round's copies so far, see
    `bound`; or an earlier start of this call: one copy, not two into the same place); or -
    for a job step 1b let stage because a holder was busy - copies at the rate left that would
    end after the holder is expected to have room. `regions`: cluster -> region, where known
    (among sources as fast, one in the destination's region)."""
    free = dict(free_links(links))
    bound = bound_earlier(copying) | dict(planned or {})
    copies: dict[str, tuple[Copy, ...]] = {}
    refused: dict[str, str] = {}
    for start in starts:
        wanted = items(needs.get(start.job_id, DataNeeds()))
        if not wanted:
            continue
        steer = (steered or {}).get(start.job_id)
        planned = _stage_one(start, wanted, links, free, options, steer, bound, regions or {})
        if isinstance(planned, str):
            refused[start.job_id] = planned
        elif planned:
            copies[start.job_id] = planned
            bound |= bound_by({start.job_id: planned}, "the start of")
    return copies, refused


def bound_earlier(copying: Mapping[str, Sequence[str]] | None) -> dict[tuple[str, str], str]:
    """The (data, destination) of the copies earlier rounds started (`RoundInput.copying`),
    with what they are as `stage` says it."""
    return {(n, d): "a copy started earlier" for n, where in (copying or {}).items() for d in where}


def bound_by(groups: Mapping[str, Sequence[Copy]], what: str) -> dict[tuple[str, str], str]:
    """The (data, destination) of this round's copies, by job: `what` names the kind of copy
    ("the start of", "a prefetch for") before the job's id. A checkpoint is a job's own."""
    return {
        (c.data, c.destination): f"{what} {job_id}"
        for job_id, group in groups.items()
        for c in group
        if c.data != CHECKPOINT
    }


def _stage_one(
    start: JobDecision,
    wanted: tuple[Item, ...],
    links: Sequence[LinkState],
    free: dict[tuple[str, str], float],
    options: DataOptions,
    steer: Steer | None,
    bound: Mapping[tuple[str, str], str],
    regions: Mapping[str, str],
) -> tuple[Copy, ...] | str:
    """One start's copies, taken from `free`; or why it waits."""
    if not options.reserve:  # the baseline: asks for the copier's rate, reserves nothing
        capacity = {x.key: x.capacity_gbps for x in links}
        unreserved = _copies(wanted, start.clusters, capacity, options, regions)
        return unreserved if isinstance(unreserved, tuple) else ()
    planned = _copies(wanted, start.clusters, free, options, regions)
    if isinstance(planned, str):
        return planned
    twice = next((c for c in planned if (c.data, c.destination) in bound), None)
    if twice is not None:
        what = bound[(twice.data, twice.destination)]
        return (
            f"{twice.data} is being copied to {twice.destination} ({what}): waiting for that copy"
        )
    longest = max((c.seconds for c in planned), default=0.0)
    if steer is not None and steer.wait_s is not None and longest > steer.wait_s:
        return (
            f"staging at the bandwidth left would take {duration_text(longest)}, longer than "
            f"waiting for room where its data is ({wait_text(steer.wait_s)}): waiting"
        )
    for copy in planned:
        free[link_key(copy.source, copy.destination)] -= copy.gbps
    return planned


def _copies(
    wanted: tuple[Item, ...],
    destinations: Sequence[str],
    free: Mapping[tuple[str, str], float],
    options: DataOptions,
    regions: Mapping[str, str] | None = None,
) -> tuple[Copy, ...] | str:
    """Every share's copies: per link, the rate it may take (at most `staging_gbps`),
    shared evenly by the copies on it; or why it cannot stage now."""
    grouped: dict[tuple[str, str], list[Item]] = defaultdict(list)
    rates: dict[tuple[str, str], float] = {}
    taken: dict[tuple[str, str], float] = defaultdict(float)
    for cluster in destinations:
        for item in wanted:
            if cluster in item.holders:
                continue
            left = {k: v - taken[k] for k, v in free.items()}
            source = copy_source(item, cluster, left, options, regions)
            if source is None and item.name == CHECKPOINT:
                continue  # its cluster is not in the round: the job starts without it
            if source is None:
                return (
                    f"cannot stage {item.name} to {cluster}: no link from a cluster that holds it"
                )
            key = (source, cluster)
            if key not in grouped:
                rate = min(left[link_key(*key)], options.staging_gbps)
                if rate < options.min_staging_gbps:
                    return (
                        f"staging {item.name} to {cluster} waits for bandwidth: "
                        f"{left[link_key(*key)]:g} Gbps free from {source}"
                    )
                taken[link_key(*key)] += rate
                rates[key] = rate
            grouped[key].append(item)
    out = []
    for (source, cluster), group in grouped.items():
        for item in group:
            share = rates[(source, cluster)] / len(group)
            out.append(Copy(item.name, item.bytes or 0, source, cluster, share))
    return tuple(out)


def started_note(copies: Sequence[Copy]) -> str:
    """`staging corpus (40 TiB) from a to b at 100 Gbps: about 55 min`."""
    return "; ".join(
        f"staging {c.data} ({size_text(c.bytes)}) from {c.source} to {c.destination} at "
        f"{c.gbps:g} Gbps: about {duration_text(c.seconds)}"
        if c.bytes
        else f"staging {c.data} (size not known) from {c.source} to {c.destination} at "
        f"{c.gbps:g} Gbps"
        for c in copies
    )


def reserved(
    links: Sequence[LinkState], copies: Mapping[str, Sequence[Copy]], options: DataOptions
) -> tuple[LinkState, ...]:
    """The links with the round's copies reserved on them (unless copies are not reserved)."""
    if not options.reserve:
        return tuple(links)
    more: dict[tuple[str, str], float] = defaultdict(float)
    for group in copies.values():
        for c in group:
            more[link_key(c.source, c.destination)] += c.gbps
    return tuple(replace(x, reserved_gbps=x.reserved_gbps + more[x.key]) for x in links)


def prefetch(
    steered: Mapping[str, Steer],
    started: set[str],
    needs: Mapping[str, DataNeeds],
    links: Sequence[LinkState],
    options: DataOptions,
    regions: Mapping[str, str] | None = None,
    bound: Iterable[tuple[str, str]] = (),
    probes: Collection[str] = (),
) -> dict[str, tuple[Copy, ...]]:
    """The copies of the waiting jobs step 1b chose to fetch for (`Steer.prefetch_to`), on
    the links as the round's starts and their copies left them; one per dataset and
    destination, never one already on its way there (`bound`: (data, destination) of earlier
    rounds' copies and this round's starts'). Into a cluster of `probes` (its copies kept
    failing; one tries again) only the first job's copies actually planned go: decided
    here, not in step 1b, so a job whose copies find no bandwidth, or that starts, leaves the
    probe to the next."""
    free = dict(free_links(links))
    out: dict[str, tuple[Copy, ...]] = {}
    fetched = set(bound)
    probed: set[str] = set()
    for job_id, s in steered.items():
        if s.prefetch_to is None or job_id in started or s.prefetch_to in probed:
            continue
        wanted = tuple(i for i in items(needs[job_id]) if (i.name, s.prefetch_to) not in fetched)
        planned = _copies(wanted, (s.prefetch_to,), free, options, regions) if wanted else ()
        if isinstance(planned, str) or not planned:
            continue
        for copy in planned:
            free[link_key(copy.source, copy.destination)] -= copy.gbps
            if copy.data != CHECKPOINT:  # each job's own, though all share the name
                fetched.add((copy.data, copy.destination))
        out[job_id] = planned
        if s.prefetch_to in probes:
            probed.add(s.prefetch_to)
    return out
