"""Long work held to a share of the fleet (issue 34 item 3, `solver.long_work`): average JCT
against first-fit, with every job giving a runningEstimate (its duration times a log-normal
error: median 0.7, sigma 0.5, as `promise_bench.py`), per seed, with and without the rule,
and with several (long_s, share) settings. Issue 34's fleet `gang-equal-regions.yaml` (gangs
of 64-512 GPUs) and `gang-two-regions.yaml` (32-1,024), 300 gangs, load 1.0, Kalos log-normal
durations capped at 4 h; CP-SAT and backfill with section 3's options.

    .venv/bin/python bench/long_work_bench.py [--seeds 1,2,3,4,5] [--fleets ...] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from promise_bench import OPTIONS, estimated
from sim_bench import EXAMPLES

from volcano_global.simulation.engine import Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import synthetic_llm
from volcano_global.solver import Policy
from volcano_global.solver.long_work import LongWork

JOBS = 300
FLEETS = {"gang-equal-regions.yaml": (64, 512), "gang-two-regions.yaml": (32, None)}
SETTINGS: dict[str, LongWork | None] = {
    "off": None,
    "2 h, 30%": LongWork(long_s=2 * 3600, share=0.3),
    "1 h, 20%": LongWork(long_s=3600, share=0.2),
    "1 h, 30%": LongWork(long_s=3600, share=0.3),
    "1 h, 40%": LongWork(long_s=3600, share=0.4),
}
POLICIES = ("cpsat", "backfill")


def case(args: tuple[str, int, str, str]) -> dict:  # type: ignore[type-arg]
    fleet, seed, policy, setting = args
    scenario = Scenario.load(EXAMPLES / fleet)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    low, high = FLEETS[fleet]
    jobs = synthetic_llm(
        seed=seed, jobs=JOBS, load=1.0, capacity_gpus=capacity, min_gpus=low, max_gpus=high
    )
    jobs = estimated(jobs, seed)
    options = replace(OPTIONS, long_work=SETTINGS.get(setting))
    result = Simulation(scenario, jobs, Policy(policy), options).run()
    large = capacity / len(scenario.clusters) / 2
    return {
        "case": args,
        "records": [
            (r.job.id, r.job.arrival_s, r.finish, r.job.gpus >= large) for r in result.records
        ],
        "never": sorted(result.never_placeable),
    }


def judged(runs: list[dict]) -> list[dict[str, float]]:  # type: ignore[type-arg]
    """Per run of one trace, the avg JCT over the jobs some policy could place, and over the
    large gangs (half a cluster or more); a job a run never finished counts until the last
    finish of any run (sim_bench's rule)."""
    never = set().union(*(r["never"] for r in runs))
    horizon = max(f for r in runs for *_, f, _ in r["records"] if f is not None)
    out = []
    for run in runs:
        jct = [
            (f if f is not None else horizon) - a for i, a, f, _ in run["records"] if i not in never
        ]
        big = [
            (f if f is not None else horizon) - a
            for i, a, f, g in run["records"]
            if g and i not in never
        ]
        done = sum(f is not None for i, _, f, _ in run["records"] if i not in never)
        out.append(
            {"avg_jct": statistics.fmean(jct), "large_jct": statistics.fmean(big), "finished": done}
        )
    return out


def table(fleet: str, seeds: list[int], done: dict) -> list[str]:  # type: ignore[type-arg]
    rows = [("first-fit", "off")] + [(p, k) for p in POLICIES for k in SETTINGS]
    per_seed = {
        s: dict(zip(rows, judged([done[(fleet, s, p, k)] for p, k in rows]), strict=True))
        for s in seeds
    }

    def ratios(row: tuple[str, str], key: str) -> list[float]:
        return [per_seed[s][("first-fit", "off")][key] / per_seed[s][row][key] for s in seeds]

    lines = [
        f"### {fleet}, {JOBS} gangs, load 1.0, every job with a runningEstimate, seeds "
        + ", ".join(map(str, seeds)),
        "",
        "| policy | long work | avg JCT (s, per seed) | vs first-fit: median / min "
        "| large gangs vs first-fit: median / min | finished |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        runs = [per_seed[s][row] for s in seeds]
        avg, large = ratios(row, "avg_jct"), ratios(row, "large_jct")
        jcts = " / ".join(f"{r['avg_jct']:,.0f}" for r in runs)
        lines.append(
            f"| {row[0]} | {row[1]} | {jcts} "
            f"| {statistics.median(avg):.2f}x / {min(avg):.2f}x "
            f"| {statistics.median(large):.2f}x / {min(large):.2f}x "
            f"| {' / '.join(str(r['finished']) for r in runs)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--fleets", default=",".join(FLEETS))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    fleets = args.fleets.split(",")
    cases = [(f, s, "first-fit", "off") for f in fleets for s in seeds]
    cases += [(f, s, p, k) for f in fleets for s in seeds for p in POLICIES for k in SETTINGS]
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = {tuple(r["case"]): r for r in pool.map(case, cases)}
    for fleet in fleets:
        print("\n".join(table(fleet, seeds, done)) + "\n")
    print(f"Simulated in {time.monotonic() - started:,.0f} s.")


if __name__ == "__main__":
    main()
