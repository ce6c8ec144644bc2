"""A hold at the prefetch target, swept (docs/benchmarks.md 3e, round 5; experiment, reverted):
this engine alone on the data-heavy fleets, avg JCT and bytes between regions per case.

    .venv/bin/python bench/data_hold.py --variants "prefetch+drain=0:0:1:2" [--seeds 1,2,3]
        [--fleets data-one-region.yaml] [--procs 2]

A variant is NAME=READERS:MARGIN:PREFETCH[:HOLD[:MAX_HOLDS]] as in bench/data_replication.py;
HOLD 1: `DataOptions.hold_at_prefetch`, 2: also `drain_for_due`; MAX_HOLDS: `SimOptions.max_holds`.
"""

import argparse
import dataclasses
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_bench import EXAMPLES, TIB

from volcano_global.simulation.comparison import judge
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import data_heavy
from volcano_global.solver import Policy
from volcano_global.solver.gravity import DataMode, DataOptions


def case(args):
    fleet, seed, name, spec = args
    parts = spec.split(":")
    readers, margin, prefetch = parts[:3]
    hold = len(parts) > 3 and parts[3] in ("1", "2")
    drain = len(parts) > 3 and parts[3] == "2"
    scenario = Scenario.load(EXAMPLES / fleet)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    names = [d.name for d in scenario.datasets]
    jobs = data_heavy(seed=seed, jobs=150, load=0.7, capacity_gpus=capacity, datasets=names)
    kw = dict(
        prefetch=prefetch == "1", cross_region_margin=float(margin), replicate_readers=int(readers)
    )
    if hold:
        kw["hold_at_prefetch"] = True
        kw["drain_for_due"] = drain
    data = DataOptions(DataMode.GRAVITY, **kw)
    sim = SimOptions(data=data)
    if len(parts) > 4:
        sim = dataclasses.replace(sim, max_holds=int(parts[4]))
    result = Simulation(scenario, jobs, Policy.CPSAT, sim).run()
    (j,) = judge([result])
    return (
        fleet,
        seed,
        name,
        j.avg_jct_s / 3600,
        result.between_regions_bytes / TIB,
        result.replicated_bytes / TIB,
    )


p = argparse.ArgumentParser()
p.add_argument("--seeds", default="1,2,3")
p.add_argument("--fleets", default="data-one-region.yaml")
p.add_argument("--variants", required=True)
p.add_argument("--procs", type=int, default=2)
a = p.parse_args()
seeds = [int(s) for s in a.seeds.split(",")]
variants = [v.split("=") for v in a.variants.split(",")]
cases = [(f, s, n, v) for f in a.fleets.split(",") for n, v in variants for s in seeds]
with ProcessPoolExecutor(max_workers=a.procs) as pool:
    for r in pool.map(case, cases):
        print(
            f"{r[0]} seed {r[1]} {r[2]}: jct {r[3]:.2f} h, between {r[4]:,.0f} TiB, replicas {r[5]:,.0f} TiB",
            flush=True,
        )
