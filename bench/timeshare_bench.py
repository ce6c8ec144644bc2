"""Time-sharing by attained service in the simulator (issue 34, item 2): the same trace on a
gang fleet with and without time-sharing queues, per seed, then the median and the minimum
over the seeds.

    .venv/bin/python bench/timeshare_bench.py [--fleet gang-equal-regions] [--seeds 1,2,3,4,5]
        [--jobs 300] [--policy greedy] [--quantum 1h] [--min-run S] [--max-jobs N]
        [--max-lost S | --max-lost none] [--checkpoint S] [--mixed]

Per seed: average JCT (finish - arrival) of first-fit without time-sharing, of `--policy`
without it, and of `--policy` with every queue time-sharing (`--mixed`: only q0 and q1); the
large gangs' (>= `--large` GPUs) average JCT likewise; the demotions, and the GPU-hours they
threw away as a share of the GPU-hours used (the trace's work at full speed plus every
eviction's lost work); with `--mixed`, the average JCT of the jobs of the queues that do not
time-share, with against without. The trace is `synthetic_llm(min_gpus=64, max_gpus=512)` at
load 1.0, as issue 34's fleet was measured.
"""

from __future__ import annotations

import argparse
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob, synthetic_llm
from volcano_global.solver import Policy
from volcano_global.solver.timesharing import TimeSharing

REPO = Path(__file__).resolve().parent.parent
FLEETS = REPO / "docs" / "examples" / "simulate"
MIXED = ("q0", "q1")  # the queues that time-share with --mixed


@dataclass(frozen=True)
class Run:
    """One simulation of one seed."""

    seed: int
    name: str  # "first-fit", "off" or "on"
    policy: Policy
    sharing: tuple[str, ...]  # the queues that time-share


@dataclass(frozen=True)
class Figures:
    avg_jct_s: float
    large_jct_s: float
    others_jct_s: float  # the jobs of queues that do not time-share
    demotions: int
    lost_share: float
    finished: int
    bound_s: float  # the trace's average duration: every job started on arrival, at full speed
    large_bound_s: float


def figures(result: SimResult, jobs: list[TraceJob], large: int, sharing: set[str]) -> Figures:
    done = [r for r in result.records if r.finish is not None]
    jct = {r.job.id: r.finish - r.job.arrival_s for r in done}  # type: ignore[operator]
    big = [jct[r.job.id] for r in done if r.job.gpus >= large]
    others = [jct[r.job.id] for r in done if r.job.queue not in MIXED]
    work = sum(j.gpus * j.duration_s for j in jobs) / 3600
    lost = sum(r.lost_gpu_s for r in result.records) / 3600
    return Figures(
        statistics.fmean(jct.values()),
        statistics.fmean(big) if big else 0.0,
        statistics.fmean(others) if others else 0.0,
        result.demotions,
        result.demoted_gpu_hours / (work + lost) if work + lost else 0.0,
        len(done),
        statistics.fmean(j.duration_s for j in jobs),
        statistics.fmean([j.duration_s for j in jobs if j.gpus >= large] or [0.0]),
    )


def simulate(run: Run, args: argparse.Namespace) -> tuple[Run, Figures]:
    world = Scenario.load(FLEETS / f"{args.fleet}.yaml")
    world = world.model_copy(
        update={
            "queues": [
                q.model_copy(
                    update={
                        "time_sharing": q.name in run.sharing,
                        "time_sharing_quantum": args.quantum,
                    }
                )
                for q in world.queues
            ]
        }
    )
    gpus = Simulation(world, [], run.policy).capacity_gpus
    jobs = synthetic_llm(
        jobs=args.jobs, load=1.0, capacity_gpus=gpus, seed=run.seed, min_gpus=64, max_gpus=512
    )
    rules = TimeSharing(
        min_run_s=args.min_run,
        max_jobs=args.max_jobs,
        max_lost_s=args.max_lost,
        wait_weight=args.wait_weight,
    )
    options = SimOptions(checkpoint_s=args.checkpoint, time_sharing=rules)
    result = Simulation(world, jobs, run.policy, options).run()
    return run, figures(result, jobs, args.large, set(run.sharing))


def _runs(args: argparse.Namespace, queues: list[str]) -> list[Run]:
    sharing = tuple(q for q in queues if q in MIXED) if args.mixed else tuple(queues)
    out = []
    for seed in args.seeds:
        out += [
            Run(seed, "first-fit", Policy.FIRST_FIT, ()),
            Run(seed, "off", args.policy, ()),
            Run(seed, "on", args.policy, sharing),
        ]
    return out


def _table(done: dict[tuple[int, str], Figures], args: argparse.Namespace) -> None:
    print(
        f"| seed | first-fit avg JCT | {args.policy} | {args.policy} + time-sharing | vs first-fit "
        "| no-wait bound | large: first-fit | large: time-sharing | large vs first-fit "
        "| large bound | demotions | GPU-h lost / used | not sharing: with / without |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for seed in args.seeds:
        ff, off, on = (done[(seed, n)] for n in ("first-fit", "off", "on"))
        row = (
            ff.avg_jct_s / on.avg_jct_s,
            ff.large_jct_s / on.large_jct_s if on.large_jct_s else float("nan"),
            on.lost_share,
            on.others_jct_s / off.others_jct_s if args.mixed else float("nan"),
            ff.avg_jct_s / off.avg_jct_s,
            ff.avg_jct_s / on.bound_s,
            ff.large_jct_s / on.large_bound_s,
        )
        rows.append(row)
        print(
            f"| {seed} | {ff.avg_jct_s:,.0f} s | {off.avg_jct_s:,.0f} s | {on.avg_jct_s:,.0f} s "
            f"| {row[0]:.2f}x | {row[5]:.2f}x | {ff.large_jct_s:,.0f} s | {on.large_jct_s:,.0f} s "
            f"| {row[1]:.2f}x | {row[6]:.2f}x | {on.demotions} | {100 * row[2]:.2f}% "
            f"| {_others(row[3], args)} |",
            flush=True,
        )
    for name, pick in (("median", statistics.median), ("minimum", min)):
        cols = [pick(r[i] for r in rows) for i in range(7)]
        worst_lost = max(r[2] for r in rows) if name == "minimum" else cols[2]
        print(
            f"| **{name}** | | {args.policy} alone {cols[4]:.2f}x | | **{cols[0]:.2f}x** "
            f"| {cols[5]:.2f}x | | | **{cols[1]:.2f}x** | {cols[6]:.2f}x | "
            f"| {100 * worst_lost:.2f}%{' (max)' if name == 'minimum' else ''} "
            f"| {_others(cols[3], args)} |"
        )


def _others(ratio: float, args: argparse.Namespace) -> str:
    """The not-sharing queues' column: only with --mixed (else every queue shares)."""
    return f"{ratio:.3f}" if args.mixed else "-"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fleet", default="gang-equal-regions")
    parser.add_argument(
        "--seeds", type=lambda v: [int(s) for s in v.split(",")], default="1,2,3,4,5"
    )
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--policy", type=Policy, default=Policy.GREEDY)
    parser.add_argument("--quantum", default="1h", help="time-sharing-quantum (a Go duration)")
    parser.add_argument("--min-run", type=float, default=TimeSharing.min_run_s)
    parser.add_argument("--max-jobs", type=int, default=TimeSharing.max_jobs)
    parser.add_argument(
        "--max-lost",
        type=lambda v: None if v == "none" else float(v),
        default=TimeSharing.max_lost_s,
    )
    parser.add_argument(
        "--wait-weight",
        type=lambda v: None if v == "none" else float(v),
        default=TimeSharing.wait_weight,
    )
    parser.add_argument("--checkpoint", type=float, default=1800.0, help="seconds between")
    parser.add_argument("--large", type=int, default=256, help="a large gang's GPUs, at least")
    parser.add_argument("--mixed", action="store_true", help="only q0 and q1 time-share")
    args = parser.parse_args()
    queues = [q.name for q in Scenario.load(FLEETS / f"{args.fleet}.yaml").queues]
    runs = _runs(args, queues)
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = {(run.seed, run.name): f for run, f in pool.map(simulate, runs, [args] * len(runs))}
    print(f"{args.fleet}, {args.jobs} gangs, {vars(args)}\n")
    _table(done, args)


if __name__ == "__main__":
    main()
