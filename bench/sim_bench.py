"""Scheduling-policy benchmark by simulation: the same traces replayed through `vglobal
simulate`'s engine per policy (CP-SAT against whole-job first-fit, proportional split and
greedy), at low and high load. `bench/solver_bench.py` calls `sections()` to write it into
docs/benchmarks.md; run alone it prints the section:

    .venv/bin/python bench/sim_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.metrics import Summary, summarise
from volcano_global.simulation.report import write
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob, read_philly, read_pollux, synthetic_llm
from volcano_global.solver import Policy

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "docs" / "examples" / "simulate" / "four-clusters.yaml"
SMALL = REPO / "docs" / "examples" / "simulate" / "small-fleet.yaml"
TRACES = REPO / "bench" / "data" / "traces"  # excerpts of ../shared/data (bench/data/README.md)
PLOTS = REPO / "docs" / "benchmarks"


def run(scenario: Scenario, jobs: list[TraceJob], options: SimOptions) -> list[SimResult]:
    return [Simulation(scenario, jobs, policy, options).run() for policy in Policy]


def common_avg_jct(results: list[SimResult]) -> dict[str, float]:
    """Average JCT over the jobs every policy finished (the fair comparison)."""
    finished = [
        {r.job.id: r.finish - r.job.arrival_s for r in res.records if r.finish is not None}
        for res in results
    ]
    common = set.intersection(*(set(f) for f in finished))
    return {
        res.policy: sum(f[j] for j in common) / max(len(common), 1)
        for res, f in zip(results, finished, strict=True)
    }


def table(results: list[SimResult], summaries: list[Summary]) -> list[str]:
    common = common_avg_jct(results)
    baseline = min(v for k, v in common.items() if k != Policy.CPSAT.value)
    rows = [
        "| policy | finished | avg JCT (s) | avg JCT, jobs all finished (s) | p99 JCT (s) | "
        "makespan (s) | fluid bounds: avg JCT / makespan (s) | GPU alloc | alloc while backlog "
        "| split jobs | slowed jobs | cross-cluster TB | time a link was oversubscribed (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        rows.append(
            f"| {s.policy} | {s.finished}/{s.jobs} | {s.avg_jct_s:,.0f} | {common[s.policy]:,.0f} "
            f"| {s.p99_jct_s:,.0f} | {s.makespan_s:,.0f} | "
            f"{s.avg_jct_bound_s:,.0f} / {s.makespan_bound_s:,.0f} | {100 * s.gpu_allocation:.1f}% | "
            f"{100 * s.gpu_allocation_backlog:.1f}% | {s.split_jobs} | {s.slowed_jobs} | "
            f"{s.crossing_tb:,.1f} | {s.oversubscribed_s:,.0f} |"
        )
    rows += [
        "",
        "Fluid bounds are over the jobs each policy finished. Best baseline's avg JCT over the "
        f"jobs every policy finished / CP-SAT's: **{baseline / common[Policy.CPSAT.value]:.2f}x**.",
        "",
    ]
    return rows


def sections(*, quick: bool = False) -> list[str]:
    scenario = Scenario.load(SCENARIO)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    options = SimOptions(window=50 if quick else 100, deterministic_time=0.2 if quick else 0.5)
    n = 150 if quick else 1500
    lines = [
        "## 3. Policies over time: trace replay by simulation",
        "",
        f"`vglobal simulate` (`volcano_global.simulation`) on `{SCENARIO.relative_to(REPO)}`: 4 "
        f"clusters x 512 H100 ({capacity:,} GPUs), ToRs of 8 nodes, full mesh of 800 Gbps links. "
        "Every policy sees the same trace; the queue order is the server's (priority, weighted "
        "fair share, arrival); a round runs at every arrival and completion; CP-SAT gets a "
        f"deterministic work limit of {options.deterministic_time} per round and a window of "
        f"{options.window} jobs. The speed model (`volcano_global/simulation/speed.py`) slows a "
        "split job whose pairs of clusters get less bandwidth than its declared plan needs, and a "
        "job whose data-parallel replicas had to stay under one ToR and did not; it applies to "
        "every policy alike. Unfinished jobs never started (e.g. first-fit cannot run a job "
        "larger than any cluster; CP-SAT will not start a split whose links cannot carry it).",
        "",
    ]
    for label, load in (("low load", 0.6), ("high load", 2.0)):
        jobs = synthetic_llm(seed=1, jobs=n, load=load, capacity_gpus=capacity)
        started = time.monotonic()
        results = run(scenario, jobs, options)
        summaries = [summarise(r) for r in results]
        lines += [
            f"### LLM-scale mix, {label} (offered load {load}, {n} jobs, seed 1)",
            "",
            f"Kalos-parameterised sizes and durations (`volcano_global/simulation/workload.py`); "
            f"{sum(1 for j in jobs if j.splittable)} jobs of 64+ GPUs declare a plan and may split. "
            f"Simulated in {time.monotonic() - started:.0f} s.",
            "",
            *table(results, summaries),
        ]
        if load > 1 and not quick:
            PLOTS.mkdir(parents=True, exist_ok=True)
            write(PLOTS / "llm-high-load", results, summaries)
            lines += [
                "![GPU allocation over time](benchmarks/llm-high-load/allocation.svg)",
                "![JCT distribution](benchmarks/llm-high-load/jct.svg)",
                "![Queueing delay by size](benchmarks/llm-high-load/queueing.svg)",
                "",
            ]
    small = Scenario.load(SMALL)
    philly = read_philly(TRACES / "philly_gavel" / "0e4a51.trace", limit=100 if quick else 200)
    pollux = read_pollux(TRACES / "pollux" / "workload-1.csv")
    lines += [
        f"The two public traces replayed on `{SMALL.relative_to(REPO)}` (4 clusters x 16 GPUs, "
        "100 Gbps links: the size of the Pollux testbed). Their jobs declare no parallelism "
        "plan, so no policy may split them; a job larger than one cluster (Pollux: 4 jobs of "
        "more than 16 GPUs) never starts under any policy.",
        "",
    ]
    for label, jobs in (
        (f"Philly-derived trace (Gavel, 0e4a51, first {len(philly)} jobs)", philly),
        ("Pollux workload-1 (160 jobs, 8 hours)", pollux),
    ):
        results = run(small, jobs, options)
        lines += [f"### {label}", "", *table(results, [summarise(r) for r in results])]
    lines += [
        "Command: `.venv/bin/python bench/solver_bench.py` (regenerates this whole file; "
        "`bench/sim_bench.py` alone prints this section). Any single run: "
        f"`vglobal simulate --scenario {SCENARIO.relative_to(REPO)} --jobs 1500 --load 2.0 "
        "--out vglobal-data/sim` (CSV, JSON, PNG and SVG in the output folder).",
        "",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    print("\n".join(sections(quick=parser.parse_args().quick)))


if __name__ == "__main__":
    main()
