"""Promises against what happened (issue 34): for every job a round told when it would start
(`Outcome.at` of a Waiting, Reserved or WillPreempt job; the first such promise), its actual
start. The gang fleets of `bench/sim_bench.py` (synthetic Kalos sizes from 32 GPUs, log-normal
durations capped at 4 h, load 1.0), CP-SAT and backfill, per seed, the same trace under:

- before: the residual life as it was at f30d5ab (the class mean once a job outlived every
  finished peer, a runningEstimate taken as given and the class mean once overrun);
- after: `solver.durations` as it is (a fitted tail, the estimate corrected per queue);
- oracle: every running job's true remaining time (what no duration model can beat: the
  promises it leaves unkept are the room model's, `solver.outcomes`, not the durations');
- before/after, estimates: every job with a runningEstimate, its duration times a log-normal
  error (median 0.7: hopeful users; sigma 0.5).

A promise is kept within a factor of 2 when the wait from the round that made it, plus a
minute (a round's grain), is within a factor of 2 of the promised wait plus a minute.

    .venv/bin/python bench/promise_bench.py [--seeds 1,2,3,4,5] [--fleets gang-two-regions.yaml]
"""

from __future__ import annotations

import argparse
import bisect
import math
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from sim_bench import EXAMPLES, GANG_FLEETS

from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.metrics import summarise
from volcano_global.simulation.running import Running
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob, synthetic_llm
from volcano_global.solver import Policy, RunningJob
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.round_plan import RoundInput

POLICIES = (Policy.CPSAT, Policy.BACKFILL)
ESTIMATED = ", estimates"
MODELS = ("before", "after", "oracle", "before" + ESTIMATED, "after" + ESTIMATED)
ESTIMATE_BIAS = 0.7  # users' estimates: 0.7 of the true duration at the median (hopeful)
ESTIMATE_SIGMA = 0.5
GRAIN_S = 60.0
JOBS = 300
OPTIONS = SimOptions(window=50, deterministic_time=0.2)  # as sim_bench's section 3


class StaleDurations(DurationModel):
    """The residual life before issue 34 (git main at f30d5ab), for "before"."""

    def remaining(
        self,
        gpus: int,
        elapsed: float,
        estimate: float | None = None,
        *,
        queue: str | None = None,
    ) -> float:
        if estimate is not None and estimate > elapsed:
            return estimate - elapsed
        fit = self._fit(gpus)
        i = bisect.bisect_right(fit.ordered, elapsed)
        longer = len(fit.ordered) - i
        if longer == 0:
            return fit.mean
        return (fit.prefix[-1] - fit.prefix[i]) / longer - elapsed


class Oracle(Simulation):
    """Every running job's true remaining time as its expected end: what no duration model
    can beat, so the promises it leaves unkept are the room model's, not the durations'."""

    def round_input(
        self, pending: list[TraceJob], running: dict[str, Running], now: float
    ) -> RoundInput:
        data = super().round_input(pending, running, now)
        return replace(data, running=tuple(_truth(j, running[j.id], now) for j in data.running))


def _truth(job: RunningJob, run: Running, now: float) -> RunningJob:
    left = max(run.stalled_until - now, 0.0) + run.work_left * run.factor
    return replace(job, ends_in_s=left)


def estimated(jobs: list[TraceJob], seed: int) -> list[TraceJob]:
    """Every job with a runningEstimate: its duration times a log-normal error (median
    ESTIMATE_BIAS, sigma ESTIMATE_SIGMA); queue "default" in these traces, so one queue's
    error is learnt."""
    rng = random.Random(seed * 7919)
    factor = math.log(ESTIMATE_BIAS)
    return [
        replace(j, estimate_s=j.duration_s * rng.lognormvariate(factor, ESTIMATE_SIGMA))
        for j in jobs
    ]


def case(args: tuple[str, int, str, str]) -> dict:  # type: ignore[type-arg]
    fleet, seed, policy, model = args
    scenario = Scenario.load(EXAMPLES / fleet)
    capacity = Simulation(scenario, [], Policy.CPSAT).capacity_gpus
    jobs = synthetic_llm(seed=seed, jobs=JOBS, load=1.0, capacity_gpus=capacity, min_gpus=32)
    if model.endswith(ESTIMATED):
        jobs = estimated(jobs, seed)
    sim = (Oracle if model == "oracle" else Simulation)(scenario, jobs, Policy(policy), OPTIONS)
    if model.startswith("before"):
        sim.durations = StaleDurations()
    started = time.monotonic()
    result = sim.run()
    promised, actual, kept, held, held_kept = [], [], 0, 0, 0
    for r in result.records:
        if r.promised_at is None or r.promised_on is None or r.start is None:
            continue
        p, w = r.promised_at - r.promised_on, r.start - r.promised_on
        promised.append(p)
        actual.append(w)
        ok = 0.5 <= (w + GRAIN_S) / (p + GRAIN_S) <= 2.0
        kept += ok
        if r.promised_as == "Reserved":
            held += 1
            held_kept += ok
    s = summarise(result)
    return {
        "case": args,
        "promised": len(promised),
        "kept": kept,
        "held": held,
        "held_kept": held_kept,
        "median_promise": statistics.median(promised) if promised else float("nan"),
        "median_wait": statistics.median(actual) if actual else float("nan"),
        "avg_jct": s.avg_jct_s,
        "runs": [(r.job.arrival_s, r.finish) for r in result.records],
        "finished": s.finished,
        "jobs": s.jobs,
        "seconds": time.monotonic() - started,
    }


def _judged(done: dict, fleet: str, seed: int, policy: str) -> dict[str, float]:  # type: ignore[type-arg]
    """Avg JCT per model over every job of the trace: one a model never finished counts until
    the last finish of any model of the same policy and seed (as `simulation.comparison`)."""
    runs = {m: done[(fleet, seed, policy, m)]["runs"] for m in MODELS}
    horizon = max(f for rs in runs.values() for _, f in rs if f is not None)
    return {
        m: statistics.mean((horizon if f is None else f) - a for a, f in rs)
        for m, rs in runs.items()
    }


def table(fleet: str, seeds: list[int], done: dict) -> list[str]:  # type: ignore[type-arg]
    lines = [
        f"### {fleet}, {JOBS} gangs of 32-1,024 GPUs, load 1.0, seeds {', '.join(map(str, seeds))}",
        "",
        "| policy | model | promises kept within 2x (per seed) | all seeds | holds kept "
        "| median promised / actual wait (s, per seed) | finished | avg JCT (s, per seed) "
        "| avg JCT / before's |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for policy in POLICIES:
        for model in MODELS:
            rs = [done[(fleet, s, policy.value, model)] for s in seeds]
            base = "before" + (ESTIMATED if model.endswith(ESTIMATED) else "")
            befores = [done[(fleet, s, policy.value, base)] for s in seeds]
            share = sum(r["kept"] for r in rs) / max(sum(r["promised"] for r in rs), 1)
            held = sum(r["held_kept"] for r in rs) / max(sum(r["held"] for r in rs), 1)
            judged = [_judged(done, fleet, s, policy.value) for s in seeds]
            ratio = [j[model] / j[b["case"][3]] for j, b in zip(judged, befores, strict=True)]
            kept = " / ".join(f"{r['kept']}/{r['promised']}" for r in rs)
            waits = " / ".join(f"{r['median_promise']:,.0f}/{r['median_wait']:,.0f}" for r in rs)
            jcts = " / ".join(f"{j[model]:,.0f}" for j in judged)
            done_ = " / ".join(f"{r['finished']}/{r['jobs']}" for r in rs)
            lines.append(
                f"| {policy.value} | {model} | {kept} | **{share:.0%}** "
                f"| {held:.0%} of {sum(r['held'] for r in rs)} | {waits} | {done_} | {jcts} "
                f"| {' / '.join(f'{x:.3f}' for x in ratio)} |"
            )
    seconds = sum(done[k]["seconds"] for k in done if k[0] == fleet)
    return [*lines, "", f"Simulated in {seconds:,.0f} s of CPU.", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--fleets", default=",".join(GANG_FLEETS))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    fleets = args.fleets.split(",")
    cases = [(f, s, p.value, m) for f in fleets for s in seeds for p in POLICIES for m in MODELS]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = {tuple(r["case"]): r for r in pool.map(case, cases)}
    for fleet in fleets:
        print("\n".join(table(fleet, seeds, done)), flush=True)


if __name__ == "__main__":
    main()
