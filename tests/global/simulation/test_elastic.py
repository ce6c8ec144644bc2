"""Elastic width in the simulator: hand-checked schedules where a running elastic job gives
units back (shrinks) so a higher-priority gang starts earlier - only as the preemption rules
allow - and grows again, not before its resize interval, each resize costing a restart."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from volcano_global.simulation.engine import JobRecord, SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import Policy, planning
from volcano_global.solver.preemption import Rules


def one_cluster(nodes: int) -> Scenario:
    spec = {"nodeGroups": [{"count": nodes, "gpusPerNode": 8, "gpuModel": "H100"}]}
    return Scenario.model_validate({"clusters": [{"name": "c0", "spec": spec}]})


def run(jobs: list[TraceJob], policy: Policy, **options: Any) -> dict[str, JobRecord]:
    result = Simulation(one_cluster(4), jobs, policy, SimOptions(**options)).run()
    return {r.job.id: r for r in result.records}


def schedule(jobs: list[TraceJob], policy: Policy, **options: Any) -> dict[str, tuple]:
    return {key: (r.start, r.finish) for key, r in run(jobs, policy, **options).items()}


# E: 2 replicas of 2 nodes, 1,000 s at full width, elastic down to 1. It has the cluster's
# four nodes to itself from t = 0.
E = TraceJob("E", 0.0, pods=4, gpus_per_pod=8, duration_s=1000.0, unit_pods=2, min_units=1)


# A shrink is a preemption: the rules allow it at once here (no minimum run time), and no
# hysteresis or restart cost unless a test says so.
EAGER = {
    "preemption": Rules(min_run_s=0.0),
    "hysteresis": planning.Hysteresis(min_interval_s=0.0, min_growth=0.0),
    "resize_restart_s": 0.0,
}


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_a_due_gang_of_the_same_priority_gets_no_replica(policy: Policy) -> None:
    # B (2 nodes, 100 s) arrives at 10 and is due at 60 (reserve after 50 s). Owed a
    # reservation but not of a higher priority, nor reclaiming (one queue): E keeps its
    # replicas, and B and C wait for E's end at 1,000, as if E were rigid.
    jobs = [
        E,
        TraceJob("B", 10.0, pods=2, gpus_per_pod=8, duration_s=100.0),
        TraceJob("C", 100.0, pods=2, gpus_per_pod=8, duration_s=100.0),
    ]
    expected = {"E": (0.0, 1000.0), "B": (1000.0, 1100.0), "C": (1000.0, 1100.0)}
    assert schedule(jobs, policy, reserve_after_s=50.0, **EAGER) == expected
    rigid = [replace(E, min_units=0), *jobs[1:]]
    assert schedule(rigid, policy, reserve_after_s=50.0, **EAGER) == expected


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_a_higher_priority_gang_takes_an_elastic_jobs_spare_replica(policy: Policy) -> None:
    # H (priority 1, 2 nodes, 100 s) arrives at 10: E gives back a replica at once, H runs
    # 10-110, E grows back at 110. E: 10 s full, 100 s half (50), 940 s full: ends at 1,050.
    h = TraceJob("H", 10.0, pods=2, gpus_per_pod=8, duration_s=100.0, priority=1)
    assert schedule([E, h], policy, **EAGER) == {"E": (0.0, 1050.0), "H": (10.0, 110.0)}
    # Each resize costs a 20 s restart: stalled 10-30, half speed 30-110 (40), stalled
    # 110-130, then the 950 s left at full width: ends at 1,080.
    restarts = {**EAGER, "resize_restart_s": 20.0}
    records = run([E, h], policy, **restarts)
    assert schedule([E, h], policy, **restarts) == {"E": (0.0, 1080.0), "H": (10.0, 110.0)}
    # Two restarts, at 16 GPUs (the shrink) and 32 (the growth).
    assert (records["E"].resizes, records["E"].resize_gpu_s) == (2, 20.0 * 16 + 20.0 * 32)


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_no_shrink_against_the_preemption_rules(policy: Policy) -> None:
    # H of a class that never preempts, or E annotated preemptable "false", or preemption
    # off: H waits for E's end (and nothing is evicted either).
    h = TraceJob("H", 10.0, pods=2, gpus_per_pod=8, duration_s=100.0, priority=1)
    waited = {"E": (0.0, 1000.0), "H": (1000.0, 1100.0)}
    assert schedule([E, replace(h, preemption_policy="Never")], policy, **EAGER) == waited
    assert schedule([replace(E, preemptable=False), h], policy, **EAGER) == waited
    assert schedule([E, h], policy, **{**EAGER, "preemption": None}) == waited


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_growth_waits_its_interval_and_each_resize_costs_a_restart(policy: Policy) -> None:
    # X holds 2 of the 4 nodes until 300; E arrives at 1 and starts at one replica (half
    # speed). X ends at 300 and E grows to two: 299 s at half speed = 149.5 s of its work.
    x = TraceJob("X", 0.0, pods=2, gpus_per_pod=8, duration_s=300.0)
    e = replace(E, arrival_s=1.0)

    def finish(**options: object) -> tuple[float | None, int, float]:
        records = run([x, e], policy, **options)
        return records["E"].finish, records["E"].resizes, records["E"].resize_gpu_s

    free = {"hysteresis": planning.Hysteresis(min_interval_s=100.0), "resize_restart_s": 0.0}
    # No restart cost: the 850.5 s left from 300.
    assert finish(**free) == (1150.5, 1, 0.0)
    # A 50 s restart (at 32 GPUs): stalled 300-350.
    assert finish(**{**free, "resize_restart_s": 50.0}) == (1200.5, 1, 50.0 * 32)
    # A checkpoint every 120 s: the 59 s since the last (299 % 120) are lost, 29.5 s of work.
    lost = {**free, "resize_restart_s": 50.0, "checkpoint_s": 120.0}
    assert finish(**lost) == (1230.0, 1, (50.0 + 59.0) * 32)
    # Not within 400 s of its start: it grows at 401 (a round is run then), 200 s done.
    late = {"hysteresis": planning.Hysteresis(min_interval_s=400.0), "resize_restart_s": 50.0}
    assert finish(**late) == (1251.0, 1, 50.0 * 32)
