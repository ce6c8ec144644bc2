"""What a round's recipe costs beyond the solver: `plan_round` (order, shrinks, growth,
solve, evictions, an outcome per waiting job with its times) against the steps the server
ran before it (`solve`, then with preemption on the evictions) on the same ordered jobs, interleaved seed by seed on round_bench.py's planned rounds (the LLM mix
on 5,000-node clusters 85-97% busy, 50 running jobs per cluster, every tenth job owed a
reservation), with preemption off and on.

    .venv/bin/python bench/plan_round_bench.py [--quick] [--seeds 5]

Prints a markdown table: p50 / p95 of each, and the median of the per-seed ratio.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from round_bench import planned_case
from workloads import kalos_stats

from volcano_global.solver import Policy, Snapshot, SolveOptions, solve
from volcano_global.solver.fair_share import quota_states
from volcano_global.solver.preemption import (
    PREEMPT,
    RECLAIM,
    Rules,
    preempt,
    remaining,
    standings,
)
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Waiting, order, plan_round

NOW = datetime(2026, 12, 5, tzinfo=UTC)


def round_input(snapshot: Snapshot, *, evicts: bool) -> RoundInput:
    may = frozenset({PREEMPT, RECLAIM}) if evicts else frozenset()
    waiting = tuple(
        Waiting(
            replace(j, due=False, estimate_s=None, may_evict_for=may),
            NOW - timedelta(seconds=3600 if j.due else len(snapshot.jobs) - i),
            j.estimate_s,
        )
        for i, j in enumerate(snapshot.jobs)
    )
    # Running jobs that have run 0-4 h (a quarter of them under the 10-minute minimum run).
    rng = random.Random(len(snapshot.running))
    running = tuple(
        replace(
            r,
            run_s=(ran := rng.uniform(0, 600) if i % 4 == 0 else rng.uniform(600, 4 * 3600)),
            lost_s=ran,
        )
        for i, r in enumerate(snapshot.running)
    )
    return RoundInput(NOW, snapshot.clusters, snapshot.links, waiting, running=running)


def old_steps(alone: Snapshot, policy: Policy, options: RoundOptions, data: RoundInput) -> None:
    """What the server ran before `plan_round`: solve, then the evictions over what it left."""
    decision = solve(alone, policy, options.solve)
    if options.preemption is not None:
        queues = standings(data.fleet_gpus, data.tree, data.reclaimable)
        preempt(remaining(alone, decision), decision, rules=options.preemption, queues=queues)


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    mean, _, _ = kalos_stats(Path(__file__).resolve().parent / "data")
    cases = [(50, 4, 50, 1.0, 25)] if args.quick else [(200, 16, 200, 1.0, 625)]
    print(
        "| pending x clusters | policy | preemption | solve (+ evictions) p50 / p95 (s) | plan_round p50 / "
        "p95 (s) | ratio (median) |"
    )
    print("|---|---|---|---:|---:|---:|")
    for pending, clusters, window, limit, tors in cases:
        for policy in (Policy.BACKFILL, Policy.CPSAT):
            for rules in (None, Rules()):
                solo, whole, ratio = [], [], []
                for seed in range(1, args.seeds + 1):
                    snapshot = planned_case(seed, clusters, pending, mean, tors)
                    data = round_input(snapshot, evicts=rules is not None)
                    options = RoundOptions(
                        solve=SolveOptions(time_limit_s=limit, window=window), preemption=rules
                    )
                    jobs = tuple(order(data, policy, options))
                    alone = Snapshot(
                        data.clusters, data.links, jobs, quota_states({}, set()), data.running
                    )
                    a = timed(lambda: old_steps(alone, policy, options, data))  # noqa: B023
                    b = timed(lambda: plan_round(data, policy, options))  # noqa: B023
                    solo.append(a)
                    whole.append(b)
                    ratio.append(b / a)
                print(
                    f"| {pending} x {clusters} | {policy.value} | "
                    f"{'on' if rules else 'off'} | {statistics.median(solo):.3f} / "
                    f"{p95(solo):.3f} | {statistics.median(whole):.3f} / {p95(whole):.3f} | "
                    f"{statistics.median(ratio):.2f}x |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
