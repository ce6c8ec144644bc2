"""Replication ahead of demand, swept (docs/benchmarks.md 3e, round 4): this engine (data
gravity) alone on the data-heavy fleets, per setting of `DataOptions.replicate_readers`, the
margin of per-job copies between regions (`cross_region_margin`) and prefetch; avg JCT and the
bytes between regions, against first-fit data-oblivious's from bench/data_bench.py.

    .venv/bin/python bench/data_replication.py [--seeds 1,2,3] [--fleets data-one-region.yaml]
        [--variants "r3=3:0:0,r5k=5:100:0"]

A variant is NAME=READERS:MARGIN:PREFETCH (readers 0: no replication; prefetch 1: on).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_bench import EXAMPLES, FLEETS, TIB

from volcano_global.simulation.comparison import judge
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import data_heavy
from volcano_global.solver import Policy
from volcano_global.solver.gravity import DataMode, DataOptions

VARIANTS = (
    "gravity=0:0:0,margin100=0:100:0,margin100+prefetch=0:100:1,r3=3:0:0,r3+prefetch=3:0:1,"
    "r5=5:0:0,r5k=5:100:0,r5k+prefetch=5:100:1,r8k=8:100:0,r8k+prefetch=8:100:1"
)


def _case(args: tuple[str, int, str, str]) -> tuple[str, int, str, float, float, float]:
    fleet, seed, name, spec = args
    readers, margin, prefetch = spec.split(":")
    scenario = Scenario.load(EXAMPLES / fleet)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    names = [d.name for d in scenario.datasets]
    jobs = data_heavy(seed=seed, jobs=150, load=0.7, capacity_gpus=capacity, datasets=names)
    data = DataOptions(
        DataMode.GRAVITY,
        prefetch=prefetch == "1",
        cross_region_margin=float(margin),
        replicate_readers=int(readers),
    )
    result = Simulation(scenario, jobs, Policy.CPSAT, SimOptions(data=data)).run()
    (judged,) = judge([result])
    return (
        fleet,
        seed,
        name,
        judged.avg_jct_s / 3600,
        result.between_regions_bytes / TIB,
        result.replicated_bytes / TIB,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--fleets", default=",".join(FLEETS))
    parser.add_argument("--variants", default=VARIANTS)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = [v.split("=") for v in args.variants.split(",")]
    cases = [(f, s, n, v) for f in args.fleets.split(",") for n, v in variants for s in seeds]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = {(f, s, n): rest for f, s, n, *rest in pool.map(_case, cases)}
    print("| fleet | variant | avg JCT (h) | between regions (TiB) | of which replicas (TiB) |")
    print("|---|---|---:|---:|---:|")
    for fleet in args.fleets.split(","):
        for name, _ in variants:
            rows = [done[(fleet, s, name)] for s in seeds]
            print(
                f"| {fleet.removesuffix('.yaml')} | {name} "
                + "".join(
                    f"| {' / '.join(f'{r[i]:,.{d}f}' for r in rows)} "
                    for i, d in ((0, 2), (1, 0), (2, 0))
                )
                + "|"
            )


if __name__ == "__main__":
    main()
