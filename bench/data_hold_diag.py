"""Drain (`drain_for_due`, docs/benchmarks.md 3e round 5) on one fleet and seed: holds chosen away from the data,
copies started for them, and where those jobs ran. Usage: bench/data_hold_diag.py FLEET SEED READERS."""

import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from collections import defaultdict

from data_bench import EXAMPLES, TIB

import volcano_global.simulation.engine as E
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import data_heavy
from volcano_global.solver import Policy
from volcano_global.solver.data import items
from volcano_global.solver.gravity import DataMode, DataOptions

fleet, seed, readers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
away_rounds = 0
away = defaultdict(set)
fetched = defaultdict(float)
holds = 0
orig = E.plan_round


def pr(data, policy, options):
    global away_rounds, holds
    plan = orig(data, policy, options)
    for h in plan.decision.holds:
        holds += 1
        need = data.data.get(h.job_id)
        if need is None:
            continue
        held = set.intersection(*(set(i.holders) for i in items(need))) if items(need) else set()
        if h.clusters and not h.clusters & held:
            away_rounds += 1
            away[h.job_id] |= h.clusters
            for c in plan.prefetch.get(h.job_id, ()):
                fetched[h.job_id] += c.bytes
    return plan


E.plan_round = pr
scenario = Scenario.load(EXAMPLES / fleet)
cap = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
jobs = data_heavy(
    seed=seed, jobs=150, load=0.7, capacity_gpus=cap, datasets=[d.name for d in scenario.datasets]
)
r = Simulation(
    scenario,
    jobs,
    Policy.CPSAT,
    SimOptions(
        data=DataOptions(
            DataMode.GRAVITY,
            prefetch=True,
            replicate_readers=readers,
            hold_at_prefetch=True,
            drain_for_due=True,
        )
    ),
).run()
ran = {rec.job.id: rec.clusters for rec in r.records}
used = sum(1 for j, cs in away.items() if set(ran[j]) & cs)
print(
    f"{fleet} seed {seed} r{readers}: holds {holds}, of which away from the data {away_rounds} (jobs {len(away)}); "
    f"copies started for them {sum(fetched.values()) / TIB:,.0f} TiB; jobs that then ran in a cluster held away {used}/{len(away)}"
)
