"""Step 5b takes the pools the solve packed into (`solve_with_pools`) instead of building the
clusters' pools again from the decision (`free_pools.after`), where they hold the same
(`free_pools.replays_alike`): every leaf taken from is the only one of its name, and takes
pods of one size or, replayed alone in decision order, holds what the solve left."""

from __future__ import annotations

from datetime import UTC, datetime

from volcano_global.solver import (
    ClusterCapacity,
    JobRequest,
    Leaf,
    Policy,
    Snapshot,
    SolveOptions,
    solve_with_pools,
)
from volcano_global.solver.free_pools import after, replays_alike
from volcano_global.solver.round_order import in_line
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Waiting
from volcano_global.solver.whole_queue import backfilled, cut

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
OPTIONS = SolveOptions(deterministic_time=0.2, time_limit_s=10.0)


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
    snapshot = Snapshot((ClusterCapacity("a", (leaf,)),), (), (small, large))
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
