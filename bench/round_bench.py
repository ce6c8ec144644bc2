"""Round time of the planned CP-SAT policy at scale: the pending window in the planned order
with some jobs owed a reservation, every cluster 85-97% busy with running jobs whose expected
ends the reservations are planned from (bench/workloads.py's LLM mix on 5,000-node clusters).

    .venv/bin/python bench/round_bench.py [--quick]

Prints a markdown table (docs/benchmarks.md, section 1b, which `bench/solver_bench.py` writes
with this module's `section()`): p50 and p95 of the whole round
(plan, warm start, model, search, packing) over seeds, for CP-SAT and for the same plan placed
greedily (backfill), at 200 pending x 16 clusters and 2,000 pending x 64 clusters.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workloads import kalos_stats, llm_snapshot

from volcano_global.solver import Policy, RunningJob, Snapshot, SolveOptions, solve


def planned(snapshot: Snapshot, seed: int, running_per_cluster: int) -> Snapshot:
    """Every tenth job is owed a reservation; each cluster's busy GPUs are held by
    `running_per_cluster` running jobs ending within four hours."""
    rng = random.Random(seed)
    jobs = tuple(
        replace(j, due=i % 10 == 0, estimate_s=rng.uniform(60, 4 * 3600))
        for i, j in enumerate(snapshot.jobs)
    )
    running = []
    for c in snapshot.clusters:
        model = c.leaves[0].gpu_model
        busy = sum(8 * sum(leaf.free_nodes) - leaf.free_gpus for leaf in c.leaves)
        share = max(busy // running_per_cluster, 8)
        running += [
            RunningJob(
                f"{c.name}-r{i}", ((c.name, model, share),), ends_in_s=rng.uniform(1, 4 * 3600)
            )
            for i in range(running_per_cluster)
        ]
    return replace(snapshot, jobs=jobs, running=tuple(running))


def planned_case(
    seed: int,
    clusters: int,
    pending: int,
    mean: float,
    tors: int,
    utilisation: tuple[float, float] = (0.85, 0.97),
) -> Snapshot:
    """One round of the table: the LLM mix, 85-97% busy, 50 running jobs per cluster."""
    snapshot = llm_snapshot(
        seed=seed,
        clusters=clusters,
        jobs=pending,
        mean_gpus=mean,
        utilisation=utilisation,
        tors=tors,
    )
    return planned(snapshot, seed, running_per_cluster=50)


def section(*, quick: bool = False, seeds: int = 5) -> list[str]:
    mean, _, _ = kalos_stats(Path(__file__).resolve().parent / "data")
    cases = (
        [(50, 4, 50, 1.0, 25)] if quick else [(200, 16, 200, 1.0, 625), (2000, 64, 200, 2.0, 625)]
    )
    seeds = 2 if quick else seeds
    lines = [
        "## 1b. Planned rounds at scale",
        "",
        f"{seeds} rounds per row (seeds 1..{seeds}): the LLM mix on 5,000-node clusters 85-97% "
        "busy, every tenth waiting job owed a reservation, 50 running jobs per cluster ending "
        "within 4 hours (what reservations are planned from), the window of the first 200 jobs. "
        "Round time = plan (reservations), warm start, model, search, packing. Command: "
        "`.venv/bin/python bench/round_bench.py`.",
        "",
        "| pending | clusters | window | time limit (s) | policy | round p50 (s) | p95 (s) | "
        "admitted (mean) |",
        "|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for pending, clusters, window, limit, tors in cases:
        for policy in (Policy.CPSAT, Policy.BACKFILL):
            times, admitted = [], []
            for seed in range(1, seeds + 1):
                snapshot = planned_case(seed, clusters, pending, mean, tors)
                start = time.perf_counter()
                decision = solve(snapshot, policy, SolveOptions(time_limit_s=limit, window=window))
                times.append(time.perf_counter() - start)
                admitted.append(len(decision.admitted))
            p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
            lines.append(
                f"| {pending} | {clusters} | {window} | {limit:g} | {policy.value} | "
                f"{statistics.median(times):.2f} | {p95:.2f} | {statistics.mean(admitted):.1f} |"
            )
            print(lines[-1], flush=True)
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    section(quick=args.quick, seeds=args.seeds)


if __name__ == "__main__":
    main()
