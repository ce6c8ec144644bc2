"""Where the capacity goes while there is a backlog (issue 21): every interval in which a job
that every compared policy started was waiting (the intervals `comparison.backlog_allocation`
counts), split into GPUs allocated and GPUs idle, and the idle GPUs by the reason the best
waiting job could not use them, judged on the fleet's free capacity right after the round:

- held: some waiting job fits now, whole or as a link-safe split (the greedy splitter places it
  on the free capacity alone), but the round did not start it: a reservation's GPUs it may not
  backfill, its queue's quota, or the order (a planned policy keeping it for later);
- link: some waiting job fits only if the links had no limit (a split needs more bandwidth than
  is free between the clusters that have the GPUs);
- unlinked: some waiting job fits only split over clusters with no link between them (in
  another region, reached through no direct link);
- shape: some waiting job's GPUs are free in aggregate (of its model) but no placement of its
  shape exists even with unlimited links: whole nodes, ToRs, one cluster for a job that may not
  split (fragmentation);
- draining: every waiting job is larger than all the free GPUs (the fleet empties for a gang).

The first reason that applies names the interval's idle GPUs. A bench script, not the server:
it subclasses the simulator to look after each round (the placement itself is unchanged).

    .venv/bin/python bench/capacity_bench.py [--fleets gang-two-regions.yaml,...] [--seed 1]
        [--policies cpsat,backfill,first-fit]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from volcano_global.simulation.comparison import backlog_allocation
from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.metrics import intervals
from volcano_global.simulation.running import request
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import synthetic_llm
from volcano_global.solver import LinkState, Policy, Snapshot, SolveOptions, solve

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples" / "simulate"
FLEETS = ("gang-two-regions.yaml", "gang-lingjun.yaml", "gang-eight.yaml")
REASONS = ("held", "link", "unlinked", "shape", "draining")
UNLIMITED_GBPS = 1e9
OPTIONS = SimOptions(window=50, deterministic_time=0.2)  # as bench/sim_bench.py section 3


class Watched(Simulation):
    """The simulator, noting after each round why the idle GPUs are idle."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.reasons: dict[float, str] = {}

    def _round(self, pending, running, records, now):  # type: ignore[no-untyped-def]
        started = super()._round(pending, running, records, now)
        waiting = [j for j in pending if j.id not in started]
        if waiting:
            self.reasons[now] = self._why_idle(waiting, running)
        return started

    def _why_idle(self, waiting, running) -> str:  # type: ignore[no-untyped-def]
        clusters = self.fleet.capacities()
        links = self._links(running)
        unlimited = tuple(LinkState(link.a, link.b, UNLIMITED_GBPS, 0.0) for link in links)
        anywhere = unlimited + self._missing_links(links)
        free: dict[str | None, int] = defaultdict(int)
        for (_, _, model), nodes in self.fleet.nodes.items():
            got = sum(n.free for n in nodes)
            free[model] += got
            free[None] += got
        shapes = {}
        for job in waiting:
            probe = replace(request(job), id="probe", priority=0, queue="default")
            shapes.setdefault(probe, job)
        found = "draining"
        for shape in shapes:
            if _fits(Snapshot(clusters=clusters, links=links, jobs=(shape,))):
                return "held"
            if _fits(Snapshot(clusters=clusters, links=unlimited, jobs=(shape,))):
                found = "link"
            elif found != "link" and _fits(
                Snapshot(clusters=clusters, links=anywhere, jobs=(shape,))
            ):
                found = "unlinked"
            elif found == "draining" and shape.gpus <= free[shape.gpu_model]:
                found = "shape"
        return found

    def _missing_links(self, links) -> tuple[LinkState, ...]:  # type: ignore[no-untyped-def]
        """Pairs of clusters with no link at all get one too: "no limit" means any split."""
        have = {link.key for link in links}
        names = self.fleet.cluster_names
        return tuple(
            LinkState(a, b, UNLIMITED_GBPS, 0.0)
            for i, a in enumerate(names)
            for b in names[i + 1 :]
            if tuple(sorted((a, b))) not in have
        )


def _fits(snapshot: Snapshot) -> bool:
    return solve(snapshot, Policy.GREEDY, SolveOptions()).jobs[0].admitted


def breakdown(result: SimResult, reasons: dict[float, str], backlog: set[str]) -> dict[str, float]:
    """Shares of GPU-time over the backlog intervals: allocated and idle by reason."""
    out: dict[str, float] = defaultdict(float)
    time_total = 0.0
    cap = max(result.capacity_gpus, 1)
    for sample, length in intervals(result):
        if not any(job in backlog for job in sample.pending):
            continue
        time_total += length
        out["allocated"] += sample.allocated_gpus / cap * length
        out[reasons[sample.time]] += (cap - sample.allocated_gpus) / cap * length
    return {k: v / time_total for k, v in out.items()} if time_total else {}


def case(args: tuple[str, int, list[str], int, float]) -> tuple[str, dict]:  # type: ignore[type-arg]
    fleet, seed, policies, n, load = args
    scenario = Scenario.load(EXAMPLES / fleet)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    jobs = synthetic_llm(seed=seed, jobs=n, load=load, capacity_gpus=capacity, min_gpus=32)
    runs = []
    started_at = time.monotonic()
    for name in policies:
        sim = Watched(scenario, jobs, Policy(name), OPTIONS)
        runs.append((name, sim.run(), sim.reasons))
    everyone = set.intersection(
        *({r.job.id for r in res.records if r.start is not None} for _, res, _ in runs)
    )
    rows = {
        name: {"alloc": backlog_allocation(res, everyone), **breakdown(res, reasons, everyone)}
        for name, res, reasons in runs
    }
    return fleet, {"seed": seed, "rows": rows, "seconds": time.monotonic() - started_at}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fleets", default=",".join(FLEETS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default="cpsat,backfill,first-fit")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--load", type=float, default=1.0)
    args = parser.parse_args()
    policies = args.policies.split(",")
    cases = [(f, args.seed, policies, args.jobs, args.load) for f in args.fleets.split(",")]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(case, cases))
    print(
        "| fleet | policy | alloc while backlog | allocated | idle: held | idle: link "
        "| idle: unlinked | idle: shape | idle: draining |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for fleet, out in done:
        for name, row in out["rows"].items():
            cells = " | ".join(f"{100 * row.get(k, 0.0):.1f}%" for k in ("allocated", *REASONS))
            print(f"| {fleet} seed {out['seed']} | {name} | {100 * row['alloc']:.1f}% | {cells} |")
    print(f"simulated in {max(o['seconds'] for _, o in done):.0f} s")


if __name__ == "__main__":
    main()
