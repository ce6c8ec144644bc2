"""Scheduling-policy benchmark by simulation: the same traces replayed through `vglobal
simulate`'s engine per policy, judged over the same jobs (`volcano_global.simulation.comparison`:
every job counted, an unfinished one until the last finish of any policy). Gang-heavy fleets
over several seeds are the test of the product; the Kalos mix and the public traces are the
no-regression check for small jobs. `bench/solver_bench.py` calls `sections()` to write it into
docs/benchmarks.md; run alone it prints the section, or with --write replaces section 3 there:

    .venv/bin/python bench/sim_bench.py [--quick] [--write] [--seeds 1,2,3]
"""

from __future__ import annotations

import argparse
import math
import re
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from volcano_global.simulation.comparison import Judged, bounds, judge
from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.metrics import summarise
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob, read_philly, read_pollux, synthetic_llm
from volcano_global.solver import Policy

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "docs" / "examples" / "simulate"
GANG_FLEETS = ("gang-two-regions.yaml", "gang-lingjun.yaml", "gang-eight.yaml")
KALOS = EXAMPLES / "four-clusters.yaml"
SMALL = EXAMPLES / "small-fleet.yaml"
TRACES = REPO / "bench" / "data" / "traces"  # excerpts of ../shared/data (bench/data/README.md)
DOC = REPO / "docs" / "benchmarks.md"
POLICIES = [Policy.CPSAT, Policy.BACKFILL, Policy.GREEDY, Policy.FIRST_FIT, Policy.PROPORTIONAL]
ELASTIC = [Policy.CPSAT, Policy.BACKFILL]  # the same trace, half the planned gangs elastic
ELASTIC_SHARE = 0.5
ROWS = [p.value for p in POLICIES] + [f"{p.value}, elastic" for p in ELASTIC]


def run(scenario: Scenario, jobs: list[TraceJob], options: SimOptions) -> list[SimResult]:
    return [Simulation(scenario, jobs, policy, options).run() for policy in POLICIES]


def _gang_case(args: tuple[str, int, int, float, SimOptions]) -> tuple[str, int, dict]:  # type: ignore[type-arg]
    name, seed, n, load, options = args
    scenario = Scenario.load(EXAMPLES / name)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    jobs = synthetic_llm(seed=seed, jobs=n, load=load, capacity_gpus=capacity, min_gpus=32)
    started = time.monotonic()
    results = run(scenario, jobs, options)
    # Only the planned policies use a width range (the baselines place every gang whole), so
    # the baselines' runs of the rigid trace stand for the elastic one too.
    elastic = synthetic_llm(
        seed=seed,
        jobs=n,
        load=load,
        capacity_gpus=capacity,
        min_gpus=32,
        elastic_share=ELASTIC_SHARE,
    )
    for policy in ELASTIC:
        result = Simulation(scenario, elastic, policy, options).run()
        result.policy = f"{policy.value}, elastic"
        results.append(result)
    return (
        name,
        seed,
        {
            "judged": judge(results),
            "bound": bounds(results[0]).avg_jct_s,
            "large_bound": bounds(results[0], large=True).avg_jct_s,
            "capacity": capacity,
            "seconds": time.monotonic() - started,
        },
    )


def gang_sections(seeds: list[int], n: int, load: float, options: SimOptions) -> list[str]:
    cases = [(name, seed, n, load, options) for name in GANG_FLEETS for seed in seeds]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = {(name, seed): out for name, seed, out in pool.map(_gang_case, cases)}
    lines: list[str] = []
    worst: dict[str, float] = {}
    for name in GANG_FLEETS:
        per_seed = [done[(name, s)] for s in seeds]
        lines += [
            f"### {name} ({per_seed[0]['capacity']:,} GPUs), {n} gangs of 32-1,024 GPUs, "
            f"load {load}, seeds {', '.join(map(str, seeds))}",
            "",
            "Per seed, separated by /; finished of the jobs judged (all but those never "
            "placeable link-safely, not even on the empty fleet: "
            f"{' / '.join(str(c['judged'][0].never_placeable) for c in per_seed)}). Large gangs: "
            "half an average cluster or more. "
            f"Lower bound on avg JCT (fluid SRPT or duration): "
            f"{_each(c['bound'] for c in per_seed)} s, so no schedule leads first-fit by more "
            f"than {_lead(per_seed, 'avg_jct_s', 'bound')}; on large gangs alone "
            f"{_each(c['large_bound'] for c in per_seed)} s, at most "
            f"{_lead(per_seed, 'large_avg_jct_s', 'large_bound')} ahead of first-fit.",
            "",
            "| policy | finished | avg JCT (s) | large gangs: avg JCT (s) | large gangs: p95 / max "
            "wait, worst seed (s) | splitter-only finished | alloc while backlog | link "
            "oversubscribed (s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for i, row in enumerate(ROWS):
            js: list[Judged] = [c["judged"][i] for c in per_seed]
            lines.append(
                f"| {row} | {' / '.join(f'{j.finished}/{j.jobs}' for j in js)} "
                f"| {_each(j.avg_jct_s for j in js)} | {_each(j.large_avg_jct_s for j in js)} "
                f"| {max(j.large_wait_p95_s for j in js):,.0f} / "
                f"{max(j.large_wait_max_s for j in js):,.0f} "
                f"| {' / '.join(f'{j.splitter_only_finished}/{j.splitter_only_jobs}' for j in js)} "
                f"| {' / '.join(f'{100 * j.allocation_backlog:.0f}%' for j in js)} "
                f"| {max(j.oversubscribed_s for j in js):,.0f} |"
            )
        lines += ["", *_by_size(per_seed)]
        ratios = _ratios(per_seed)
        for key, value in ratios.items():
            worst[key] = min(worst.get(key, math.inf), value)
        lines += [
            "",
            "Minimum over seeds: "
            + "; ".join(f"{key} **{value:.2f}x**" for key, value in ratios.items())
            + "; CP-SAT's allocation while backlog "
            + f"**{min(c['judged'][0].allocation_backlog for c in per_seed):.0%}**, with elastic "
            + "gangs "
            + f"**{min(c['judged'][ROWS.index(f'{Policy.CPSAT.value}, elastic')].allocation_backlog for c in per_seed):.0%}**"
            + f". Simulated in {sum(c['seconds'] for c in per_seed):,.0f} s.",
            "",
        ]
    lines += [
        "**Over every gang-heavy fleet and seed (minimum):** "
        + "; ".join(f"{key} **{value:.2f}x**" for key, value in worst.items())
        + ".",
        "",
    ]
    return lines


def _by_size(per_seed: list[dict]) -> list[str]:  # type: ignore[type-arg]
    """Average JCT per size class that has jobs, and of the jobs only a splitter can run."""
    first: list[Judged] = per_seed[0]["judged"]
    classes = [k for k, v in first[0].jct_by_size.items() if not math.isnan(v)]
    lines = [
        "Average JCT by size class (s), per seed; a job a policy never finished counts until "
        "the last finish of any policy:",
        "",
        "| policy | " + " | ".join(f"{c} GPUs" for c in classes) + " | splitter-only |",
        "|---|" + "---:|" * (len(classes) + 1),
    ]
    for i, row in enumerate(ROWS):
        js: list[Judged] = [c["judged"][i] for c in per_seed]
        cells = [_each(j.jct_by_size[c] for j in js) for c in classes]
        cells.append(
            _each(j.splitter_only_avg_jct_s for j in js)
            if any(j.splitter_only_jobs for j in js)
            else "-"
        )
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def _ratios(per_seed: list[dict]) -> dict[str, float]:  # type: ignore[type-arg]
    def by(row: str, case: dict) -> Judged:  # type: ignore[type-arg]
        return case["judged"][ROWS.index(row)]

    def low(attr: str, other: Policy, ours: str = Policy.CPSAT.value) -> float:
        return min(getattr(by(other.value, c), attr) / getattr(by(ours, c), attr) for c in per_seed)

    elastic = f"{Policy.CPSAT.value}, elastic"

    return {
        "avg JCT vs first-fit": low("avg_jct_s", Policy.FIRST_FIT),
        "vs proportional": low("avg_jct_s", Policy.PROPORTIONAL),
        "vs greedy": low("avg_jct_s", Policy.GREEDY),
        "vs backfill (same plan, greedy)": low("avg_jct_s", Policy.BACKFILL),
        "large gangs' JCT vs first-fit": low("large_avg_jct_s", Policy.FIRST_FIT),
        "large gangs vs greedy": low("large_avg_jct_s", Policy.GREEDY),
        "large gangs vs backfill": low("large_avg_jct_s", Policy.BACKFILL),
        "with elastic gangs: avg JCT vs first-fit": low("avg_jct_s", Policy.FIRST_FIT, elastic),
        "elastic large gangs vs first-fit": low("large_avg_jct_s", Policy.FIRST_FIT, elastic),
        "elastic large gangs vs greedy": low("large_avg_jct_s", Policy.GREEDY, elastic),
    }


def _lead(per_seed: list[dict], attr: str, bound: str) -> str:  # type: ignore[type-arg]
    """First-fit's figure over the bound on it, per seed: the most any schedule could lead by."""
    first = ROWS.index(Policy.FIRST_FIT.value)
    return " / ".join(f"{getattr(c['judged'][first], attr) / c[bound]:.2f}x" for c in per_seed)


def _each(values) -> str:  # type: ignore[no-untyped-def]
    return " / ".join("-" if math.isnan(v) else f"{v:,.0f}" for v in values)


def small_job_sections(options: SimOptions, *, quick: bool) -> list[str]:
    scenario = Scenario.load(KALOS)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    small = Scenario.load(SMALL)
    cases = [
        (
            f"Kalos LLM mix on {KALOS.name}, load 2.0",
            scenario,
            synthetic_llm(seed=1, jobs=150 if quick else 800, load=2.0, capacity_gpus=capacity),
        ),
        (
            "Philly-derived trace (Gavel 0e4a51) on small-fleet.yaml",
            small,
            read_philly(TRACES / "philly_gavel" / "0e4a51.trace", limit=100 if quick else 200),
        ),
        (
            "Pollux workload-1 on small-fleet.yaml",
            small,
            read_pollux(TRACES / "pollux" / "workload-1.csv"),
        ),
    ]
    lines = [
        "### No regression for small jobs: the Kalos mix and the public traces",
        "",
        "| case | policy | finished | avg JCT (s) | p99 JCT, jobs of <= 8 GPUs (s) | vs "
        "first-fit | makespan (s) | GPU alloc | alloc while backlog |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, world, jobs in cases:
        results = run(world, jobs, options)
        judged = judge(results)
        first = judged[POLICIES.index(Policy.FIRST_FIT)].p99_small_jct_s
        for result, j in zip(results, judged, strict=True):
            s = summarise(result)
            lines.append(
                f"| {label} | {j.policy} | {j.finished}/{j.jobs} | {j.avg_jct_s:,.0f} "
                f"| {j.p99_small_jct_s:,.0f} | {j.p99_small_jct_s / first:.2f} "
                f"| {s.makespan_s:,.0f} | {100 * s.gpu_allocation:.1f}% "
                f"| {100 * j.allocation_backlog:.1f}% |"
            )
    return [*lines, ""]


def sections(*, quick: bool = False, seeds: list[int] | None = None) -> list[str]:
    seeds = seeds or ([1] if quick else [1, 2, 3])
    options = SimOptions(window=30 if quick else 50, deterministic_time=0.1 if quick else 0.2)
    n = 60 if quick else 300
    lines = [
        "## 3. Policies over time: trace replay by simulation",
        "",
        "`vglobal simulate` (`volcano_global.simulation`). Every policy sees the same trace and "
        "the same speed model (a split short of its plan's bandwidth, or a replica that had to "
        "stay under one ToR and did not, runs slower). cpsat and backfill are planned: short "
        "expected work first (Gittins index on what finished jobs ran, per size class; no "
        "oracle), reservations with backfill for a job that waited 30 minutes, a stable "
        "cluster order; backfill is the same plan placed by the greedy splitter, so the row "
        "shows what the optimiser adds. first-fit (Kueue MultiKueue), proportional (Karmada) and "
        "greedy keep priority, fair share, submission order. Every job counts but those no "
        "policy can run without oversubscribing a link: one a policy never finished is charged "
        "until the last finish of any policy, the same for all (a lower bound on its JCT); "
        "allocation while "
        "backlog is over intervals in which a job every policy started was waiting. The rows "
        "marked elastic replay the same trace with half the planned gangs (64 GPUs or more) "
        "elastic down to half their data-parallel replicas: they start at the width that fits "
        "and grow at round boundaries in the clusters they run in, at a speed in proportion to "
        "their replicas (only the planned policies use the range; the baselines place every "
        "gang whole, so their rows stand for both traces). CP-SAT gets a deterministic work "
        "limit of "
        f"{options.deterministic_time} per round and a window of {options.window} jobs.",
        "",
        *gang_sections(seeds, n, 1.0, options),
        *small_job_sections(options, quick=quick),
        "Command: `.venv/bin/python bench/sim_bench.py --write` (this section; "
        "`bench/solver_bench.py` regenerates the whole file). One case by hand: `vglobal "
        "simulate --scenario docs/examples/simulate/gang-two-regions.yaml --jobs 300 --load 1.0 "
        "--seed 1 --min-gpus 32 --out vglobal-data/sim`.",
        "",
    ]
    return lines


def write_section(lines: list[str]) -> None:
    text = DOC.read_text()
    new = "\n".join(lines) + "\n"
    # Up to the next section of the same level (3b, 3c... are written by other benches).
    pattern = re.compile(r"## 3\. Policies over time.*?(?=\n## )", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: no section 3 to replace")
    DOC.write_text(pattern.sub(lambda _: new, text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write", action="store_true", help="replace section 3 of the doc")
    parser.add_argument("--seeds", default=None, help="comma-separated, default 1,2,3")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    lines = sections(quick=args.quick, seeds=seeds)
    if args.write:
        write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
