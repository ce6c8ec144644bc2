"""The placement model (`cpsat_model`, `cpsat_holds`), solved with OR-Tools CP-SAT, its answer
packed and weighed against the warm start.

Unit placement into concrete domains (and node best fit) is done after the search by `packing`;
a job whose units do not pack where the model put them (jobs competing for the same domains,
which the aggregate does not see) is re-placed greedily on what is left, or stays pending
("repair"). Identical domains are one histogram class, so there is no symmetry among them to
break. The greedy splitter's answer hints the search; each round has a time limit and reports
the best answer with CP-SAT's proven bound. The answer is never worse than that greedy start.
"""

from __future__ import annotations

import math
import time

from ortools.sat.python import cp_model

from volcano_global.solver.baselines import greedy, place_greedily, reservations_for
from volcano_global.solver.cpsat_holds import add_reservations, hint_holds
from volcano_global.solver.cpsat_model import (
    add_hints,
    add_shared_limits,
    fit_ranks,
    job_vars,
    maximise,
)
from volcano_global.solver.model import (
    Decision,
    JobDecision,
    JobRequest,
    Policy,
    Share,
    Snapshot,
    SolveOptions,
    link_key,
)
from volcano_global.solver.packing import Pools, pack_job, packing_order
from volcano_global.solver.reservations import Hold, HoldBook, Owed
from volcano_global.solver.values import job_values, score
from volcano_global.solver.warm_start_bound import at_fit_floors, fit_floors, whole_at_full_width

PACKING_RESERVE_S = 0.15  # of the round's time limit, kept for packing and explaining
MIN_SEARCH_S = 0.1


def solve_cpsat(
    snapshot: Snapshot,
    jobs: list[JobRequest],
    options: SolveOptions,
    hint: Decision | None,
    base: Pools,
    deadline: float,
    plan: tuple[list[Owed], list[Hold], dict[str, int]] = ([], [], {}),
) -> tuple[dict[str, tuple[Share, ...]], Pools, str, float, float, list[Hold]]:
    """Shares of each admitted job packed into domains, the pools after them, the status,
    objective, bound and the reservations chosen. The search gets what is left of the round's
    time limit. `plan`: the jobs owed a reservation with their options, the heuristic's holds
    (a hint) and the stable cluster rank."""
    units, status, objective, bound, held = _solve_once(
        snapshot, jobs, options, hint, base, deadline, plan
    )
    return _pack(snapshot, jobs, units, base, HoldBook(held)), base, status, objective, bound, held


def _pack(
    snapshot: Snapshot,
    jobs: list[JobRequest],
    units: dict[str, dict[str, int]],
    pools: Pools,
    book: HoldBook,
) -> dict[str, tuple[Share, ...]]:
    """Pack the model's answer into `pools`, most constrained jobs first. A job the aggregate
    let through but whose units do not pack (jobs competing for the same domains) is placed
    again by the greedy policy on what is left, or stays pending ("repair")."""
    shares: dict[str, tuple[Share, ...]] = {}
    failed: list[JobRequest] = []
    by_id = {j.id: j for j in jobs}
    for job in sorted((j for j in jobs if j.id in units), key=packing_order):
        packed, failed_in = pack_job(job, units[job.id], pools)
        if failed_in is None:
            shares[job.id] = packed
        else:
            failed.append(job)
    if failed:
        links = {link.key: link.free_gbps for link in snapshot.links}
        for job_id, packed in shares.items():
            for r in reservations_for(
                by_id[job_id], [s.cluster for s in packed] if len(packed) > 1 else []
            ):
                links[link_key(r.a, r.b)] -= r.gbps
        for job in sorted(failed, key=lambda j: jobs.index(j)):
            placed = place_greedily(job, pools, links, book)
            if placed is not None:
                shares[job.id] = placed.shares
                for r in placed.reservations:
                    links[link_key(r.a, r.b)] -= r.gbps
    return shares


def _solve_once(
    snapshot: Snapshot,
    jobs: list[JobRequest],
    options: SolveOptions,
    hint: Decision | None,
    pools: Pools,
    deadline: float,
    plan: tuple[list[Owed], list[Hold], dict[str, int]],
) -> tuple[dict[str, dict[str, int]], str, float, float, list[Hold]]:
    """Build and solve the model on the round's starting capacity (`pools`, read only)."""
    model = cp_model.CpModel()
    links = {link.key: link for link in snapshot.links}
    owed, hinted_holds, rank = plan
    weights, normal = job_values(jobs, options.priority_factor)
    hinted = {d.job_id: frozenset(d.clusters) for d in hint.jobs} if hint else {}
    vars_ = [
        job_vars(
            model, job, pools, links, options.candidates_per_job, hinted.get(job.id, frozenset())
        )
        for job in jobs
    ]
    add_shared_limits(model, vars_, snapshot, pools, links)
    chosen, held_value = add_reservations(model, vars_, owed, weights, normal)
    fit_rank = fit_ranks(rank, pools)
    weight = maximise(model, vars_, jobs, fit_rank, weights, normal, held_value)
    if hint is not None:
        add_hints(model, vars_, hint)
        hint_holds(model, chosen, hinted_holds)
    solver = _solver(options, deadline)
    code = solver.solve(model)
    status = solver.status_name(code)
    bound = float(solver.best_objective_bound) / weight  # in priority-weighted admitted GPUs
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {}, status, 0.0, math.inf, []
    held = [hold for hold, p in chosen if solver.value(p)]
    units = {
        v.job.id: {c: int(solver.value(x)) for c, x in v.units.items() if solver.value(x) > 0}
        for v in vars_
        if solver.value(v.admitted)
    }
    return units, status, float(solver.objective_value) / weight, bound, held


def _solver(options: SolveOptions, deadline: float) -> cp_model.CpSolver:
    """A solver with what is left of the round's time limit, less the packing's reserve."""
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(
        deadline - time.monotonic() - PACKING_RESERVE_S, MIN_SEARCH_S
    )
    solver.parameters.num_workers = options.workers
    if options.deterministic_time is not None:
        solver.parameters.max_deterministic_time = options.deterministic_time
    # One presolve pass: the full fix-point costs more than it saves within a round's budget
    # (docs/benchmarks.md, "Server cost: dated runs").
    solver.parameters.max_presolve_iterations = 1
    solver.parameters.random_seed = options.seed
    return solver


def cpsat_decision(
    snapshot: Snapshot,
    jobs: list[JobRequest],
    options: SolveOptions,
    base: Pools,
    deadline: float,
    plan: tuple[list[Owed], list[Hold]],
    rank: dict[str, int],
) -> tuple[Decision, Pools]:
    """Warm-start with the planned greedy policy, solve, pack. `base` is the round's starting
    capacity; it ends holding the returned answer."""
    start = time.monotonic()
    marks = {name: pool.mark() for name, pool in base.items()}
    owed, holds = plan
    hint, _ = greedy(snapshot, jobs, base, HoldBook(holds), rank)
    if not (owed or holds) and _proven_optimal(jobs, hint, base, marks, rank):
        # Room for the whole window, each job whole where the fit term is lowest: nothing a
        # search finds is worth more (`warm_start_bound`).
        return _warm_start_answer(jobs, hint, options, plan, start, proven=True), base
    if deadline - time.monotonic() < MIN_SEARCH_S + PACKING_RESERVE_S:
        # The warm start used the round's time: building a model and searching would only
        # overrun it (a 500-job window on a busy machine). Its answer is the round's.
        return _warm_start_answer(jobs, hint, options, plan, start, proven=False), base
    undone = {name: pool.rollback(marks[name]) for name, pool in base.items()}
    shares, pools, status, _, bound, held = solve_cpsat(
        snapshot, jobs, options, hint, base, deadline, (owed, holds, rank)
    )
    result = tuple(
        JobDecision(j.id, True, shares=shares[j.id]) if j.id in shares else JobDecision(j.id, False)
        for j in jobs
    )
    weights, normal = job_values(jobs, options.priority_factor)
    if score(jobs, hint.jobs, holds, owed, weights, normal) > score(
        jobs, result, held, owed, weights, normal
    ):
        # Repair is a heuristic, and the search may find nothing in its time: never return
        # less than the greedy answer we started from (its placements made again).
        for name, pool in base.items():
            pool.rollback(marks[name])
            pool.redo(undone[name])
        result, status, held = hint.jobs, f"{status}+GREEDY", holds
    decision = Decision(
        policy=Policy.CPSAT,
        status=status,
        jobs=result,
        objective=float(score(jobs, result, held, owed, weights, normal)),
        bound=bound,
        solve_seconds=time.monotonic() - start,
        reserved=tuple((h.job_id, h.describe()) for h in held),
        reserved_in_s=tuple((h.job_id, h.start_in_s) for h in held),
        holds=tuple(held),
    )
    return decision, pools


def _proven_optimal(
    jobs: list[JobRequest], hint: Decision, base: Pools, marks: dict[str, int], rank: dict[str, int]
) -> bool:
    """Whether the warm start (placed in `base` since `marks`) meets the objective's bound;
    the fit floors are read on the round's starting capacity, only when the rest is met."""
    if not jobs or not whole_at_full_width(jobs, hint):
        return False
    undone = {name: pool.rollback(marks[name]) for name, pool in base.items()}
    fit_rank = fit_ranks(rank, base)
    floors = fit_floors(jobs, base, fit_rank)
    for name, pool in base.items():
        pool.redo(undone[name])
    return at_fit_floors(jobs, hint, floors, fit_rank)


def _warm_start_answer(
    jobs: list[JobRequest],
    hint: Decision,
    options: SolveOptions,
    plan: tuple[list[Owed], list[Hold]],
    start: float,
    *,
    proven: bool,
) -> Decision:
    """The warm start as the round's answer: proven optimal (its objective is the bound), or
    taken for want of time to search (no bound)."""
    owed, holds = plan
    weights, normal = job_values(jobs, options.priority_factor)
    objective = float(score(jobs, hint.jobs, holds, owed, weights, normal))
    return Decision(
        policy=Policy.CPSAT,
        status="OPTIMAL+GREEDY" if proven else "SKIPPED+GREEDY",
        jobs=hint.jobs,
        objective=objective,
        bound=objective if proven else math.inf,
        solve_seconds=time.monotonic() - start,
        reserved=tuple((h.job_id, h.describe()) for h in holds),
        reserved_in_s=tuple((h.job_id, h.start_in_s) for h in holds),
        holds=tuple(holds),
    )
