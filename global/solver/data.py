"""What a job needs of data, as a round reads it: the datasets it reads (their size, the
clusters that hold them, whether it may read them remotely instead of staging them) and its
newest checkpoint (size, and the cluster it was written in). Built by
`services.data.data_needs` from the job's DataSourceClaims, its declaration and the inventory
of DataSources; pure values here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
