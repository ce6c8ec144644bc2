"""The pool's incremental bookkeeping agrees with a scan of its leaves, however it changed."""

from __future__ import annotations

import random
from dataclasses import replace

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


def test_two_pathless_leaves_of_one_model_place_as_one_leaf() -> None:
    """Two leaves named alike (here: both the cluster's) are one leaf to the pool: three 8-GPU
    pods fit on their four free nodes, in that one leaf, and are taken back whole."""
    free = (0, 0, 0, 0, 0, 0, 0, 0, 2)
    pool = ClusterPool(ClusterCapacity("c", (Leaf("H100", free), Leaf("H100", free))))
    job = JobRequest(id="j", pods=3, gpus_per_pod=8, gpu_model="H100", unit_pods=1)
    mark = pool.mark()
    assert pool.place(job, 3, "H100") == [("c", 3)]
    assert [(x.name, tuple(x.hist)) for x in pool.leaves] == [("c", (3,) + (0,) * 7 + (1,))]
    assert pool.slots("H100", 8) == 1
    pool.rollback(mark)
    assert pool.slots("H100", 8) == 4
    assert pool.take_from_leaf("c", "H100", 8, 5) == 4


def test_leaves_named_alike_tie_and_roll_back_without_error() -> None:
    """The shapes that broke the pool's books (fuzz seeds 95 and 646 of tools/fuzz.py): leaves
    of one name tied in slots (`sorted` compared the leaves), and a rollback after the bucket
    of their shared name had been moved by the other (KeyError)."""
    one = (0, 0, 0, 0, 1, 0, 0, 0, 1)
    pool = ClusterPool(ClusterCapacity("c", (Leaf("H100", one), Leaf("H100", one))))
    assert pool._tightest("H100", 4, 1) is not None  # the buckets are kept from here on
    job = JobRequest(id="j", pods=4, gpus_per_pod=4, gpu_model="H100", unit_pods=1)
    mark = pool.mark()
    assert pool.place(job, 4, "H100") == [("c", 4)]
    pool.rollback(mark)
    assert pool.place(job, 5, "H100") == [("c", 5)]
    assert pool.place(job, 2, "H100") is None  # one slot left: nothing taken
    assert pool.slots("H100", 4) == 1


def test_a_hypernode_named_as_its_cluster_merges_with_the_nodes_outside_any() -> None:
    """A HyperNode may have its cluster's name (nothing forbids it), and the nodes outside any
    HyperNode form a leaf of that name too: one leaf, its topology dropped (a unit in "c" may be
    bound on either's nodes), its node size kept only if both know the same one; other models
    and leaves stay as they were, in their order."""
    pathless = Leaf("H100", (0, 1), (), node_gpus=8)
    inside = Leaf("H100", (0, 0, 0, 0, 0, 0, 0, 0, 3), ("c", "spine"), node_gpus=8)
    other = Leaf("A100", (0, 0, 0, 0, 0, 0, 0, 0, 1), ("c", "spine"), node_gpus=8)
    tor = Leaf("H100", (0, 0, 0, 0, 0, 0, 0, 0, 2), ("tor", "spine"), node_gpus=4)
    pool = ClusterPool(ClusterCapacity("c", (pathless, other, inside, tor)))
    assert [(x.name, x.gpu_model, x.hist, x.path, x.node_gpus) for x in pool.leaves] == [
        ("c", "H100", (0, 1, 0, 0, 0, 0, 0, 0, 3), (), 8),
        ("c", "A100", other.free_nodes, ("c", "spine"), 8),
        ("tor", "H100", tor.free_nodes, ("tor", "spine"), 4),
    ]
    assert pool.domain_slots("H100", 2, 8) == {"spine": 2}
    assert pool.free_gpus("H100") == 1 + 24 + 16
    mixed = ClusterPool(ClusterCapacity("c", (pathless, replace(inside, node_gpus=4))))
    assert mixed.leaves[0].node_gpus == 0
