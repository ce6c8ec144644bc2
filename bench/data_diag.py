"""Where this engine's JCT goes against the every-corpus-everywhere reference, per job, on one
data fleet and seed (issue 33, docs/benchmarks.md 3e "later, round 2"): waiting, staging, and
the copies made, per corpus (a region-crossing copy marked *).

    .venv/bin/python bench/data_diag.py [--fleet data-one-region.yaml] [--seed 1] \\
        [--staging-gbps 100] [--top 15]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from volcano_global.simulation.engine import JobRecord, SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import data_heavy
from volcano_global.solver import Policy
from volcano_global.solver.copies import Copy
from volcano_global.solver.gravity import DataOptions

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples" / "simulate"
TIB = 2**40
H = 3600.0


def _run(scenario: Scenario, jobs: list, gbps: float) -> tuple[list[JobRecord], list[Copy], dict]:  # type: ignore[type-arg]
    sim = Simulation(scenario, jobs, Policy.CPSAT, SimOptions(data=DataOptions(staging_gbps=gbps)))
    log: list[Copy] = []
    copied = sim.data.copied

    def logged(copies):  # type: ignore[no-untyped-def]
        copies = tuple(copies)
        log.extend(copies)
        return copied(copies)

    sim.data.copied = logged  # type: ignore[method-assign]
    return sim.run().records, log, sim.data.regions


def _summary(label: str, records: list[JobRecord]) -> str:
    def avg(f):  # type: ignore[no-untyped-def]
        return statistics.mean(f(r) for r in records) / H

    return (
        f"{label}: avg JCT {avg(lambda r: r.finish - r.job.arrival_s):.2f} h = wait "
        f"{avg(lambda r: r.start - r.job.arrival_s):.2f} + staging {avg(lambda r: r.staging_s):.2f}"
        f" + run {avg(lambda r: r.finish - r.start - r.staging_s):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", default="data-one-region.yaml")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--staging-gbps", type=float, default=100.0)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    scenario = Scenario.load(EXAMPLES / args.fleet)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    names = [d.name for d in scenario.datasets]
    jobs = data_heavy(seed=args.seed, jobs=150, load=0.7, capacity_gpus=capacity, datasets=names)
    sizes = {d.name: d.size_bytes for d in scenario.datasets}
    engine, log, regions = _run(scenario, jobs, args.staging_gbps)
    everywhere, _, _ = _run(scenario.model_copy(update={"datasets": []}), jobs, args.staging_gbps)
    print(_summary("this engine", engine))
    print(_summary("every corpus everywhere", everywhere))
    ref = {r.job.id: r for r in everywhere}
    _by_size(engine, ref)
    _waits(engine, sizes, args.staging_gbps)
    _copies(log, regions, sizes, jobs)
    _top(engine, ref, sizes, args.top)


def _by_size(engine: list[JobRecord], ref: dict[str, JobRecord]) -> None:
    print("\nJCT over the reference by job size (hours, summed over jobs):")
    rows: dict[int, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for r in engine:
        y = ref[r.job.id]
        row = rows[r.job.gpus]
        row[0] += 1
        row[1] += (r.finish - r.job.arrival_s) - (y.finish - y.job.arrival_s)
        row[2] += (r.start - r.job.arrival_s) - (y.start - y.job.arrival_s)
        row[3] += r.staging_s
    for gpus, (n, excess, wait, staging) in sorted(rows.items()):
        print(
            f"  {gpus:3d} GPUs, {n:3d} jobs: {excess / H:6.1f} h "
            f"(more waiting {wait / H:6.1f}, staging {staging / H:5.1f})"
        )


def _waits(engine: list[JobRecord], sizes: dict[str, int], gbps: float) -> None:
    held = [r for r in engine if r.staging_s == 0 and r.start - r.job.arrival_s > 60]
    copy_s = {r.job.id: sizes.get(r.job.datasets[0].name, 0) * 8 / (gbps * 1e9) for r in held}
    longer = [r for r in held if r.start - r.job.arrival_s > copy_s[r.job.id]]
    staged = [r for r in engine if r.staging_s > 0]
    print(
        f"\nWaited for a holder (> 1 min, not staged): {len(held)} jobs, "
        f"{sum(r.start - r.job.arrival_s for r in held) / H:.1f} h; of them {len(longer)} waited "
        f"longer than a copy at {gbps:g} Gbps would take, by "
        f"{sum(r.start - r.job.arrival_s - copy_s[r.job.id] for r in longer) / H:.1f} h in all.\n"
        f"Staged: {len(staged)} jobs, {sum(r.staging_s for r in staged) / H:.1f} h of staging, "
        f"after {sum(r.start - r.job.arrival_s for r in staged) / H:.1f} h of waiting."
    )


def _copies(log: list[Copy], regions: dict, sizes: dict[str, int], jobs: list) -> None:  # type: ignore[type-arg]
    reads: dict[str, int] = defaultdict(int)
    for job in jobs:
        reads[job.datasets[0].name] += 1
    per: dict[str, list[str]] = defaultdict(list)
    for c in log:
        cross = "*" if regions[c.source] != regions[c.destination] else ""
        per[c.data].append(f"{c.source}->{c.destination}{cross}")
    crossing = [c for c in log if regions[c.source] != regions[c.destination]]
    print(
        f"\nCopies: {len(log)}, between regions {len(crossing)} "
        f"({sum(c.bytes for c in crossing) / TIB:,.0f} TiB); per corpus (reads, size):"
    )
    for name, moves in sorted(per.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(
            f"  {name} ({reads[name]} reads, {sizes.get(name, 0) / TIB:.0f} TiB): {' '.join(moves)}"
        )


def _top(engine: list[JobRecord], ref: dict[str, JobRecord], sizes: dict[str, int], n: int) -> None:
    def excess(r: JobRecord) -> float:
        y = ref[r.job.id]
        return (r.finish - r.job.arrival_s) - (y.finish - y.job.arrival_s)

    print(f"\nThe {n} jobs that lose most against the reference:")
    for r in sorted(engine, key=excess, reverse=True)[:n]:
        y, d = ref[r.job.id], r.job.datasets[0].name
        print(
            f"  {r.job.id:9s} {r.job.gpus:3d} GPUs, runs {r.job.duration_s / H:4.1f} h, {d} "
            f"({sizes.get(d, 0) / TIB:.0f} TiB): +{excess(r) / H:5.2f} h; waited "
            f"{(r.start - r.job.arrival_s) / H:5.2f} h, staged {r.staging_s / H:4.2f} h in "
            f"{','.join(r.clusters)} (reference: waited {(y.start - y.job.arrival_s) / H:4.2f} h "
            f"in {','.join(y.clusters)})"
        )


if __name__ == "__main__":
    main()
