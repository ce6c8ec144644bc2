"""Where CP-SAT's placement beats the greedy splitter's on the same plan (issue 34): the gang
fleets of `bench/when_bench.py`, a CP-SAT run that also asks, every round, what backfill (the
same plan placed by the greedy splitter) would start from the same input, and a run of the
rule "take CP-SAT's answer only where it starts other jobs than the greedy splitter, else the
greedy one" (guarded).

Per round it counts the rounds in which CP-SAT starts other jobs than the greedy splitter, or
the same jobs elsewhere, the GPUs each starts, and the large gangs only CP-SAT started. Prints
a table for docs/benchmarks.md section 3g:

    .venv/bin/python bench/placement_rule_bench.py [--seeds 1,2,3,4,5] [--fleets ...]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from when_bench import FLEETS, OPTIONS, Fleet, fleet_trace

from volcano_global.simulation.comparison import is_large, judge
from volcano_global.simulation.engine import SimResult, Simulation
from volcano_global.simulation.running import Running
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import JobDecision, Policy
from volcano_global.solver.round_plan import RoundPlan


@dataclass
class Tally:
    rounds: int = 0
    other_jobs: int = 0  # CP-SAT started another set of jobs than the greedy splitter
    other_places: int = 0  # the same jobs, placed elsewhere
    gpus_cpsat: int = 0  # started in the rounds of other jobs
    gpus_greedy: int = 0
    extra_large: int = 0  # large gangs CP-SAT started in a round the greedy did not
    split_extra: int = 0  # of which split over clusters


class Shadowed(Simulation):
    """CP-SAT's rounds, each also planned by backfill on the same input; with `guard`, the
    greedy plan is applied where CP-SAT starts the same jobs (it only places them elsewhere).

    CP-SAT is warm-started from that greedy answer and returns it only when its own scores
    lower (`cpsat.cpsat_decision`), so another set of jobs is a better round by its objective;
    the same set placed elsewhere is a tie the search broke its own way."""

    def __init__(self, *args, guard: bool = False, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.guard, self.tally = guard, Tally()

    def decide(self, pending: list[TraceJob], running: dict[str, Running], now: float) -> RoundPlan:
        ours = super().decide(pending, running, now)
        self.policy = Policy.BACKFILL  # the same round input: both policies are planned
        try:
            theirs = super().decide(pending, running, now)
        finally:
            self.policy = Policy.CPSAT
        same_jobs = self._count(ours, theirs, {j.id: j for j in pending})
        return theirs if self.guard and same_jobs else ours

    def _count(self, ours: RoundPlan, theirs: RoundPlan, by_id: dict[str, TraceJob]) -> bool:
        """Tally the round; whether both start the same jobs."""
        t = self.tally
        t.rounds += 1
        started = {d.job_id: _places(d) for d in ours.starts}
        greedy = {d.job_id: _places(d) for d in theirs.starts}
        if set(started) == set(greedy):
            t.other_places += started != greedy
            return True
        t.other_jobs += 1
        t.gpus_cpsat += sum(s.gpus for d in ours.starts for s in d.shares)
        t.gpus_greedy += sum(s.gpus for d in theirs.starts for s in d.shares)
        probe = SimResult("", self.capacity_gpus, {}, [], dict(self.fleet.cluster_gpus))
        for job_id in set(started) - set(greedy):
            if is_large(probe, by_id[job_id]):
                t.extra_large += 1
                t.split_extra += len(started[job_id]) > 1
        return False


def _places(decision: JobDecision) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((s.cluster, s.units) for s in decision.shares))


def run_case(args: tuple[Fleet, int, int]) -> tuple[str, int, dict[str, object]]:
    fleet, seed, jobs = args
    started = time.monotonic()
    scenario, _, trace = fleet_trace(fleet, seed, jobs, 1.0)
    sims = [Shadowed(scenario, trace, Policy.CPSAT, OPTIONS, guard=g) for g in (False, True)]
    results = [sim.run() for sim in sims]
    judged = judge(results)
    out: dict[str, object] = {
        name: (j.avg_jct_s, j.finished, sim.tally)
        for name, j, sim in zip(("cpsat", "guarded"), judged, sims, strict=True)
    }
    out["seconds"] = time.monotonic() - started
    return fleet.name, seed, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--fleets", default=",".join(f.name for f in FLEETS))
    args = parser.parse_args()
    fleets = [f for f in FLEETS if f.name in args.fleets.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    work = [(f, s, args.jobs) for f in fleets for s in seeds]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = {(name, seed): out for name, seed, out in pool.map(run_case, work)}
    print(
        "| fleet | seed | rounds | CP-SAT starts other jobs | the same jobs elsewhere | GPUs "
        "started in the rounds of other jobs, CP-SAT / greedy | large gangs only CP-SAT started "
        "(split) | avg JCT (s), finished: cpsat | guarded |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f in fleets:
        for s in seeds:
            out = done[(f.name, s)]
            jct, n, t = out["cpsat"]  # type: ignore[misc]
            gjct, gn, _ = out["guarded"]  # type: ignore[misc]
            print(
                f"| {f.name} | {s} | {t.rounds} | {t.other_jobs} | {t.other_places} "
                f"| {t.gpus_cpsat:,} / {t.gpus_greedy:,} | {t.extra_large} ({t.split_extra}) "
                f"| {jct:,.0f}, {n} | {gjct:,.0f}, {gn} |"
            )
    print(f"\nSimulated in {sum(o['seconds'] for o in done.values()):,.0f} s of CPU.")  # type: ignore[misc]


if __name__ == "__main__":
    main()
