"""What a job needs of data, as a round reads it: the datasets it reads (their size, the
clusters that hold them, whether it may read them remotely instead of staging them) and its
newest checkpoint (size, and the cluster it was written in). Built by
`services.data.data_needs` from the job's DataSourceClaims, its declaration and the inventory
of DataSources; pure values here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from volcano_global.solver.model import LinkState, link_key


@dataclass(frozen=True)
class DatasetNeed:
    """One dataset a job reads. `clusters` are the clusters that hold it now (empty: none
    known, so it must come from outside the federation or be staged from where it is said to
    be); `size_bytes` None: unknown. `read_gbps`: the job may read it remotely at this rate
    instead of staging it first (None: it must be local before the job starts)."""

    name: str
    size_bytes: int | None
    clusters: tuple[str, ...]
    read_gbps: float | None = None
    # Where the need comes from: a DataSourceClaim (`namespace/name`) or the job's declaration.
    source: Literal["claim", "declaration"] = "claim"
    claim: str | None = None
    bound: bool = True  # False: no DataSource of that name is stored (locality unknown)


@dataclass(frozen=True)
class CheckpointNeed:
    """The job's newest checkpoint: its size (reported, else declared) and the cluster it
    was written in (None: never reported, so it holds nothing to restore)."""

    size_bytes: int | None
    cluster: str | None


@dataclass(frozen=True)
class DataNeeds:
    datasets: tuple[DatasetNeed, ...] = ()
    checkpoint: CheckpointNeed | None = None

    @property
    def empty(self) -> bool:
        return not self.datasets and self.checkpoint is None


NO_NEEDS = DataNeeds()
CHECKPOINT = "checkpoint"  # the name a job's newest checkpoint is copied under


@dataclass(frozen=True)
class Item:
    """A piece of data a job must have in the cluster it runs in."""

    name: str
    bytes: int | None
    holders: tuple[str, ...]


def items(needs: DataNeeds) -> tuple[Item, ...]:
    """What must be local where the job runs: each dataset it may not read remotely and
    whose holders are known, and its checkpoint if one was written. Data no cluster is
    known to hold comes from outside the federation: it constrains nothing."""
    found = [
        Item(d.name, d.size_bytes, d.clusters)
        for d in needs.datasets
        if d.clusters and d.read_gbps is None
    ]
    point = needs.checkpoint
    if point is not None and point.cluster is not None:
        found.append(Item(CHECKPOINT, point.size_bytes, (point.cluster,)))
    return tuple(found)


def source_for(
    item: Item,
    cluster: str,
    free: Mapping[tuple[str, str], float],
    cap_gbps: float = math.inf,
    regions: Mapping[str, str] | None = None,
    margin: float = 0.0,
) -> str | None:
    """The holder a copy to `cluster` comes from: the fastest (a copy takes at most `cap_gbps`
    of a link), a copy that leaves its region counted `1 + margin` times as long (`regions`:
    cluster -> region, where known; bytes that stay in a region cost no egress); then the
    most free bandwidth. With no margin, regions do not matter: one dataset's copy never
    takes a link another's needs for a region's sake."""
    linked = [h for h in item.holders if link_key(h, cluster) in free]
    weighed = bool(margin and regions)

    def rank(h: str) -> tuple[float, float, str]:
        gbps = free[link_key(h, cluster)]
        rate = min(gbps, cap_gbps)
        if weighed and crosses_regions(h, cluster, regions or {}):
            rate /= 1 + margin
        return (rate, gbps, h)

    return max(linked, key=rank, default=None)


def crosses_regions(a: str, b: str, regions: Mapping[str, str]) -> bool:
    """Whether a copy from `a` to `b` leaves a region (both regions known, and different)."""
    ra, rb = regions.get(a), regions.get(b)
    return ra is not None and rb is not None and ra != rb


def free_links(links: Sequence[LinkState]) -> dict[tuple[str, str], float]:
    return {x.key: x.free_gbps for x in links}


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size_text(size: int) -> str:
    """Bytes in binary units, as `kubectl` users read quantities (40 TiB)."""
    value, unit = float(size), _UNITS[0]
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            break
        value /= 1024
    return f"{value:.3g} {unit}"


def duration_text(seconds: float) -> str:
    """A wait or a copy's length as people say it (40 s, 55 min, 2.5 h)."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
