"""Preemption and reclaim in the simulator (issue 22): two priority classes on the gang-heavy
two-region fleet at load 1.0, the same trace with and without `solver.preemption`, per seed:
p95 queueing delay (start - arrival) of the high-priority jobs, GPU-hours lost to evictions as
a share of all GPU-hours run (lost included), and evictions per simulated hour.

    .venv/bin/python bench/preemption_bench.py [--seeds 1,2,3] [--jobs 300] [--policy backfill]
        [--checkpoint S] [--max-lost H] [--wait-weight W | --wait-weight none]

`--wait-weight none` is the rule before step 5 (evict whenever victims are found).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import HIGH_PRIORITY, synthetic_llm, two_priority_classes
from volcano_global.solver import Policy
from volcano_global.solver.preemption import Rules

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "docs" / "examples" / "simulate" / "gang-two-regions.yaml"
HIGH = HIGH_PRIORITY


def p95(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def figures(result: SimResult) -> dict[str, float]:
    done = [r for r in result.records if r.start is not None]
    high = [r.start - r.job.arrival_s for r in done if r.job.priority == HIGH]  # type: ignore[operator]
    used = sum(
        r.job.gpus * (r.finish - r.start)
        for r in done
        if r.finish is not None  # type: ignore[operator]
    )
    lost = sum(r.lost_gpu_s for r in result.records)
    span = max((r.finish or 0.0) for r in result.records) - min(
        r.job.arrival_s for r in result.records
    )
    return {
        "high_p95_s": p95(high),
        "high_started": len(high),
        "lost_share": lost / (used + lost) if used + lost else 0.0,
        "evictions": len(result.evictions),
        "per_hour": len(result.evictions) / (span / 3600) if span > 0 else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--high-share", type=float, default=0.2)
    parser.add_argument("--policy", type=Policy, default=Policy.BACKFILL)
    parser.add_argument("--min-run", type=float, default=Rules.min_run_s)
    parser.add_argument("--checkpoint", type=float, default=None)
    parser.add_argument("--max-lost", type=float, default=None, help="GPU-hours per round")
    parser.add_argument(
        "--wait-weight",
        type=lambda v: None if v == "none" else float(v),
        default=Rules.wait_weight,
        help="Rules.wait_weight; none: evict whenever victims are found",
    )
    parser.add_argument(
        "--reclaim", action="store_true", help="queues reclaimable (default: preemption only)"
    )
    args = parser.parse_args()
    world = Scenario.load(FLEET)
    if not args.reclaim:  # the figure is about priorities: queues keep what they hold
        world = world.model_copy(
            update={"queues": [q.model_copy(update={"reclaimable": False}) for q in world.queues]}
        )
    gpus = Simulation(world, [], args.policy).capacity_gpus
    rules = Rules(
        min_run_s=args.min_run, max_lost_gpu_hours=args.max_lost, wait_weight=args.wait_weight
    )
    print("| seed | high p95 wait without | with | ratio | GPU-h lost | evictions/h |")
    print("|---|---|---|---|---|---|")
    for seed in [int(s) for s in args.seeds.split(",")]:
        jobs = synthetic_llm(jobs=args.jobs, load=1.0, capacity_gpus=gpus, seed=seed, min_gpus=32)
        jobs = two_priority_classes(jobs, args.high_share, seed)
        out = {}
        for name, options in (
            ("without", SimOptions()),
            ("with", SimOptions(preemption=rules, checkpoint_s=args.checkpoint)),
        ):
            start = time.monotonic()
            out[name] = figures(Simulation(world, jobs, args.policy, options).run())
            out[name]["wall_s"] = time.monotonic() - start
        a, b = out["without"], out["with"]
        ratio = a["high_p95_s"] / b["high_p95_s"] if b["high_p95_s"] else float("inf")
        print(
            f"| {seed} | {a['high_p95_s']:,.0f} s | {b['high_p95_s']:,.0f} s | {ratio:.1f}x | "
            f"{100 * b['lost_share']:.2f}% | {b['per_hour']:.2f} ({b['evictions']:.0f}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
