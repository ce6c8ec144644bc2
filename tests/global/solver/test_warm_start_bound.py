"""A round whose warm start meets the objective's bound term by term skips the search
(`solver/warm_start_bound.py`): checked against CP-SAT's own proven optimum on random fleets,
and each condition that must send the round to the search."""

from __future__ import annotations

import random
import time

import pytest

from volcano_global.solver import (
    ClusterCapacity,
    Decision,
    JobDecision,
    JobRequest,
    Leaf,
    LinkState,
    Policy,
    Share,
    Snapshot,
    SolveOptions,
    solve,
    stable_rank,
)
from volcano_global.solver.cpsat import solve_cpsat
from volcano_global.solver.cpsat_model import fit_ranks
from volcano_global.solver.packing import pools_of
from volcano_global.solver.warm_start_bound import at_fit_floors, fit_floors, whole_at_full_width

OPTIONS = SolveOptions(deterministic_time=2.0, time_limit_s=30.0)


def cluster(name: str, free_nodes: int) -> ClusterCapacity:
    """`free_nodes` idle 8-GPU H100 nodes under two ToRs."""
    half = free_nodes // 2
    leaves = (
        Leaf("H100", (0,) * 8 + (half,), (f"{name}-t0", f"{name}-s"), node_gpus=8),
        Leaf("H100", (0,) * 8 + (free_nodes - half,), (f"{name}-t1", f"{name}-s"), node_gpus=8),
    )
    return ClusterCapacity(name, leaves)


def job(name: str, pods: int, gpus: int = 8, **kw) -> JobRequest:  # type: ignore[no-untyped-def]
    return JobRequest(name, pods=pods, gpus_per_pod=gpus, gpu_model="H100", **kw)


def fit_sum(snapshot: Snapshot, units: dict[str, dict[str, int]]) -> int:
    """The fit term of an answer: the sum of each cluster's fit rank times the GPUs there."""
    pools = pools_of(snapshot.clusters)
    fit_rank = fit_ranks(stable_rank(snapshot, pools), pools)
    by_id = {j.id: j for j in snapshot.jobs}
    return sum(
        fit_rank[c] * by_id[j].unit_gpus * u
        for j, placed in units.items()
        for c, u in placed.items()
    )


@pytest.mark.parametrize("seed", range(12))
def test_a_proven_warm_start_is_worth_what_the_search_proves(seed: int) -> None:
    """Random fleets with room for the window: where the round skips the search, CP-SAT
    searching the same window proves an optimum of the same value, primary and secondary."""
    rng = random.Random(seed)
    clusters = tuple(cluster(f"c{i}", rng.randrange(2, 12)) for i in range(rng.randrange(2, 6)))
    jobs = tuple(
        job(f"j{k}", rng.choice((1, 2, 4)), rng.choice((1, 2, 4, 8)))
        for k in range(rng.randrange(1, 6))
    )
    snapshot = Snapshot(clusters, (), jobs)
    decision = solve(snapshot, Policy.CPSAT, OPTIONS)
    if decision.status != "OPTIMAL+GREEDY":
        assert decision.status in ("OPTIMAL", "FEASIBLE") or decision.status.endswith("GREEDY")
        return
    assert decision.gap == 0.0 and decision.bound == decision.objective
    base = pools_of(clusters)
    deadline = time.monotonic() + OPTIONS.time_limit_s
    plan = ([], [], stable_rank(snapshot, base))
    shares, _, status, objective, _, _ = solve_cpsat(
        snapshot, list(jobs), OPTIONS, None, base, deadline, plan
    )
    assert status == "OPTIMAL"
    assert set(shares) == {j.id for j in jobs}  # the search admits every job too
    assert all(len(placed) == 1 for placed in shares.values())  # each whole in one cluster
    searched = {j: {s.cluster: s.units for s in placed} for j, placed in shares.items()}
    proven = {d.job_id: {s.cluster: s.units for s in d.shares} for d in decision.jobs}
    assert fit_sum(snapshot, proven) == fit_sum(snapshot, searched)
    assert objective <= decision.objective + 1e-9  # the search's, with the fit term taken off


def test_some_seeds_are_proven() -> None:
    """The property above is not vacuous: a small window in a roomy fleet is proven."""
    snapshot = Snapshot((cluster("a", 8), cluster("b", 16)), (), (job("x", 2), job("y", 1, 4)))
    decision = solve(snapshot, Policy.CPSAT, OPTIONS)
    assert decision.status == "OPTIMAL+GREEDY"
    assert [d.job_id for d in decision.admitted] == ["x", "y"]
    assert {s.cluster for d in decision.admitted for s in d.shares} == {"a"}  # the smallest


def test_a_window_without_room_for_every_job_is_searched() -> None:
    snapshot = Snapshot((cluster("a", 2),), (), (job("x", 2), job("y", 1)))
    decision = solve(snapshot, Policy.CPSAT, OPTIONS)
    assert decision.status == "OPTIMAL"
    assert [d.job_id for d in decision.admitted] == ["x"]


def test_a_split_job_is_searched() -> None:
    """Only split over two clusters does the job fit: the traffic and cluster terms are not at
    their bound, the search decides."""
    snapshot = Snapshot(
        (cluster("a", 2), cluster("b", 2)),
        (LinkState("a", "b", 400.0),),
        (job("x", 4, splittable=True, max_clusters=2, unit_pods=1),),
    )
    decision = solve(snapshot, Policy.CPSAT, OPTIONS)
    assert not decision.status.startswith("OPTIMAL+")
    assert len(decision.job("x").shares) == 2


def _decision(*shares: tuple[str, str, int]) -> Decision:
    return Decision(
        Policy.CPSAT,
        "X",
        tuple(JobDecision(j, True, shares=(Share(c, u, u, 8 * u),)) for j, c, u in shares),
    )


def test_each_term_of_the_bound() -> None:
    jobs = [job("x", 2), job("e", 4, unit_pods=1, min_units=1)]
    full = _decision(("x", "a", 1), ("e", "b", 4))
    assert whole_at_full_width(jobs, full)
    assert not whole_at_full_width(jobs, _decision(("x", "a", 1), ("e", "b", 3)))  # narrower
    assert not whole_at_full_width(jobs, _decision(("x", "a", 1)))  # e not admitted
    split = Decision(
        Policy.CPSAT,
        "X",
        (
            JobDecision("x", True, shares=(Share("a", 1, 2, 16),)),
            JobDecision("e", True, shares=(Share("a", 2, 2, 16), Share("b", 2, 2, 16))),
        ),
    )
    assert not whole_at_full_width(jobs, split)
    fit_rank = {"a": 0, "b": 2}
    assert at_fit_floors(jobs, full, {"x": 0, "e": 2}, fit_rank)
    assert not at_fit_floors(jobs, full, {"x": 0, "e": 0}, fit_rank)  # e could go lower
    assert not at_fit_floors(jobs, full, {"x": 0}, fit_rank)  # e has no room anywhere


def test_a_floor_is_the_lowest_rank_with_room_for_a_unit() -> None:
    # a (smallest) has 1 node free, b 4, c 8: a 2-node job's unit is the job; a's one node is
    # not room for it, b is.
    clusters = (cluster("a", 1), cluster("b", 4), cluster("c", 8), cluster("d", 9))
    snapshot = Snapshot(clusters, (), ())
    pools = pools_of(clusters)
    fit_rank = fit_ranks(stable_rank(snapshot, pools), pools)
    assert fit_rank == {"a": 0, "b": 1, "c": 2, "d": 3}
    floors = fit_floors([job("two", 2), job("one", 1), job("many", 20)], pools, fit_rank)
    assert floors == {"two": 1, "one": 0}
