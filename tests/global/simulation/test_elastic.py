"""Elastic width in the simulator: hand-checked schedules where a running elastic job gives
units back (shrinks) so a due or higher-priority gang starts earlier, and grows again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import Policy


def one_cluster(nodes: int) -> Scenario:
    spec = {"nodeGroups": [{"count": nodes, "gpusPerNode": 8, "gpuModel": "H100"}]}
    return Scenario.model_validate({"clusters": [{"name": "c0", "spec": spec}]})


def schedule(jobs: list[TraceJob], policy: Policy, **options: float) -> dict[str, tuple]:
    result = Simulation(one_cluster(4), jobs, policy, SimOptions(**options)).run()  # type: ignore[arg-type]
    return {r.job.id: (r.start, r.finish) for r in result.records}


# E: 2 replicas of 2 nodes, 1,000 s at full width, elastic down to 1. It has the cluster's
# four nodes to itself from t = 0.
E = TraceJob("E", 0.0, pods=4, gpus_per_pod=8, duration_s=1000.0, unit_pods=2, min_units=1)


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_a_due_gang_starts_when_an_elastic_job_gives_back_a_replica(policy: Policy) -> None:
    # B (2 nodes, 100 s) arrives at 10 and is due at 60 (reserve after 50 s); the next round
    # is C's arrival at 100: B outranks E's spare replica, E shrinks to one and B starts at 100.
    # C (2 nodes, 100 s, not due at 100) waits; at 200 B ends and C starts (growth comes after
    # every waiting job); at 300 C ends and E grows back. E's work: 100 s at full width by
    # 100, 200 s at half speed = 100 more by 300, the remaining 800 at full: ends at 1,100.
    jobs = [
        E,
        TraceJob("B", 10.0, pods=2, gpus_per_pod=8, duration_s=100.0),
        TraceJob("C", 100.0, pods=2, gpus_per_pod=8, duration_s=100.0),
    ]
    assert schedule(jobs, policy, reserve_after_s=50.0) == {
        "E": (0.0, 1100.0),
        "B": (100.0, 200.0),
        "C": (200.0, 300.0),
    }
    # Without a shrink (a rigid gang policy; E runs whole), B and C wait for E's end at 1,000.
    rigid = [replace(E, min_units=0), *jobs[1:]]
    assert schedule(rigid, policy, reserve_after_s=50.0) == {
        "E": (0.0, 1000.0),
        "B": (1000.0, 1100.0),
        "C": (1000.0, 1100.0),
    }


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_a_higher_priority_gang_takes_an_elastic_jobs_spare_replica(policy: Policy) -> None:
    # H (priority 1, 2 nodes, 100 s) arrives at 10: E gives back a replica at once, H runs
    # 10-110, E grows back at 110. E: 10 s full, 100 s half (50), 940 s full: ends at 1,050.
    jobs = [E, TraceJob("H", 10.0, pods=2, gpus_per_pod=8, duration_s=100.0, priority=1)]
    assert schedule(jobs, policy) == {"E": (0.0, 1050.0), "H": (10.0, 110.0)}
    # Not below its minimum: a gang of 3 nodes would need E at half a replica; H2 waits.
    big = [E, TraceJob("H2", 10.0, pods=3, gpus_per_pod=8, duration_s=100.0, priority=1)]
    assert schedule(big, policy) == {"E": (0.0, 1000.0), "H2": (1000.0, 1100.0)}
