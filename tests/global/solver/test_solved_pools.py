"""Step 5b takes the pools the solve packed into (`solve_with_pools`) instead of building the
clusters' pools again from the decision (`free_pools.after`), where they hold the same
(`free_pools.replays_alike`): every leaf taken from is the only one of its name, and takes
pods of one size or, replayed alone in decision order, holds what the solve left. Also where
CP-SAT's answer is replaced: the warm start kept, the search skipped, a job repaired, the round
solved again without the job it failed on."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from volcano_global.solver import (
    ClusterCapacity,
    Decision,
    JobRequest,
    Leaf,
    Policy,
    Snapshot,
    SolveOptions,
    cpsat,
    solve_with_pools,
)
from volcano_global.solver.free_pools import after, replays_alike
from volcano_global.solver.packing import Pools
from volcano_global.solver.round_order import in_line
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Waiting
from volcano_global.solver.whole_queue import Filled, backfilled, cut

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
OPTIONS = SolveOptions(deterministic_time=0.2, time_limit_s=10.0)


# A job no node has room for: with it in the window the warm start is not proven optimal
# (`warm_start_bound`), so the round builds the model and searches, as these tests need.
NO_ROOM = JobRequest("no-room", pods=1, gpus_per_pod=8, gpu_model="H100")


def states(pools):  # type: ignore[no-untyped-def]
    return {name: pool.state() for name, pool in pools.items()}


def test_pods_of_one_size_leave_what_replaying_the_decision_does() -> None:
    # Two leaves of four 8-GPU nodes, 2 and 6 GPUs free on some: 8-GPU pods only.
    a = Leaf("H100", (1, 0, 1, 0, 0, 0, 1, 0, 1), ("t0",), node_gpus=8)
    b = Leaf("H100", (0, 0, 0, 0, 0, 0, 0, 0, 4), ("t1",), node_gpus=8)
    jobs = tuple(
        JobRequest(f"j{i}", pods=pods, gpus_per_pod=8, gpu_model="H100")
        for i, pods in enumerate((1, 3, 1))
    )
    snapshot = Snapshot((ClusterCapacity("a", (a, b)),), (), jobs)
    decision, pools = solve_with_pools(snapshot, Policy.CPSAT, OPTIONS)
    assert pools is not None and len(decision.admitted) == 3
    assert replays_alike(decision, pools)
    assert states(pools) == states(after(snapshot, decision)[0])


def test_pods_of_two_sizes_in_one_leaf_are_replayed_not_taken() -> None:
    # Nodes with 4 and 6 GPUs free. The solve packs the 4-GPU pod first (larger units
    # first): it takes the 4, the 2-GPU pod the 6 (0 and 4 left); the decision lists the
    # 2-GPU job first, and replayed in that order the two pods leave 2 and 2.
    leaf = Leaf("H100", (0, 0, 0, 0, 1, 0, 1, 0, 0), ("t0",), node_gpus=8)
    small = JobRequest("small", pods=1, gpus_per_pod=2, gpu_model="H100")
    large = JobRequest("large", pods=1, gpus_per_pod=4, gpu_model="H100")
    snapshot = Snapshot((ClusterCapacity("a", (leaf,)),), (), (small, large, NO_ROOM))
    decision, pools = solve_with_pools(snapshot, Policy.CPSAT, OPTIONS)
    assert pools is not None and [d.job_id for d in decision.admitted] == ["small", "large"]
    assert not replays_alike(decision, pools)
    assert states(pools) != states(after(snapshot, decision)[0])


def test_pods_of_two_sizes_packed_in_decision_order_are_taken() -> None:
    # The same leaf and pods, the 4-GPU job first in the decision as in the packing: the
    # leaf is replayed alone and holds what the solve left (0 and 4).
    leaf = Leaf("H100", (0, 0, 0, 0, 1, 0, 1, 0, 0), ("t0",), node_gpus=8)
    large = JobRequest("large", pods=1, gpus_per_pod=4, gpu_model="H100")
    small = JobRequest("small", pods=1, gpus_per_pod=2, gpu_model="H100")
    snapshot = Snapshot((ClusterCapacity("a", (leaf,)),), (), (large, small))
    decision, pools = solve_with_pools(snapshot, Policy.CPSAT, OPTIONS)
    assert pools is not None and [d.job_id for d in decision.admitted] == ["large", "small"]
    assert replays_alike(decision, pools)
    assert states(pools) == states(after(snapshot, decision)[0])
    assert states(pools)["a"].leaves[0].free_nodes == (1, 0, 0, 0, 1, 0, 0, 0, 0)


def test_merged_leaves_taking_pods_of_two_sizes_are_rebuilt() -> None:
    # The pool merges leaves of one name and model: the merged leaf has no given histogram of
    # its own to replay two pod sizes from, so the pools are built again (it raised).
    leaves = tuple(Leaf("H100", (0, 0, 0, 0, 1, 0, 1, 0, 0), (), node_gpus=8) for _ in range(2))
    jobs = (
        JobRequest("small", pods=1, gpus_per_pod=2, gpu_model="H100"),
        JobRequest("large", pods=3, gpus_per_pod=4, gpu_model="H100"),
    )
    snapshot = Snapshot((ClusterCapacity("a", leaves),), (), jobs)
    decision, pools = solve_with_pools(snapshot, Policy.CPSAT, OPTIONS)
    assert pools is not None and len(decision.admitted) == 2
    assert not replays_alike(decision, pools)


def test_step_5b_places_beyond_the_window_on_the_solves_pools() -> None:
    leaf = Leaf("H100", (0,) * 8 + (4,), ("t0",), node_gpus=8)
    waiting = tuple(
        Waiting(JobRequest(f"j{i}", pods=1, gpus_per_pod=8, gpu_model="H100"), NOW)
        for i in range(3)
    )
    data = RoundInput(NOW, (ClusterCapacity("a", (leaf,)),), waiting=waiting)
    options = RoundOptions(solve=SolveOptions(window=1, deterministic_time=0.2))
    line = cut(data, in_line(data, Policy.CPSAT, options)[0], options, planned=True)
    snapshot = Snapshot(data.clusters, (), tuple(line.window))
    decision, pools = solve_with_pools(snapshot, Policy.CPSAT, options.solve)
    filled = backfilled(snapshot, decision, line, data, evicting=False, solved=pools)
    assert filled.pools is pools
    assert [d.job_id for d in filled.decision.admitted] == ["j0", "j1", "j2"]
    assert states(filled.pools)["a"].leaves[0].free_nodes == (3,) + (0,) * 7 + (1,)


# Where CP-SAT's answer is replaced (the warm start kept, the search skipped, a job repaired,
# the round solved again without the job it failed on), step 5b with the solve's pools must
# place beyond the window what it places on pools rebuilt from the decision.


def beyond_the_window(
    leaves: dict[str, tuple[Leaf, ...]], window: list[JobRequest], beyond: list[JobRequest]
) -> tuple[RoundInput, RoundOptions]:
    """A round whose window is `window`: the jobs in line in the order given (by priority)."""
    jobs = [replace(j, priority=-i) for i, j in enumerate([*window, *beyond])]
    waiting = tuple(Waiting(j, NOW) for j in jobs)
    clusters = tuple(ClusterCapacity(name, held) for name, held in leaves.items())
    return RoundInput(NOW, clusters, waiting=waiting), RoundOptions(
        solve=replace(OPTIONS, window=len(window))
    )


@dataclass
class BothWays:
    decision: Decision
    pools: Pools  # the solve's, changed by `taken`
    solved: dict[str, ClusterCapacity]  # what the solve left in them
    rebuilt: Filled  # step 5b on pools rebuilt from the decision
    taken: Filled  # step 5b on the solve's pools where `replays_alike`


def step_5b_both_ways(data: RoundInput, options: RoundOptions) -> BothWays:
    line = cut(data, in_line(data, Policy.CPSAT, options)[0], options, planned=True)
    snapshot = Snapshot(data.clusters, (), tuple(line.window))
    decision, pools = solve_with_pools(snapshot, Policy.CPSAT, options.solve)
    assert pools is not None
    solved = states(pools)
    rebuilt = backfilled(snapshot, decision, line, data, evicting=False)
    taken = backfilled(snapshot, decision, line, data, evicting=False, solved=pools)
    return BothWays(decision, pools, solved, rebuilt, taken)


def assert_alike(both: BothWays) -> None:
    rebuilt, taken = both.rebuilt, both.taken
    assert taken.decision == rebuilt.decision
    assert taken.pools is not None and rebuilt.pools is not None
    assert states(taken.pools) == states(rebuilt.pools)


def node(free: int, nodes: int = 1) -> tuple[int, ...]:
    """A histogram of `nodes` 8-GPU nodes with `free` GPUs free each."""
    return tuple(nodes if v == free else 0 for v in range(9))


def eight(job_id: str, pods: int = 1, **kw: object) -> JobRequest:
    return JobRequest(job_id, pods=pods, gpus_per_pod=8, gpu_model="H100", **kw)  # type: ignore[arg-type]


def test_the_warm_start_kept_hands_on_its_own_pools() -> None:
    # ToR t0 has 3 free nodes, t1 one. A and B each need 2 nodes under one ToR, C one node.
    # The model admits A and B (worth more than A and C; together they fit the cluster's
    # GPUs), but B's unit does not pack beside A's and is not repaired: A alone is worth less
    # than the warm start's A and C, which is kept (its pools rolled back and its placements
    # made again). Beyond the window, D takes the last node and E finds none.
    t0 = Leaf("H100", node(8, 3), ("t0", "s"), node_gpus=8)
    t1 = Leaf("H100", node(8, 1), ("t1", "s"), node_gpus=8)
    unit = {"unit_pods": 2, "unit_tier": 1}
    data, options = beyond_the_window(
        {"a": (t0, t1)},
        [eight("A", 2, **unit), eight("B", 2, **unit), eight("C")],
        [eight("D"), eight("E")],
    )
    both = step_5b_both_ways(data, options)
    assert both.decision.status.endswith("+GREEDY")
    assert [d.job_id for d in both.decision.admitted] == ["A", "C"]
    assert both.taken.pools is both.pools
    assert_alike(both)
    assert [d.job_id for d in both.taken.decision.admitted] == ["A", "C", "D"]


def test_the_skipped_search_hands_on_the_warm_starts_pools() -> None:
    # No time left after the warm start: its answer (A, B) and the pools it placed them on
    # are the round's. Beyond the window, C takes the last node and D finds none.
    leaf = Leaf("H100", node(8, 3), ("t0", "s"), node_gpus=8)
    wide = JobRequest("wide", pods=4, gpus_per_pod=8, gpu_model="H100")  # never fits
    data, options = beyond_the_window(
        {"a": (leaf,)}, [eight("A"), eight("B"), wide], [eight("C"), eight("D")]
    )
    options = replace(options, solve=replace(options.solve, time_limit_s=1e-6))
    both = step_5b_both_ways(data, options)
    assert both.decision.status == "SKIPPED+GREEDY"
    assert [d.job_id for d in both.decision.admitted] == ["A", "B"]
    assert both.taken.pools is both.pools
    assert_alike(both)
    assert [d.job_id for d in both.taken.decision.admitted] == ["A", "B", "C"]


def test_a_repaired_job_packed_last_is_replayed_in_decision_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Cluster a (the smaller, filled first) has nodes with 2 GPUs free, two of them under t0:
    # X and W each need two under one ToR, and the model puts both in a. W does not pack
    # beside X and is repaired into b's leaf (nodes with 2, 4 and 6 free) after Z's 4-GPU
    # pod: packed in that order the leaf keeps a node with 4 free (0, 0, 4), replayed in the
    # decision's order (W before Z) none (0, 2, 2), so step 5b rebuilds the pools and the
    # 4-GPU job beyond the window waits.
    repaired: list[str] = []
    place = cpsat.place_greedily

    def spy(job, *args, **kw):  # type: ignore[no-untyped-def]
        repaired.append(job.id)
        return place(job, *args, **kw)

    monkeypatch.setattr(cpsat, "place_greedily", spy)
    pair = {"pods": 2, "gpus_per_pod": 2, "gpu_model": "H100", "unit_pods": 2, "unit_tier": 1}
    a = tuple(
        Leaf("H100", node(2, n), (f"a{i}", "as"), node_gpus=8) for i, n in enumerate((2, 1, 1))
    )
    b = (Leaf("H100", (0, 0, 1, 0, 1, 0, 1, 0, 0), ("b0", "bs"), node_gpus=8),)
    data, options = beyond_the_window(
        {"a": a, "b": b},
        [
            JobRequest("X", **pair),
            JobRequest("W", **pair),
            JobRequest("Z", pods=1, gpus_per_pod=4, gpu_model="H100"),
        ],
        [JobRequest("late", pods=1, gpus_per_pod=4, gpu_model="H100")],
    )
    both = step_5b_both_ways(data, options)
    assert repaired == ["W"] and not both.decision.status.endswith("GREEDY")
    assert {d.job_id: d.clusters for d in both.decision.admitted} == {
        "X": ("a",),
        "W": ("b",),
        "Z": ("b",),
    }
    assert both.solved["b"].leaves[0].free_nodes == (2, 0, 0, 0, 1, 0, 0, 0, 0)
    assert_alike(both)
    assert both.taken.pools is not both.pools  # rebuilt
    assert not both.taken.decision.job("late").admitted


def test_the_round_solved_again_without_its_culprit_hands_on_its_pools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The round fails on "bad" (after its solve took from the pools): it is set aside and the
    # round solved again. Nodes with 4 and 6 free: that solve packs the 4-GPU pod first (0 and
    # 4 left) while the decision lists the 2-GPU job first (2 and 2 replayed), so step 5b
    # rebuilds the pools and the 4-GPU job beyond the window waits.
    decide = cpsat.cpsat_decision

    def failing(snapshot, jobs, *args, **kw):  # type: ignore[no-untyped-def]
        answer = decide(snapshot, jobs, *args, **kw)
        if any(j.id == "bad" for j in jobs):
            raise ValueError("a defect")
        return answer

    monkeypatch.setattr(cpsat, "cpsat_decision", failing)
    leaf = Leaf("H100", (0, 0, 0, 0, 1, 0, 1, 0, 0), ("t0",), node_gpus=8)
    data, options = beyond_the_window(
        {"a": (leaf,)},
        [
            JobRequest("bad", pods=1, gpus_per_pod=2, gpu_model="H100"),
            JobRequest("small", pods=1, gpus_per_pod=2, gpu_model="H100"),
            JobRequest("large", pods=1, gpus_per_pod=4, gpu_model="H100"),
            NO_ROOM,
        ],
        [JobRequest("late", pods=1, gpus_per_pod=4, gpu_model="H100")],
    )
    both = step_5b_both_ways(data, options)
    assert (both.decision.job("bad").reason or "").startswith("set aside: ValueError")
    assert [d.job_id for d in both.decision.admitted] == ["small", "large"]
    assert both.solved["a"].leaves[0].free_nodes == (1, 0, 0, 0, 1, 0, 0, 0, 0)
    assert_alike(both)
    assert both.taken.pools is not both.pools  # rebuilt
    assert not both.taken.decision.job("late").admitted
