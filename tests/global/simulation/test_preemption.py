"""Preemption and reclaim in the simulator, hand-checked: the victim leaves at once, goes back
to the queue and loses its work since its start (or its last checkpoint)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import Policy
from volcano_global.solver.preemption import Rules

REPO = Path(__file__).resolve().parents[3]


def fleet(reclaimable: bool = True) -> Scenario:
    spec = {"nodeGroups": [{"count": 4, "gpusPerNode": 8, "gpuModel": "H100"}]}
    queues = [{"name": "a"}, {"name": "b", "reclaimable": reclaimable}]
    return Scenario.model_validate({"clusters": [{"name": "c0", "spec": spec}], "queues": queues})


# L: the whole cluster (4 nodes) for 2,000 s from t = 0, low priority.
L = TraceJob("L", 0.0, pods=4, gpus_per_pod=8, duration_s=2000.0, priority=0, queue="a")
# H: half the cluster for 100 s, high priority, arrives when L has run 1,000 s.
H = TraceJob("H", 1000.0, pods=2, gpus_per_pod=8, duration_s=100.0, priority=10, queue="a")


def run(jobs: list[TraceJob], policy: Policy, world: Scenario | None = None, **options):  # type: ignore[no-untyped-def]
    result = Simulation(world or fleet(), jobs, policy, SimOptions(**options)).run()
    return {r.job.id: (r.start, r.finish) for r in result.records}, result


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_a_high_priority_gang_evicts_a_low_one_which_starts_again_from_scratch(
    policy: Policy,
) -> None:
    times, result = run([L, H], policy, preemption=Rules(min_run_s=600))
    # H evicts L at 1,000 and runs to 1,100; L waits for H, restarts at 1,100 and redoes all
    # 2,000 s: 32 GPUs x 1,000 s lost. Worth it: no job has finished, so L is expected to run
    # the default 3,600 s and end in 2,600; waiting would cost H 16 GPUs x 2,600 s, more.
    assert times == {"L": (1100.0, 3100.0), "H": (1000.0, 1100.0)}
    assert result.evictions == [(1000.0, "L", "H")]
    (victim,) = [r for r in result.records if r.job.id == "L"]
    assert (victim.preempted, victim.lost_gpu_s) == (1, 32 * 1000.0)
    # Without preemption H waits for L's end.
    assert run([L, H], policy)[0] == {"L": (0.0, 2000.0), "H": (2000.0, 2100.0)}


def test_with_checkpoints_a_victim_loses_only_the_work_since_the_last() -> None:
    times, result = run([L, H], Policy.BACKFILL, preemption=Rules(), checkpoint_s=300.0)
    # Checkpoints at 300, 600, 900: 100 s lost, 900 s kept; L restarts at 1,100 with 1,100 s.
    assert times == {"L": (1100.0, 2200.0), "H": (1000.0, 1100.0)}
    assert [r.lost_gpu_s for r in result.records if r.job.id == "L"] == [32 * 100.0]


@pytest.mark.parametrize(
    ("low", "high", "rules"),
    [
        (replace(L, preemptable=False), H, Rules()),  # volcano.sh/preemptable: "false"
        (L, replace(H, preemption_policy="Never"), Rules()),  # its class never preempts
        (L, replace(H, priority=0), Rules()),  # not a lower priority
        (L, H, Rules(min_run_s=1200)),  # L has not run long enough at 1,000
        (L, H, Rules(max_gpus=16)),  # the cap: L's 32 GPUs are more than a round may evict
        # L's runningEstimate (its true 2,000 s): it ends in 1,000 s; waiting costs H 16 GPUs
        # x 1,000 s, less than the 32 x 1,000 s evicting L would lose.
        (replace(L, estimate_s=2000.0), H, Rules()),
    ],
)
def test_no_eviction(low: TraceJob, high: TraceJob, rules: Rules) -> None:
    times, result = run([low, high], Policy.BACKFILL, preemption=rules)
    assert result.evictions == []
    assert times == {"L": (0.0, 2000.0), "H": (2000.0, 2100.0)}


def test_reclaim_between_two_queues() -> None:
    # Queue b's L1 and L2 (2 nodes each) hold the whole fleet; at 1,000 queue a's H (2 nodes,
    # the same priority) arrives: a and b deserve 16 GPUs each (equal weights, both want at
    # least that). b keeps its deserved 16 without one of its jobs: L1 (the tie broken by id)
    # is reclaimed. A whole job is never taken if its queue would drop below its deserved.
    low = [replace(L, id=name, pods=2, queue="b") for name in ("L1", "L2")]
    mine = replace(H, priority=0, queue="a")
    times, result = run([*low, mine], Policy.BACKFILL, preemption=Rules())
    assert result.evictions == [(1000.0, "L1", "H")]
    assert times == {"L1": (1100.0, 3100.0), "L2": (0.0, 2000.0), "H": (1000.0, 1100.0)}
    # Queue b not reclaimable: H waits for L2's end.
    times, result = run([*low, mine], Policy.BACKFILL, fleet(reclaimable=False), preemption=Rules())
    assert result.evictions == [] and times["H"] == (2000.0, 2100.0)
    # One job of b holding everything: taking it would drop b below its deserved share.
    times, result = run([replace(L, queue="b"), mine], Policy.BACKFILL, preemption=Rules())
    assert result.evictions == []


def test_the_command_runs_with_two_priority_classes_and_preemption(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "clusters:\n  - {name: a, spec: {nodeGroups: [{count: 8, gpusPerNode: 8}]}}\n"
    )
    args = ["--scenario", str(scenario), "--jobs", "60", "--load", "2", "--min-gpus", "8"]
    args += ["--policy", "backfill", "--out", str(tmp_path / "out"), "--high-priority-share", "0.3"]
    args += ["--preemption", "--min-run", "60", "--checkpoint", "600", "--wait-weight", "100"]
    result = subprocess.run(
        [sys.executable, "-m", "volcano_global.cli.main", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("backfill: "))
    evicted = int(line.split()[1])
    assert evicted > 0 and "GPU-hours lost" in line
