"""Round builders of the data gravity tests: clusters of 8-GPU H100 nodes, gangs that waited
5 minutes, running jobs that end or may be evicted, datasets held somewhere, and random rounds
for the property tests."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, LinkState, RunningJob
from volcano_global.solver.data import DataNeeds, DatasetNeed
from volcano_global.solver.gravity import DataOptions
from volcano_global.solver.round_plan import RoundInput, Waiting

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
TIB = 2**40


def cluster(name: str, free_nodes: int, used_nodes: int = 0) -> ClusterCapacity:
    hist = (used_nodes,) + (0,) * 7 + (free_nodes,)
    return ClusterCapacity(name, (Leaf("H100", hist, (name,), node_gpus=8),))


def gang(job_id: str, gpus: int, **kw: object) -> Waiting:
    request = JobRequest(job_id, pods=gpus // 8, gpus_per_pod=8, gpu_model="H100", **kw)  # type: ignore[arg-type]
    return Waiting(request, NOW - timedelta(minutes=5))


def victim(job_id: str, where: str, ends_in_s: float) -> RunningJob:
    """8 GPUs (one pod) of priority 0 that may be evicted."""
    pods = ((where, where, "", 1, 8),)
    return RunningJob(job_id, ((where, "H100", 8),), ends_in_s=ends_in_s, run_s=3600.0, pods=pods)


def reads(size_tib: float, *holders: str, name: str = "corpus") -> DataNeeds:
    return DataNeeds(datasets=(DatasetNeed(name, int(size_tib * TIB), holders),))


# What a random round waits for: its waiting jobs, their data, the copies in flight.
Demand = tuple[list[Waiting], dict[str, DataNeeds], Mapping[str, tuple[str, ...]]]


def random_round(
    rng: random.Random,
    names: tuple[str, ...],
    demand: Callable[[random.Random], Demand],
    *,
    regions: Mapping[str, str],
) -> RoundInput:
    """A round over the clusters `names`, every pair linked (50-200 Gbps, 0-40 already
    reserved), each with 1-5 free and 0-3 used nodes and a job of 8 GPUs that ends in 10 min
    or 2 h and may be evicted; `demand` draws the rest between the links and the clusters
    (the draws' order fixes the rounds a seed gives)."""
    links = tuple(
        LinkState(x, y, rng.choice((50.0, 100.0, 200.0)), rng.choice((0.0, 20.0, 40.0)))
        for i, x in enumerate(names)
        for y in names[i + 1 :]
    )
    waiting, needs, copying = demand(rng)
    return RoundInput(
        NOW,
        tuple(cluster(c, rng.randint(1, 5), rng.randint(0, 3)) for c in names),
        links,
        waiting=tuple(waiting),
        running=tuple(victim(f"r{c}", c, rng.choice((600.0, 7200.0))) for c in names),
        data=needs,
        regions=regions,
        copying=copying,
    )


PREFETCH = DataOptions(prefetch=True)


def busy(job_id: str, where: str, gpus: int, ends_in_s: float) -> RunningJob:
    return RunningJob(job_id, ((where, "H100", gpus),), ends_in_s=ends_in_s, name=job_id)


LINK = LinkState("east", "west", 100.0)


def west_busy(ends_in_s: float, needs: DataNeeds) -> RoundInput:
    """east free; west, where the data is, full until `ends_in_s`; one 16-GPU job waiting."""
    return RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 0, 4)),
        (LINK,),
        waiting=(gang("j", 16),),
        running=(busy("r", "west", 32, ends_in_s),),
        data={"j": needs},
    )
