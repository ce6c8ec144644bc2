"""What step 5c of a round (`solver/parts.py`: a HyperJob whose children differ, placed child
by child) costs for one job on a large fleet: 100 clusters of 625 leaf domains (a 5,000-node
cluster summarised), one free 8-GPU H100 node per leaf. Three jobs: 16 children that fit; a
child no cluster has the model of (refused by counts, before any search); 2,600 children of
one pod over at most 4 clusters (2,500 nodes), so the search runs out of tries.

    .venv/bin/python bench/parted_bench.py [--runs 5]

Prints p50 / max (ms) of `place_parted` per job (the clusters' pools built before, as the
round has them after steps 5 and 5b), with wall and CPU time: on a shared machine the CPU time
is the steadier.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf
from volcano_global.solver.model import Part
from volcano_global.solver.packing import pools_of
from volcano_global.solver.parts import Room, place_parted
from volcano_global.solver.reservations import HoldBook

CLUSTERS, LEAVES = 100, 625


def fleet() -> tuple[ClusterCapacity, ...]:
    return tuple(
        ClusterCapacity(
            f"c{i}",
            tuple(
                Leaf("H100", (0,) * 8 + (1,), (f"c{i}-l{j}", f"c{i}-s{j // 25}"), node_gpus=8)
                for j in range(LEAVES)
            ),
        )
        for i in range(CLUSTERS)
    )


def job(children: int, *extra: Part) -> JobRequest:
    parts = tuple(Part(f"h-{k}", 1, 8, "H100") for k in range(children)) + extra
    return JobRequest(
        "j",
        pods=1,
        gpus_per_pod=sum(p.gpus for p in parts),
        splittable=True,
        max_clusters=4,
        parts=parts,
    )


CASES = (
    ("16 children that fit", job(16)),
    ("40 children and one of a model no cluster has", job(40, Part("x", 1, 8, "B200"))),
    ("2,600 children over at most 4 clusters of 625 nodes (tries run out)", job(2600)),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    clusters = fleet()
    print(f"load average {os.getloadavg()[0]:.2f}, {CLUSTERS} clusters x {LEAVES} leaves")
    print("| job | admitted | p50 ms wall | max ms wall | p50 ms CPU |")
    print("|---|---|---:|---:|---:|")
    for label, request in CASES:
        walls, cpus, admitted = [], [], False
        for _ in range(runs):
            room = Room(pools_of(clusters), {}, HoldBook([]))
            wall, cpu = time.perf_counter(), time.process_time()
            (decision,) = place_parted([request], room)
            walls.append(1000 * (time.perf_counter() - wall))
            cpus.append(1000 * (time.process_time() - cpu))
            admitted = decision.admitted
        print(
            f"| {label} | {admitted} | {statistics.median(walls):.0f} | {max(walls):.0f} "
            f"| {statistics.median(cpus):.0f} |"
        )


if __name__ == "__main__":
    main()
