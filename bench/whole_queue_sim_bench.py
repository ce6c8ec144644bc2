"""Every waiting job considered, in the simulator: section 3's gang fleets replayed with
`SimOptions(whole_queue=False)` (the window only, as sections 3-3i were measured) and
`whole_queue=True` (the default since issue 35 item 2), the same trace as `bench/sim_bench.py`
(synthetic_llm, gangs of 32 GPUs or more, 300 jobs, load 1.0, window 50, deterministic time
0.2), for cpsat and first-fit. Each fleet and seed's four runs are judged together
(`simulation.comparison.judge`: the same jobs, an unfinished one charged until the last finish
of any of the four, so first-fit's figures are not section 3's, judged with five policies).
"Most waiting": the longest line (`SimResult.timeline`) of the window-only run; at or under
the window, no job was ever beyond it and the two runs must agree. Prints a markdown row per
fleet, seed and policy as they complete:

    .venv/bin/python bench/whole_queue_sim_bench.py [--fleets gang-two-regions.yaml,...] \
        [--seeds 1,2,3] [--jobs 300] [--load 1.0] [--window 50]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from volcano_global.simulation.comparison import judge
from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import synthetic_llm
from volcano_global.solver import Policy

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples" / "simulate"
FLEETS = ("gang-two-regions.yaml", "gang-lingjun.yaml")
POLICIES = (Policy.CPSAT, Policy.FIRST_FIT)
WINDOW, DETERMINISTIC_TIME = 50, 0.2

Case = tuple[str, int, Policy, bool, int, float, int]


def _run(case: Case) -> tuple[Case, SimResult, float]:
    fleet, seed, policy, whole, n, load, window = case
    scenario = Scenario.load(EXAMPLES / fleet)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    jobs = synthetic_llm(seed=seed, jobs=n, load=load, capacity_gpus=capacity, min_gpus=32)
    options = SimOptions(window=window, deterministic_time=DETERMINISTIC_TIME, whole_queue=whole)
    started = time.monotonic()
    result = Simulation(scenario, jobs, policy, options).run()
    return case, result, time.monotonic() - started


def _group(case: Case) -> list[Case]:
    fleet, seed, _, _, n, load, window = case
    return [(fleet, seed, p, w, n, load, window) for p in POLICIES for w in (False, True)]


def _row(case: Case, done: dict[Case, tuple[SimResult, float]]) -> list[str]:
    cases = _group(case)
    fleet, seed, n, load, window = case[0], case[1], case[4], case[5], case[6]
    judged = dict(zip(cases, judge([done[c][0] for c in cases]), strict=True))
    rows = []
    for policy in POLICIES:
        key = {w: (fleet, seed, policy, w, n, load, window) for w in (False, True)}
        off, on = judged[key[False]], judged[key[True]]
        wall = " / ".join(f"{done[key[w]][1]:,.0f}" for w in (False, True))
        longest = max((len(s.pending) for s in done[key[False]][0].timeline), default=0)
        rows.append(
            f"| {fleet} | {n} | {load} | {window} | {seed} | {policy.value} | {longest} | {off.finished}/{off.jobs} / "
            f"{on.finished}/{on.jobs} | {off.avg_jct_s / 3600:.2f} / {on.avg_jct_s / 3600:.2f} "
            f"| {on.avg_jct_s / off.avg_jct_s:.3f} | {off.large_avg_jct_s / 3600:.2f} / "
            f"{on.large_avg_jct_s / 3600:.2f} | {on.large_avg_jct_s / off.large_avg_jct_s:.3f} "
            f"| {wall} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleets", default=",".join(FLEETS))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--window", type=int, default=WINDOW)
    args = parser.parse_args()
    fleets, seeds = args.fleets.split(","), [int(s) for s in args.seeds.split(",")]
    # cpsat first (the long runs), fleet by fleet, so a cut-short run leaves whole fleets.
    cases = [
        (f, s, p, w, args.jobs, args.load, args.window)
        for f in fleets
        for p in POLICIES
        for s in seeds
        for w in (False, True)
    ]
    print(
        "| fleet | jobs | load | window | seed | policy | most waiting | finished off / on | avg JCT (h) off / on | on/off "
        "| large gangs' avg JCT (h) off / on | on/off | simulated wall (s) off / on |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    done: dict[Case, tuple[SimResult, float]] = {}
    with ProcessPoolExecutor(max_workers=2) as pool:
        for future in as_completed([pool.submit(_run, c) for c in cases]):
            case, result, seconds = future.result()
            done[case] = (result, seconds)
            print(
                f"done {case[0]} {case[1]} {case[2].value} {case[3]} {seconds:.0f}s",
                file=sys.stderr,
                flush=True,
            )
            if all(c in done for c in _group(case)):
                print("\n".join(_row(case, done)), flush=True)


if __name__ == "__main__":
    main()
