"""The pool's incremental bookkeeping agrees with a scan of its leaves, however it changed."""

from __future__ import annotations

import random

from volcano_global.solver.capacity import ClusterPool, give_to
from volcano_global.solver.model import ClusterCapacity, JobRequest, Leaf
from volcano_global.solver.planning import freed


def test_the_tightest_leaf_is_the_one_a_scan_finds_through_placements_and_rollbacks() -> None:
    rng = random.Random(7)
    leaves = tuple(
        Leaf(model, tuple(rng.randrange(3) for _ in range(9)), (f"tor{t:03d}", f"spine{t // 8}"))
        for t in range(60)
        for model in ("H100", "A100")
    )
    pool = ClusterPool(ClusterCapacity("c", leaves))

    def scanned(model: str, gpus_per_pod: int, pods: int) -> str | None:
        fits = [
            (x.slots(gpus_per_pod), x.name)
            for x in pool.leaves
            if x.gpu_model == model and x.slots(gpus_per_pod) >= pods
        ]
        return min(fits)[1] if fits else None

    marks = []
    for step in range(400):
        model, g, pods = rng.choice(["H100", "A100"]), rng.choice([1, 2, 4, 8]), rng.randrange(1, 6)
        tightest = pool._tightest(model, g, pods)
        assert (tightest.name if tightest else None) == scanned(model, g, pods), step
        if rng.random() < 0.15 and marks:
            pool.rollback(marks.pop())
        else:
            marks.append(pool.mark())
            job = JobRequest(id=f"j{step}", pods=pods, gpus_per_pod=g, gpu_model=model)
            pool.place(job, pods, model)
    assert any(pool._buckets.values())  # the buckets were used, and kept


def test_redo_makes_again_what_a_rollback_undid() -> None:
    rng = random.Random(3)
    leaves = tuple(
        Leaf("H100", tuple(rng.randrange(4) for _ in range(9)), (f"tor{t}", "spine"))
        for t in range(20)
    )
    pool = ClusterPool(ClusterCapacity("c", leaves))
    job = JobRequest(id="j", pods=4, gpus_per_pod=8, gpu_model="H100", unit_pods=2, unit_tier=1)
    before = pool.state()
    mark = pool.mark()
    for _ in range(3):
        pool.place(job, 2, "H100")
    after = pool.state()
    placed_units = pool.max_units(job, "H100")
    undone = pool.rollback(mark)
    assert pool.state() == before
    pool.redo(undone)
    assert pool.state() == after
    assert pool.free_gpus("H100") == sum(leaf.free_gpus for leaf in after.leaves)
    assert pool.max_units(job, "H100") == placed_units
    # and it can be undone again
    pool.rollback(mark)
    assert pool.state() == before


def test_pod_slots_kept_as_node_counts_agree_with_a_fresh_pool() -> None:
    rng = random.Random(11)
    leaves = tuple(
        Leaf(model, tuple(rng.randrange(3) for _ in range(9)), (f"tor{t:03d}",))
        for t in range(40)
        for model in ("H100", "A100")
    )
    pool = ClusterPool(ClusterCapacity("c", leaves))
    marks = []
    for step in range(300):
        model, g, pods = rng.choice(["H100", "A100"]), rng.choice([1, 2, 4, 8]), rng.randrange(1, 9)
        fresh = ClusterPool(pool.state())
        for size in (1, 2, 3, 4, 8):
            assert pool.slots(model, size) == fresh.slots(model, size), (step, size)
        if rng.random() < 0.2 and marks:
            pool.rollback(marks.pop())
        else:
            marks.append(pool.mark())
            pool.place(
                JobRequest(id=f"j{step}", pods=pods, gpus_per_pod=g, gpu_model=model), pods, model
            )
    # Every pod size counted the same as the leaves' own slots, summed.
    assert pool.slots("H100", 2) == sum(x.slots(2) for x in pool.leaves if x.gpu_model == "H100")


def test_a_pod_given_back_frees_what_planning_freed_frees_and_rolls_back() -> None:
    """`give_back` is `planning.freed` as a change of the pool (what preemption's trials
    use instead of rebuilding the fleet's pools), and its caches agree with a fresh pool."""
    rng = random.Random(5)
    leaves = tuple(
        Leaf(model, tuple(rng.randrange(4) for _ in range(9)), (f"tor{t}", f"spine{t // 4}"))
        for t in range(12)
        for model in ("H100", "A100")
    )
    state = ClusterCapacity("c", leaves)
    pool = ClusterPool(state)
    job = JobRequest(id="j", pods=4, gpus_per_pod=4, gpu_model="H100", unit_pods=2, unit_tier=1)
    pool.max_units(job, "H100")  # caches built before the change, kept up to date by it
    pool.slots("A100", 8)
    expected = state
    mark = pool.mark()
    for _ in range(60):
        pods = [
            (
                f"tor{rng.randrange(13)}",
                rng.choice(["", "H100", "A100"]),
                rng.randrange(1, 4),
                rng.choice([1, 2, 4, 8, 9]),
            )
            for _ in range(rng.randrange(1, 5))
        ]
        pool.give_back(pods)
        (expected,) = freed((expected,), [("c", *p) for p in pods])
        assert pool.state() == expected
        fresh = ClusterPool(expected)
        assert pool.max_units(job, "H100") == fresh.max_units(job, "H100")
        assert pool.slots("A100", 8) == fresh.slots("A100", 8)
    pool.rollback(mark)
    assert pool.state() == state


def test_nodes_freed_together_as_one_pod_at_a_time() -> None:
    def one_at_a_time(hist: list[int], per_pod: int, pods: int) -> int:
        for given in range(pods):
            top = len(hist) - 1 - per_pod
            source = next((v for v in range(top, -1, -1) if hist[v] > 0), None)
            if source is None:
                return given
            hist[source] -= 1
            hist[source + per_pod] += 1
        return pods

    rng = random.Random(1)
    for _ in range(20000):
        hist = [rng.randrange(4) for _ in range(rng.choice([5, 9, 17]))]
        per_pod, pods = rng.randrange(len(hist) + 1), rng.randrange(12)
        slow, fast = list(hist), list(hist)
        assert one_at_a_time(slow, per_pod, pods) == give_to(fast, per_pod, pods)
        assert fast == slow, (hist, per_pod, pods)
