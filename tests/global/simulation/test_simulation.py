"""The simulator: a hand-computed schedule per policy on a tiny trace, determinism for a seed,
the fluid bounds never beaten, the speed model by hand, the trace readers on the real files."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from volcano_global.simulation import speed
from volcano_global.simulation.comparison import bounds, judge
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.metrics import summarise
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob, read_philly, read_pollux, synthetic_llm
from volcano_global.solver import Policy, planning

DATA = Path(__file__).resolve().parents[3] / "bench" / "data" / "traces"  # excerpts in the repo
REPO = Path(__file__).resolve().parents[3]


def two_clusters(gbps: float = 100.0, nodes: int = 2) -> Scenario:
    spec = {"nodeGroups": [{"count": nodes, "gpusPerNode": 8, "gpuModel": "H100"}]}
    return Scenario.model_validate(
        {
            "clusters": [{"name": "c0", "spec": spec}, {"name": "c1", "spec": spec}],
            "links": [{"a": "c0", "b": "c1", "gbps": gbps}],
        }
    )


# A: 16 GPUs whole, 100 s. B: 24 GPUs (more than one 16-GPU cluster), splittable by pod, 50 s.
TINY = [
    TraceJob("A", 0.0, pods=2, gpus_per_pod=8, duration_s=100.0),
    TraceJob(
        "B",
        0.0,
        pods=3,
        gpus_per_pod=8,
        duration_s=50.0,
        splittable=True,
        unit_pods=1,
        max_clusters=2,
    ),
]


def times(
    policy: Policy, jobs: list[TraceJob] = TINY
) -> dict[str, tuple[float | None, float | None]]:
    result = Simulation(two_clusters(), jobs, policy).run()
    return {r.job.id: (r.start, r.finish) for r in result.records}


ESTIMATED = [replace(j, estimate_s=j.duration_s) for j in TINY]


def test_the_tiny_trace_by_hand() -> None:
    # Nothing is known of durations yet: the least expected service is the fewest GPUs, so
    # CP-SAT serves A (16 GPUs) first, and B (24) waits for it.
    assert times(Policy.CPSAT) == {"A": (0.0, 100.0), "B": (100.0, 150.0)}
    # With the users' estimates, B's 24 x 50 GPU-seconds go before A's 16 x 100: B split
    # 16 + 8 at t=0; A needs a whole cluster, which frees when B ends at 50; A ends at 150.
    assert times(Policy.CPSAT, ESTIMATED) == {"A": (50.0, 150.0), "B": (0.0, 50.0)}
    assert times(Policy.BACKFILL, ESTIMATED) == {"A": (50.0, 150.0), "B": (0.0, 50.0)}
    # Greedy and proportional go in queue order: A takes c0 at 0; B does not fit in c1's 16
    # GPUs and waits for A; then splits; ends at 150.
    assert times(Policy.GREEDY) == {"A": (0.0, 100.0), "B": (100.0, 150.0)}
    assert times(Policy.PROPORTIONAL) == {"A": (0.0, 100.0), "B": (100.0, 150.0)}
    # First-fit never splits: B never fits anywhere.
    assert times(Policy.FIRST_FIT) == {"A": (0.0, 100.0), "B": (None, None)}
    summary = summarise(Simulation(two_clusters(), ESTIMATED, Policy.CPSAT).run())
    assert (summary.avg_jct_s, summary.makespan_s) == (100.0, 150.0)
    assert summary.avg_jct_bound_s == 75.0  # (100 + 50) / 2
    assert summary.makespan_bound_s == 100.0  # A alone; fluid: (1600 + 1200) / 32 = 87.5
    assert summary.split_jobs == 1


def test_a_split_short_of_bandwidth_runs_slower_by_the_model() -> None:
    # B declares V/tau = 300 Gbps and tolerates 20 % of a step: a 2-way split needs 300 Gbps
    # per pair; proportional ignores links and splits over the 100 Gbps one:
    # step factor 1 + 0.2 * (300/100 - 1) = 1.4, so 50 s of work takes 70 s.
    hungry = TraceJob(
        "B",
        0.0,
        pods=3,
        gpus_per_pod=8,
        duration_s=50.0,
        splittable=True,
        unit_pods=1,
        max_clusters=2,
        allreduce_gbps=300.0,
        comm_share=0.2,
    )
    result = Simulation(two_clusters(), [hungry], Policy.PROPORTIONAL).run()
    (record,) = result.records
    assert record.finish == pytest.approx(70.0)
    assert record.slowest_factor == pytest.approx(1.4)
    assert record.crossing_gbit == pytest.approx(2 * 100 * 70)  # both directions, full link
    cpsat = Simulation(two_clusters(), [hungry], Policy.CPSAT).run()
    assert cpsat.records[0].start is None  # CP-SAT does not oversubscribe the link


def test_speed_model_by_hand() -> None:
    need = speed.needs(600.0, ["b", "a", "c"])  # 3-way split: 2 x 600 / 3 = 400 per pair
    assert need == {("a", "b"): 400.0, ("a", "c"): 400.0, ("b", "c"): 400.0}
    granted = speed.grants(
        {"j1": {("a", "b"): 400.0}, "j2": {("a", "b"): 200.0}}, {("a", "b"): 300.0}
    )
    assert granted == {"j1": {("a", "b"): 200.0}, "j2": {("a", "b"): 100.0}}
    assert speed.step_factor(
        comm_share=0.1, need={("a", "b"): 400.0}, got={("a", "b"): 200.0}, unit_broken=True
    ) == pytest.approx(1.1 * speed.TIER_PENALTY)
    assert speed.grants({"j": {("x", "y"): 50.0}}, {}) == {"j": {("x", "y"): speed.FALLBACK_GBPS}}


def run_all(seed: int, jobs: int = 120) -> dict[str, object]:
    world = two_clusters(gbps=400.0, nodes=16)  # 2 x 128 GPUs
    workload = synthetic_llm(seed=seed, jobs=jobs, load=1.5, capacity_gpus=256)
    options = SimOptions(window=30, deterministic_time=0.2)
    return {p.value: Simulation(world, workload, p, options).run() for p in Policy}


def test_a_seed_reproduces_the_run_exactly() -> None:
    first, second = run_all(7), run_all(7)
    for policy, result in first.items():
        other = second[policy]
        assert [(r.job.id, r.start, r.finish, r.clusters) for r in result.records] == [  # type: ignore[attr-defined]
            (r.job.id, r.start, r.finish, r.clusters)
            for r in other.records  # type: ignore[attr-defined]
        ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_policy_beats_the_fluid_bound(seed: int) -> None:
    for policy, result in run_all(seed).items():
        summary = summarise(result)  # type: ignore[arg-type]
        for r in result.records:  # type: ignore[attr-defined]
            if r.finish is not None:
                assert r.finish - r.job.arrival_s >= r.job.duration_s - 1e-6, (policy, r.job.id)
        assert summary.makespan_s >= summary.makespan_bound_s - 1e-6, policy
        assert summary.avg_jct_s >= summary.avg_jct_bound_s - 1e-6, policy
        assert 0.0 <= summary.gpu_allocation <= 1.0


def test_trace_readers_on_the_real_files() -> None:
    philly = read_philly(DATA / "philly_gavel" / "0e4a51.trace", limit=20)
    assert len(philly) == 20
    assert philly[0].arrival_s == 0.0
    # Transformer: 95,121 steps at 8 steps/s on 1 GPU.
    assert philly[0].gpus == 1
    assert philly[0].duration_s == pytest.approx(95121 / 8)
    pollux = read_pollux(DATA / "pollux" / "workload-1.csv")
    assert len(pollux) == 160
    first = pollux[0]
    assert first.id == "cifar10-0"
    assert first.pods == 16  # 1 GPU-hour over 16 replicas
    assert first.duration_s == pytest.approx(3600 / 16)


def test_the_command_writes_results_and_plots(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "clusters:\n"
        "  - {name: a, spec: {nodeGroups: [{count: 8, gpusPerNode: 8}]}}\n"
        "  - {name: b, spec: {nodeGroups: [{count: 8, gpusPerNode: 8}]}}\n"
        "links: [{a: a, b: b, gbps: 400}]\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "volcano_global.cli.main",
            "simulate",
            "--scenario",
            str(scenario),
            "--jobs",
            "40",
            "--out",
            str(tmp_path / "out"),
            "--policy",
            "cpsat",
            "--policy",
            "first-fit",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (
        "summary.json",
        "summary.csv",
        "jobs-cpsat.csv",
        "timeline-first-fit.csv",
        "allocation.png",
        "allocation.svg",
        "jct.svg",
        "queueing.png",
    ):
        assert (tmp_path / "out" / name).stat().st_size > 0, name
    assert "avg JCT" in result.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "volcano_global.cli.main",
            "simulate",
            "--scenario",
            str(tmp_path / "missing.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert bad.returncode == 1
    assert "missing.yaml" in bad.stderr


def test_the_policies_judged_over_the_same_jobs_by_hand() -> None:
    results = [
        Simulation(two_clusters(), ESTIMATED, Policy.CPSAT).run(),
        Simulation(two_clusters(), ESTIMATED, Policy.FIRST_FIT).run(),
    ]
    cpsat, first_fit = judge(results)
    # CP-SAT: B (0, 50), A (50, 150). First-fit: A (0, 100), B never; it is charged until
    # the last finish of any policy, CP-SAT's 150 (not first-fit's own 100, which would put
    # first-fit level with CP-SAT).
    assert (cpsat.avg_jct_s, first_fit.avg_jct_s) == (100.0, 125.0)
    assert (cpsat.avg_jct_common_s, first_fit.avg_jct_common_s) == (150.0, 100.0)  # A only
    # B (24 GPUs) is larger than either 16-GPU cluster: only a splitter runs it.
    assert (cpsat.splitter_only_jobs, cpsat.splitter_only_finished) == (1, 1)
    assert (first_fit.splitter_only_finished, first_fit.splitter_only_avg_jct_s) == (0, 150.0)
    # Half an average cluster is 8 GPUs: both jobs are large gangs.
    assert (cpsat.large_jobs, cpsat.large_wait_max_s, first_fit.large_wait_max_s) == (
        2,
        50.0,
        150.0,
    )
    # Backlog over the jobs both started (A): CP-SAT's A waits 0-50 while B holds 24 of 32.
    assert cpsat.allocation_backlog == 0.75
    assert math.isnan(first_fit.allocation_backlog)  # its A never waits
    # Fluid SRPT on 32 GPUs: B's 1,200 GPU-s end at 37.5, A's 1,600 at 87.5: 62.5 on average,
    # below the durations' 75.
    limit = bounds(results[0])
    assert (limit.avg_jct_fluid_s, limit.avg_jct_s) == (62.5, 75.0)


def test_the_bound_over_large_gangs_by_hand() -> None:
    # On 2 x 16 GPUs a large gang is 8 GPUs or more: S (4 GPUs, 400 s) is not one, L1 (16
    # GPUs, 100 s) and L2 (16 GPUs, 50 s, arriving at 10) are.
    jobs = [
        TraceJob("S", 0.0, pods=1, gpus_per_pod=4, duration_s=400.0),
        TraceJob("L1", 0.0, pods=2, gpus_per_pod=8, duration_s=100.0),
        TraceJob("L2", 10.0, pods=2, gpus_per_pod=8, duration_s=50.0),
    ]
    result = Simulation(two_clusters(), jobs, Policy.FIRST_FIT).run()
    # Over L1 and L2 alone on 32 GPUs: L1's 1,600 GPU-s run alone until 10 (320 done), then
    # L2's 800 (shorter) end at 35 and L1's last 1,280 at 75: (75 + 25) / 2 = 50, below their
    # durations' 75. Over all three S's 1,600 GPU-s come last: the bound is the durations' 183.3.
    large = bounds(result, large=True)
    assert (large.avg_jct_fluid_s, large.avg_jct_s) == (50.0, 75.0)
    assert bounds(result).avg_jct_s == pytest.approx(550 / 3)


def one_cluster_of_two_nodes() -> Scenario:
    spec = {"nodeGroups": [{"count": 2, "gpusPerNode": 8, "gpuModel": "H100"}]}
    return Scenario.model_validate({"clusters": [{"name": "c0", "spec": spec}]})


# A holds one node until 100; B needs both; C and D arrive while B waits. Estimates are exact.
STREAM = [
    TraceJob(name, arrival, pods=pods, gpus_per_pod=8, duration_s=100.0, estimate_s=100.0)
    for name, arrival, pods in (("A", 0.0, 1), ("B", 1.0, 2), ("C", 60.0, 1), ("D", 120.0, 1))
]


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_a_reservation_is_honoured_over_time(policy: Policy) -> None:
    # B is owed a reservation at once (reserve_after_s = 0): both nodes from t = 100, when A
    # ends. C would still run then, so it may not take the free node at 60; B starts at 100,
    # and C and D after it.
    result = Simulation(
        one_cluster_of_two_nodes(), STREAM, policy, SimOptions(reserve_after_s=0.0)
    ).run()
    assert {r.job.id: (r.start, r.finish) for r in result.records} == {
        "A": (0.0, 100.0),
        "B": (100.0, 200.0),
        "C": (200.0, 300.0),
        "D": (200.0, 300.0),
    }
    # Without a reservation the smaller jobs keep one node busy and B waits until 220.
    greedy = Simulation(one_cluster_of_two_nodes(), STREAM, Policy.GREEDY).run()
    assert next(r for r in greedy.records if r.job.id == "B").start == 220.0


def one_cluster(nodes: int) -> Scenario:
    spec = {"nodeGroups": [{"count": nodes, "gpusPerNode": 8, "gpuModel": "H100"}]}
    return Scenario.model_validate({"clusters": [{"name": "c0", "spec": spec}]})


# A: 2 nodes for 100 s. E: 2 data-parallel replicas of 2 nodes, 100 s at full width, elastic
# down to 1 replica. Four nodes.
ELASTIC = [
    TraceJob("A", 0.0, pods=2, gpus_per_pod=8, duration_s=100.0, estimate_s=100.0),
    TraceJob("E", 0.0, pods=4, gpus_per_pod=8, duration_s=100.0, unit_pods=2, min_units=1),
]


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
def test_an_elastic_job_starts_narrow_and_grows(policy: Policy) -> None:
    # E starts at once with one replica (half speed: 50 s of its work by t = 100), grows to two
    # when A ends (no resize interval, a free restart here), and does the other 50 s at full
    # speed: it ends at 150.
    eager = SimOptions(
        hysteresis=planning.Hysteresis(min_interval_s=0.0, min_growth=0.0), resize_restart_s=0.0
    )
    result = Simulation(one_cluster(4), ELASTIC, policy, eager).run()
    assert {r.job.id: (r.start, r.finish) for r in result.records} == {
        "A": (0.0, 100.0),
        "E": (0.0, 150.0),
    }
    # By default a job is not resized within 10 minutes of its start: E stays narrow to 200.
    result = Simulation(one_cluster(4), ELASTIC, policy).run()
    assert {r.job.id: r.finish for r in result.records}["E"] == 200.0
    # A rigid gang policy waits for all four nodes: E runs 100-200.
    greedy = Simulation(one_cluster(4), ELASTIC, Policy.GREEDY).run()
    assert {r.job.id: (r.start, r.finish) for r in greedy.records}["E"] == (100.0, 200.0)


def test_the_synthetic_gangs_keep_to_the_sizes_asked_in_kalos_proportions() -> None:
    jobs = synthetic_llm(seed=3, jobs=400, load=1.0, capacity_gpus=3072, min_gpus=64, max_gpus=512)
    sizes = [j.gpus for j in jobs]
    assert min(sizes) == 64 and max(sizes) == 512
    assert sizes.count(64) > sizes.count(512)  # Kalos: the smaller, the likelier
