"""The virtual fleet's data: where each dataset is (the scenario's `datasets`, and what trace
rows say), how big it is, the cluster each job's newest checkpoint is in, and what staging
moved. Locality grows as copies end, as the server's DataSources gain a cluster when a
staging to it succeeds (`services.dispatch.staging.data_arrived`)."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable

from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.speed import Pair, pair
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT, CheckpointNeed, DataNeeds, DatasetNeed
from volcano_global.solver.replication import Popularity


class DataState:
    def __init__(self, scenario: Scenario, jobs: Iterable[TraceJob]) -> None:
        self.regions = {c.name: c.region or c.name for c in scenario.clusters}
        in_region: dict[str, set[str]] = defaultdict(set)
        for cluster, region in self.regions.items():
            in_region[region].add(cluster)
        self.sizes: dict[str, int] = {}
        self.holders: dict[str, set[str]] = {}
        for entry in scenario.datasets:
            self.sizes[entry.name] = entry.size_bytes
            self.holders[entry.name] = set(entry.clusters) | in_region.get(
                entry.region or "", set()
            )
        for job in jobs:  # what trace rows say, where the scenario does not
            for ref in job.datasets:
                _known(job, ref.name, ref.clusters, ref.region, self.regions)
                if ref.size_bytes is not None:
                    self.sizes.setdefault(ref.name, ref.size_bytes)
                holders = set(ref.clusters) | in_region.get(ref.region or "", set())
                if holders and not self.holders.get(ref.name):
                    self.holders[ref.name] = holders
        # Who reads what, by arrival: what a round counts as read lately (`popularity`).
        by_arrival = sorted(jobs, key=lambda j: j.arrival_s)
        self.arrivals = [j.arrival_s for j in by_arrival]
        self.reads = [{r.name for r in j.datasets} for j in by_arrival]
        self.checkpoints: dict[str, str] = {}  # job -> the cluster of its newest checkpoint
        self.moved: dict[Pair, int] = defaultdict(int)  # bytes staged per link

    def __bool__(self) -> bool:
        return bool(self.sizes or self.holders)

    def needs(self, job: TraceJob) -> DataNeeds:
        datasets = tuple(
            DatasetNeed(
                ref.name,
                self.sizes.get(ref.name),
                tuple(sorted(self.holders.get(ref.name, ()))),
                source="declaration",
                bound=ref.name in self.holders,
            )
            for ref in job.datasets
        )
        where = self.checkpoints.get(job.id)
        point = CheckpointNeed(job.checkpoint_bytes, where) if where is not None else None
        return DataNeeds(datasets, point)

    def popularity(self, now: float, window_s: float) -> dict[str, Popularity]:
        """The jobs that read each dataset, submitted in the last `window_s` (waiting, running
        or ended): what the server would count from its jobs' claims."""
        first = bisect_right(self.arrivals, now - window_s)
        last = bisect_right(self.arrivals, now)
        count: dict[str, int] = defaultdict(int)
        for names in self.reads[first:last]:
            for name in names:
                count[name] += 1
        return {
            name: Popularity(n, self.sizes.get(name), tuple(sorted(self.holders.get(name, ()))))
            for name, n in count.items()
        }

    def copied(self, copies: Iterable[Copy]) -> float:
        """Copies begin: bytes counted per link; the seconds until the last ends."""
        longest = 0.0
        for copy in copies:
            self.moved[pair(copy.source, copy.destination)] += copy.bytes
            longest = max(longest, copy.seconds)
        return longest

    def started(self, job: TraceJob, clusters: Iterable[str], copies: Iterable[Copy]) -> float:
        """A start's copies begin (`copied`); the job writes its checkpoints in its first
        cluster from now on."""
        longest = self.copied(copies)
        if job.checkpoint_bytes:
            self.checkpoints[job.id] = next(iter(clusters))
        return longest

    def arrived(self, copies: Iterable[Copy]) -> None:
        for copy in copies:
            if copy.data != CHECKPOINT:
                self.holders.setdefault(copy.data, set()).add(copy.destination)

    def between_regions(self) -> int:
        """Bytes staged between clusters of different regions."""
        return sum(b for (x, y), b in self.moved.items() if self.regions[x] != self.regions[y])


def _known(
    job: TraceJob,
    name: str,
    clusters: Iterable[str],
    region: str | None,
    regions: dict[str, str],
) -> None:
    """A trace's dataset placed on clusters or a region the scenario has."""
    unknown = sorted(set(clusters) - set(regions))
    if unknown:
        raise ValueError(
            f"job {job.id}: dataset {name}: datasetClusters names clusters the scenario does "
            f"not have: {', '.join(unknown)}"
        )
    if region is not None and region not in regions.values():
        raise ValueError(
            f"job {job.id}: dataset {name}: no cluster of the scenario is in region {region!r}"
        )
