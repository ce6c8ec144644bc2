"""Median and minimum over seeds, and the LP bound (issue 34): section 3's gang fleets and
issue 34's (`gang-equal-regions.yaml`, gangs of 64-512 GPUs), cpsat, backfill, greedy and
first-fit with section 3's options, each seed's average JCT beside the time-indexed LP bound
(`simulation.lp_bound`, non-preemptive), so bound / first-fit's JCT is the best ratio any
schedule could show. Prints docs/benchmarks.md section 3g, or with --write replaces it there:

    .venv/bin/python bench/when_bench.py [--seeds 1,2,3,4,5] [--jobs 300] [--write]
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from sim_bench import DOC, EXAMPLES

from volcano_global.simulation.comparison import Judged, bounds, judge
from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.lp_bound import LpBound, lp_bound_of
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob, synthetic_llm
from volcano_global.solver import Policy

POLICIES = [Policy.CPSAT, Policy.BACKFILL, Policy.GREEDY, Policy.FIRST_FIT]
OPTIONS = SimOptions(window=50, deterministic_time=0.2)  # as sim_bench's section 3
TITLE = "## 3g. Median and minimum over seeds, and the LP bound (issue 34)"
READING = "### What the seeds say"  # written by hand after the tables; --write keeps it


@dataclass(frozen=True)
class Fleet:
    name: str
    min_gpus: int
    max_gpus: int | None = None
    trace_capacity: int | None = None  # the trace's load is of this many GPUs (None: the fleet)


FLEETS = [
    Fleet("gang-equal-regions.yaml", 64, 512, 3072),  # issue 34's trace
    Fleet("gang-two-regions.yaml", 32),
    Fleet("gang-lingjun.yaml", 32),
    Fleet("gang-eight.yaml", 32),
]


@dataclass(frozen=True)
class Case:
    judged: list[Judged]  # in POLICIES' order
    split: list[int]  # jobs each policy ran over more than one cluster
    capacity: int
    fluid: float  # comparison.bounds: fluid SRPT or the average duration
    lp: LpBound
    lp_large: LpBound
    seconds: float

    def of(self, policy: Policy) -> Judged:
        return self.judged[POLICIES.index(policy)]

    def ratio(self, slower: Policy, faster: Policy, attr: str = "avg_jct_s") -> float:
        return getattr(self.of(slower), attr) / getattr(self.of(faster), attr)


def fleet_trace(
    fleet: Fleet, seed: int, jobs: int, load: float
) -> tuple[Scenario, int, list[TraceJob]]:
    """The fleet's scenario, its GPUs and its seeded gang trace."""
    scenario = Scenario.load(EXAMPLES / fleet.name)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    trace = synthetic_llm(
        seed=seed,
        jobs=jobs,
        load=load,
        capacity_gpus=fleet.trace_capacity or capacity,
        min_gpus=fleet.min_gpus,
        max_gpus=fleet.max_gpus,
    )
    return scenario, capacity, trace


def run_case(args: tuple[Fleet, int, int, float]) -> tuple[str, int, Case]:
    fleet, seed, jobs, load = args
    started = time.monotonic()
    scenario, capacity, trace = fleet_trace(fleet, seed, jobs, load)
    results: list[SimResult] = [Simulation(scenario, trace, p, OPTIONS).run() for p in POLICIES]
    case = Case(
        judged=judge(results),
        split=[sum(len(r.clusters) > 1 for r in res.records) for res in results],
        capacity=capacity,
        fluid=bounds(results[0]).avg_jct_s,
        lp=lp_bound_of(results[0]),
        lp_large=lp_bound_of(results[0], large=True),
        seconds=time.monotonic() - started,
    )
    return fleet.name, seed, case


def fleet_lines(fleet: Fleet, seeds: list[int], cases: list[Case], jobs: int) -> list[str]:
    sizes = f"{fleet.min_gpus}-{fleet.max_gpus or 1024:,}"
    first = cases[0]
    lines = [
        f"### {fleet.name} ({first.capacity:,} GPUs), {jobs} gangs of {sizes} GPUs, seeds "
        f"{', '.join(map(str, seeds))}",
        "",
        "Per seed, separated by /. LP: the time-indexed bound on avg JCT (large gangs: over "
        "them alone); fluid: `comparison.bounds` (fluid SRPT or the average duration).",
        "",
        "| | avg JCT (s) | large gangs' avg JCT (s) | finished | split jobs |",
        "|---|---:|---:|---:|---:|",
    ]
    for i, policy in enumerate(POLICIES):
        js = [c.judged[i] for c in cases]
        lines.append(
            f"| {policy.value} | {_each(j.avg_jct_s for j in js)} "
            f"| {_each(j.large_avg_jct_s for j in js)} "
            f"| {' / '.join(f'{j.finished}/{j.jobs}' for j in js)} "
            f"| {' / '.join(str(c.split[i]) for c in cases)} |"
        )
    lines += [
        f"| LP bound | {_each(c.lp.avg_jct_s for c in cases)} "
        f"| {_each(c.lp_large.avg_jct_s for c in cases)} | | |",
        f"| fluid bound | {_each(c.fluid for c in cases)} | | | |",
        "",
        "| ratio | per seed | median | minimum |",
        "|---|---:|---:|---:|",
        *[_ratio_row(label, values) for label, values in ratios(cases).items()],
        "",
        f"LP: slots of {_each(c.lp.slot_s for c in cases)} s, solved in "
        f"{_each([c.lp.seconds for c in cases], '.1f')} s; simulated in "
        f"{sum(c.seconds for c in cases):,.0f} s of CPU.",
        "",
    ]
    return lines


def ratios(cases: list[Case]) -> dict[str, list[float]]:
    """Each ratio per seed, > 1 when the second policy (or the bound) is ahead."""
    ff, cp, gr, bf = Policy.FIRST_FIT, Policy.CPSAT, Policy.GREEDY, Policy.BACKFILL
    large = "large_avg_jct_s"
    out = {f"first-fit / {p.value}": [c.ratio(ff, p) for c in cases] for p in (cp, bf, gr)}
    out["first-fit / LP bound (the most any schedule can lead by)"] = [
        c.of(ff).avg_jct_s / c.lp.avg_jct_s for c in cases
    ]
    out |= {
        f"large gangs: first-fit / {p.value}": [c.ratio(ff, p, large) for c in cases]
        for p in (cp, bf, gr)
    }
    out["large gangs: first-fit / LP bound"] = [
        c.of(ff).large_avg_jct_s / c.lp_large.avg_jct_s for c in cases
    ]
    out["greedy / cpsat"] = [c.ratio(gr, cp) for c in cases]
    out["backfill / cpsat (the same plan, greedy placement)"] = [c.ratio(bf, cp) for c in cases]
    out["large gangs: greedy / cpsat"] = [c.ratio(gr, cp, large) for c in cases]
    out["large gangs: backfill / cpsat"] = [c.ratio(bf, cp, large) for c in cases]
    out["cpsat / LP bound (how far from the best)"] = [
        c.of(cp).avg_jct_s / c.lp.avg_jct_s for c in cases
    ]
    return out


def _ratio_row(label: str, values: list[float]) -> str:
    return (
        f"| {label} | {' / '.join(f'{v:.2f}' for v in values)} "
        f"| **{statistics.median(values):.2f}x** | {min(values):.2f}x |"
    )


def _each(values, fmt: str = ",.0f") -> str:  # type: ignore[no-untyped-def]
    return " / ".join("-" if math.isnan(v) else format(v, fmt) for v in values)


def section(seeds: list[int], jobs: int, load: float, fleets: list[Fleet]) -> list[str]:
    work = [(fleet, seed, jobs, load) for fleet in fleets for seed in seeds]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = {(name, seed): case for name, seed, case in pool.map(run_case, work)}
    lines = [
        TITLE,
        "",
        f"`bench/when_bench.py`: section 3's options (window {OPTIONS.window}, CP-SAT work "
        f"limit {OPTIONS.deterministic_time} per round), load {load}, no preemption, every "
        "job counted (one a policy never finished, until the last finish of any policy: a "
        "lower bound on its JCT, so such a policy's figure may even fall below the LP bound). "
        "The LP bound (`volcano_global.simulation.lp_bound`) is over full-speed durations on "
        "the fleet's GPUs as one pool: no clusters, links or rounds, so it is not reachable "
        "where gangs must split or wait for a link. Command: `.venv/bin/python "
        f"bench/when_bench.py --seeds {','.join(map(str, seeds))} --jobs {jobs} --write` "
        f"(run {time.strftime('%Y-%m-%d', time.gmtime())}, two processes).",
        "",
    ]
    for fleet in fleets:
        lines += fleet_lines(fleet, seeds, [done[(fleet.name, s)] for s in seeds], jobs)
    return lines


def write_section(lines: list[str]) -> None:
    text = DOC.read_text()
    new = "\n".join(lines) + "\n\n"
    pattern = re.compile(re.escape(TITLE) + r".*?(?=\n## |\n" + re.escape(READING) + ")", re.S)
    if pattern.search(text):
        DOC.write_text(pattern.sub(lambda _: new.rstrip("\n") + "\n", text))
        return
    anchor = "## Reading the numbers"
    if anchor not in text:
        raise SystemExit(f"{DOC}: no {anchor!r} to put section 3g before")
    DOC.write_text(text.replace(anchor, new + anchor, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--fleets", default=",".join(f.name for f in FLEETS))
    parser.add_argument("--write", action="store_true", help="replace section 3g of the doc")
    args = parser.parse_args()
    names = args.fleets.split(",")
    fleets = [f for f in FLEETS if f.name in names]
    if len(fleets) != len(names):
        raise SystemExit(f"--fleets: known are {', '.join(f.name for f in FLEETS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = section(seeds, args.jobs, args.load, fleets)
    if args.write:
        write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
