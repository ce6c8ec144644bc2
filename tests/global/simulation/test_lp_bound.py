"""The time-indexed LP bound: never above the exact non-preemptive optimum (CP-SAT on tiny
instances, fine and coarse slots), never below the average duration, above the fluid bound
where preemption is what the fluid bound leans on, and below every policy the simulator runs."""

from __future__ import annotations

import random

import pytest
from ortools.sat.python import cp_model

from volcano_global.simulation.comparison import bounds, fluid_srpt_avg_jct, judge
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.lp_bound import list_schedule_makespan, lp_bound, lp_bound_of
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob, synthetic_llm
from volcano_global.solver import Policy


def job(name: str, arrival: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(name, arrival, pods=1, gpus_per_pod=gpus, duration_s=duration)


def optimum(jobs: list[TraceJob], capacity: int) -> float:
    """The exact least average JCT of a non-preemptive schedule (integer data: some optimal
    schedule starts every job at an arrival or another job's end, so at an integer)."""
    model = cp_model.CpModel()
    horizon = int(max(j.arrival_s for j in jobs) + sum(j.duration_s for j in jobs))
    ends, intervals = [], []
    for j in jobs:
        start = model.NewIntVar(int(j.arrival_s), horizon, j.id)
        end = model.NewIntVar(0, horizon + int(j.duration_s), f"{j.id}-end")
        intervals.append(model.NewIntervalVar(start, int(j.duration_s), end, f"{j.id}-run"))
        ends.append(end - int(j.arrival_s))
    model.AddCumulative(intervals, [j.gpus for j in jobs], capacity)
    model.Minimize(sum(ends))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.Solve(model) == cp_model.OPTIMAL
    return solver.ObjectiveValue() / len(jobs)


def tiny(seed: int) -> tuple[list[TraceJob], int]:
    rng = random.Random(seed)
    capacity = rng.choice([4, 6, 8])
    jobs = [
        job(f"j{i}", rng.randrange(0, 12), rng.randint(1, capacity), rng.randint(1, 9))
        for i in range(rng.randint(3, 7))
    ]
    return jobs, capacity


@pytest.mark.parametrize("seed", range(12))
def test_the_bound_lies_between_the_average_duration_and_the_exact_optimum(seed: int) -> None:
    jobs, capacity = tiny(seed)
    best = optimum(jobs, capacity)
    mean_duration = sum(j.duration_s for j in jobs) / len(jobs)
    for slot in (1.0, 2.5, 4.0):  # exact grid, and coarse slots that round starts down
        bound = lp_bound(jobs, capacity, slot_s=slot)
        assert bound.status == "OPTIMAL"
        assert mean_duration - 1e-6 <= bound.avg_jct_s <= best + 1e-6, (slot, best)


def test_above_the_fluid_bound_where_only_preemption_helps() -> None:
    # A whole-fleet job of 1,000 s, then a whole-fleet job of 10 s at 100 s. Fluid SRPT
    # preempts the first (ends 1,010 and 110: average 510); without preemption the best is to
    # hold the long job until the short one has run (ends 1,110 and 110: average 560). The
    # LP, starting shares of each job, lands between.
    jobs = [job("long", 0, 8, 1000), job("short", 100, 8, 10)]
    fluid = fluid_srpt_avg_jct(jobs, 8)
    assert fluid == pytest.approx(510) and optimum(jobs, 8) == pytest.approx(560)
    bound = lp_bound(jobs, 8, slot_s=1.0)
    assert max(fluid, 505) + 10 < bound.avg_jct_s <= 560 + 1e-6  # 505: the average duration


def test_no_policy_of_the_simulator_beats_the_bound() -> None:
    spec = {"nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}]}
    world = Scenario.model_validate(
        {
            "clusters": [{"name": "c0", "spec": spec}, {"name": "c1", "spec": spec}],
            "links": [{"a": "c0", "b": "c1", "gbps": 400}],
        }
    )
    # Gangs of 16-64 GPUs on 2 x 64: every policy finishes every job, and queueing matters.
    trace = synthetic_llm(seed=3, jobs=40, load=1.5, capacity_gpus=128, min_gpus=16, max_gpus=64)
    options = SimOptions(window=20, deterministic_time=0.1)
    policies = [Policy.CPSAT, Policy.BACKFILL, Policy.GREEDY, Policy.FIRST_FIT]
    results = [Simulation(world, trace, p, options).run() for p in policies]
    bound = lp_bound_of(results[0])
    assert bound.status == "OPTIMAL" and bound.late < 1e-6
    assert bound.avg_jct_s > 1.1 * bounds(results[0]).avg_jct_s  # 928 s against 808 s
    for judged in judge(results):
        assert judged.finished == judged.jobs, judged.policy  # every JCT is a real one
        assert judged.avg_jct_s >= bound.avg_jct_s - 1e-6, judged.policy
    large = lp_bound_of(results[0], large=True)
    assert large.avg_jct_s > bounds(results[0], large=True).avg_jct_s  # 662 s against 606 s


def test_the_horizon_is_a_first_come_first_served_schedule() -> None:
    # 3 GPUs then 2 then 2 on 4 GPUs: the second waits for the first (ends 10, 15), the third
    # starts beside it: the last end is 15.
    jobs = [job("a", 0, 3, 10), job("b", 1, 2, 5), job("c", 2, 2, 4)]
    assert list_schedule_makespan(jobs, 4) == 15


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match="jobs: wide asks for 16 GPUs, the fleet has 8"):
        lp_bound([job("wide", 0, 16, 10)], 8)
    with pytest.raises(ValueError, match="capacity_gpus"):
        lp_bound([job("a", 0, 1, 10)], 0)
    with pytest.raises(ValueError, match="solver: 'NOPE'"):
        lp_bound([job("a", 0, 1, 10)], 8, solver="NOPE")
