"""What a round's recipe costs beyond the solver: `plan_round` (order, shrinks, growth,
solve, evictions, an outcome per waiting job with its times) against the steps the server
ran before it (`solve`, then with preemption on the evictions) on the same ordered jobs, interleaved seed by seed on round_bench.py's planned rounds (the LLM mix
on 5,000-node clusters 85-97% busy, 50 running jobs per cluster, every tenth job owed a
reservation), with preemption off and on.

    .venv/bin/python bench/plan_round_bench.py [--quick] [--seeds 5]
    .venv/bin/python bench/plan_round_bench.py --whole-queue [--quick] [--seeds 5]

Prints a markdown table: p50 / p95 of each, and the median of the per-seed ratio. With
--whole-queue (issue 35 item 2): the CP-SAT round with every waiting job considered
(`RoundOptions.whole_queue`) against the window-only round on the same snapshots (the window's
jobs alone, as the server read them before), interleaved: 2,000 waiting x 64 clusters and
10,000 x 100, with the clusters 85-97% busy (room for most of the line) and 97-99.5% busy (room
for little of it). With --preemption, step 7 runs (`Rules()`) over running jobs that carry
their pods and a priority (`with_pods`); --sizes picks the rows (e.g. 2000x64). Wall and CPU
seconds of the process are both printed: on a shared machine the CPU time is the steadier.

    .venv/bin/python bench/plan_round_bench.py --whole-queue --preemption [--sizes 2000x64]
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
from volcano_global.solver.free_pools import remaining
from volcano_global.solver.preemption import (
    PREEMPT,
    RECLAIM,
    Rules,
    preempt,
    standings,
)
from volcano_global.solver.round_plan import (
    RoundInput,
    RoundOptions,
    Waiting,
    order,
    plan_round,
)
from volcano_global.solver.round_plan import (
    window as in_window,
)

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


def with_pods(data: RoundInput, seed: int) -> RoundInput:
    """The running jobs as the server knows them when evictions can happen: where their pods
    run (8-GPU pods on the leaves' fully busy nodes, what a victim gives back) and a priority
    of the mix's (0, 500, 1000). round_bench's running jobs have neither, so no victim frees
    anything and step 7 tries every candidate in vain."""
    rng = random.Random(seed)
    full = {
        c.name: [
            [leaf.path[0] if leaf.path else c.name, leaf.free_nodes[0]]
            for leaf in c.leaves
            if leaf.free_nodes and leaf.free_nodes[0]
        ]
        for c in data.clusters
    }
    for leaves in full.values():
        rng.shuffle(leaves)
    running = []
    for r in data.running:
        pods: list[tuple[str, str, str, int, int]] = []
        for cluster, _, gpus in r.gpus:
            want = gpus // 8
            for spot in full[cluster]:
                got = min(want, spot[1])
                if got:
                    pods.append((cluster, spot[0], "", got, 8))
                    spot[1] -= got
                    want -= got
        priority = rng.choices([0, 500, 1000], weights=[6, 3, 1])[0]
        running.append(replace(r, pods=tuple(pods), priority=priority))
    return replace(data, running=tuple(running))


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


def read(data: RoundInput) -> RoundInput:
    """What the server's window-only round reads: the window's jobs in full, no others."""
    options = RoundOptions(whole_queue=False)
    first = set(in_window(data, Policy.CPSAT, options, 200))
    return replace(data, waiting=tuple(w for w in data.waiting if w.request.id in first))


def whole_queue(
    quick: bool,
    seeds: int,
    deterministic: float | None,
    rules: Rules | None = None,
    sizes: list[tuple[int, int]] | None = None,
) -> None:
    """The --whole-queue table (module docstring). With `deterministic`, CP-SAT stops on that
    deterministic work instead of the wall clock (the same answer on a loaded machine); with
    `rules`, preemption on over running jobs that carry their pods (`with_pods`)."""
    limit = 1.0 if deterministic is None else 30.0
    mean, _, _ = kalos_stats(Path(__file__).resolve().parent / "data")
    cases = [(500, 8, 25)] if quick else [(2000, 64, 625), (10000, 100, 625)]
    if sizes is not None:
        cases = [(pending, clusters, 625) for pending, clusters in sizes]
    print(
        "| waiting x clusters | busy | round | p50 / p95 (s) | CPU p50 / p95 (s) | considered | "
        "started (mean) | beyond the window started (mean) | window's starts the same | "
        "evictions (mean) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for pending, clusters, tors in cases:
        for busy in ((0.85, 0.97), (0.97, 0.995)):
            rows: dict[bool, list[tuple[float, int, int, int, frozenset[str], int, float]]] = {
                False: [],
                True: [],
            }
            for seed in range(1, seeds + 1):
                snapshot = planned_case(seed, clusters, pending, mean, tors, busy)
                inputs = {True: round_input(snapshot, evicts=rules is not None)}
                if rules is not None:
                    inputs[True] = with_pods(inputs[True], seed)
                inputs[False] = read(inputs[True])
                for whole in (False, True) if seed % 2 else (True, False):
                    options = RoundOptions(
                        solve=SolveOptions(
                            time_limit_s=limit, window=200, deterministic_time=deterministic
                        ),
                        whole_queue=whole,
                        preemption=rules,
                    )
                    start, cpu = time.perf_counter(), time.process_time()
                    plan = plan_round(inputs[whole], Policy.CPSAT, options)
                    rows[whole].append(
                        (
                            time.perf_counter() - start,
                            *_counts(plan, options),
                            time.process_time() - cpu,
                        )
                    )
            same = sum(a[4] == b[4] for a, b in zip(rows[False], rows[True], strict=True))
            for whole in (False, True):
                times = [r[0] for r in rows[whole]]
                cpus = [r[6] for r in rows[whole]]
                print(
                    f"| {pending:,} x {clusters} | {busy[0]:.0%}-{busy[1]:.1%} | "
                    f"{'whole queue' if whole else 'window only'} | "
                    f"{statistics.median(times):.2f} / {p95(times):.2f} | "
                    f"{statistics.median(cpus):.2f} / {p95(cpus):.2f} | "
                    f"{statistics.mean(r[1] for r in rows[whole]):,.0f} | "
                    f"{statistics.mean(r[2] for r in rows[whole]):,.1f} | "
                    f"{statistics.mean(r[3] for r in rows[whole]):,.1f} | "
                    f"{same}/{seeds} | {statistics.mean(r[5] for r in rows[whole]):.1f} |",
                    flush=True,
                )


def _counts(plan, options: RoundOptions) -> tuple[int, int, int, frozenset[str], int]:  # type: ignore[no-untyped-def]
    """Jobs considered (not told they were outside the window or past the backfill limit),
    started, started beyond the window, the window's starts, and the evictions."""
    considered = sum(
        "outside this round's window" not in o.reason and "no room looked for" not in o.reason
        for o in plan.outcomes.values()
    )
    window = {d.job_id for d in plan.decision.jobs[: options.solve.window]}
    starts = {d.job_id for d in plan.starts}
    return (
        considered,
        len(starts),
        len(starts - window),
        frozenset(starts & window),
        len(plan.evictions),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--whole-queue", action="store_true")
    parser.add_argument(
        "--preemption", action="store_true", help="with --whole-queue: preemption on (Rules())"
    )
    parser.add_argument("--deterministic", type=float, default=None, help="CP-SAT work limit")
    parser.add_argument(
        "--sizes",
        default=None,
        help="with --whole-queue: waiting x clusters, e.g. 2000x64,10000x100",
    )
    args = parser.parse_args()
    if args.whole_queue:
        plan_round(round_input(planned_case(1, 4, 50, 30.0, 25), evicts=False))  # warm up
        whole_queue(
            args.quick,
            args.seeds,
            args.deterministic,
            Rules() if args.preemption else None,
            [tuple(map(int, s.split("x"))) for s in args.sizes.split(",")] if args.sizes else None,  # type: ignore[misc]
        )
        return
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
