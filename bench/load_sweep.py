"""How the planned policies' lead over first-fit moves with the offered load, on the gang-heavy
fleets of section 3, next to the most any policy could lead by (first-fit's average over the
lower bound no schedule beats). Section 3 runs at load 1.0, where on some fleets first-fit is
already within a few percent of that bound; this shows whether the lead grows where queues do.

    .venv/bin/python bench/load_sweep.py [--loads 0.8,1.0,1.5,2.0] [--seeds 1,2,3] [--write]

--write replaces section 3d of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import math
import re
import time
from concurrent.futures import ProcessPoolExecutor

from sim_bench import DOC, EXAMPLES, GANG_FLEETS

from volcano_global.simulation.comparison import Judged, bounds, judge
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import synthetic_llm
from volcano_global.solver import Policy

POLICIES = [Policy.CPSAT, Policy.GREEDY, Policy.FIRST_FIT]
OPTIONS = SimOptions(window=50, deterministic_time=0.2)  # as section 3
JOBS = 300


def _case(args: tuple[str, int, float]) -> tuple[str, int, float, dict]:  # type: ignore[type-arg]
    name, seed, load = args
    scenario = Scenario.load(EXAMPLES / name)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    jobs = synthetic_llm(seed=seed, jobs=JOBS, load=load, capacity_gpus=capacity, min_gpus=32)
    started = time.monotonic()
    results = [Simulation(scenario, jobs, policy, OPTIONS).run() for policy in POLICIES]
    judged = dict(zip(POLICIES, judge(results), strict=True))
    return (
        name,
        seed,
        load,
        {
            "judged": judged,
            "bound": bounds(results[0]).avg_jct_s,
            "large_bound": bounds(results[0], large=True).avg_jct_s,
            "seconds": time.monotonic() - started,
        },
    )


def sweep(loads: list[float], seeds: list[int]) -> list[str]:
    cases = [(name, seed, load) for name in GANG_FLEETS for load in loads for seed in seeds]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = {(n, s, lo): out for n, s, lo, out in pool.map(_case, cases)}
    lines = [
        "## 3d. The lead over first-fit against the offered load",
        "",
        f"`.venv/bin/python bench/load_sweep.py --loads {','.join(map(str, loads))} --seeds "
        f"{','.join(map(str, seeds))} --write`: section 3's fleets and trace ({JOBS} gangs of "
        "32-1,024 GPUs, Kalos sizes and durations, arrivals Poisson at the load times the "
        "fleet's GPUs over the mean GPU-time) and CP-SAT options, at several loads; cpsat, "
        "greedy and first-fit only (allocation while backlog is over the jobs those three "
        "started). Each ratio is the minimum over the seeds. Ceiling: the minimum over the "
        "seeds of first-fit's average JCT over the lower bound (fluid SRPT on the fleet's GPUs, "
        "or the average duration; for large gangs, the same bound over them alone, as if no "
        "other job ran): on that seed no schedule leads first-fit by more.",
        "",
        "| fleet | load | avg JCT vs first-fit | ceiling | vs greedy | large gangs vs first-fit "
        "| ceiling | large vs greedy | CP-SAT alloc while backlog | CP-SAT / first-fit large "
        "max wait (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    seconds = 0.0
    for name in GANG_FLEETS:
        for load in loads:
            per_seed = [done[(name, s, load)] for s in seeds]
            seconds += sum(c["seconds"] for c in per_seed)

            def low(attr: str, other: Policy, cases=per_seed) -> float:  # type: ignore[no-untyped-def]
                return min(
                    getattr(c["judged"][other], attr) / getattr(c["judged"][Policy.CPSAT], attr)
                    for c in cases
                )

            def ceiling(attr: str, bound: str, cases=per_seed) -> float:  # type: ignore[no-untyped-def]
                return min(getattr(c["judged"][Policy.FIRST_FIT], attr) / c[bound] for c in cases)

            ours: list[Judged] = [c["judged"][Policy.CPSAT] for c in per_seed]
            first: list[Judged] = [c["judged"][Policy.FIRST_FIT] for c in per_seed]
            lines.append(
                f"| {name.removesuffix('.yaml')} | {load} "
                f"| {low('avg_jct_s', Policy.FIRST_FIT):.2f}x "
                f"| {ceiling('avg_jct_s', 'bound'):.2f}x "
                f"| {low('avg_jct_s', Policy.GREEDY):.2f}x "
                f"| {_ratio(low('large_avg_jct_s', Policy.FIRST_FIT))} "
                f"| {_ratio(ceiling('large_avg_jct_s', 'large_bound'))} "
                f"| {_ratio(low('large_avg_jct_s', Policy.GREEDY))} "
                f"| {min(j.allocation_backlog for j in ours):.0%} "
                f"| {max(j.large_wait_max_s for j in ours):,.0f} / "
                f"{max(j.large_wait_max_s for j in first):,.0f} |"
            )
    lines += ["", f"Simulated in {seconds:,.0f} s of CPU (two processes).", ""]
    return lines


def _ratio(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}x"


def write_section(lines: list[str]) -> None:
    text = DOC.read_text()
    new = "\n".join(lines) + "\n"
    pattern = re.compile(r"## 3d\. The lead over first-fit.*?(?=\n## )", re.S)
    if pattern.search(text):
        DOC.write_text(pattern.sub(lambda _: new, text))
        return
    anchor = "\n## Reading the numbers"
    if anchor not in text:
        raise SystemExit(f"{DOC}: no '{anchor.strip()}' to write section 3d before")
    DOC.write_text(text.replace(anchor, "\n" + new + anchor, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", default="0.8,1.0,1.5,2.0")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--write", action="store_true", help="replace section 3d of the doc")
    args = parser.parse_args()
    lines = sweep(
        [float(x) for x in args.loads.split(",")], [int(s) for s in args.seeds.split(",")]
    )
    if args.write:
        write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
