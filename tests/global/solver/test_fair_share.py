"""Fair share across a queue tree, computed by hand (solver/fair_share.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from volcano_global.solver.fair_share import QueueNode, fair_shares, quota_states
from volcano_global.solver.queue_order import Candidate, fair_order


def tree(*nodes: QueueNode) -> dict[str, QueueNode]:
    return {n.name: n for n in nodes}


def test_weights_divide_among_siblings_then_within_a_parent() -> None:
    # root 120 GPUs: eng (weight 2) and research (weight 1) both want more than all of it.
    # eng deserves 80, research 40; inside eng, prod (3) and dev (1): 60 and 20.
    queues = tree(
        QueueNode("eng", weight=2),
        QueueNode("prod", parent="eng", weight=3, pending=500),
        QueueNode("dev", parent="eng", weight=1, pending=500),
        QueueNode("research", weight=1, pending=500),
    )
    got = {n: s.deserved for n, s in fair_shares(120, queues).items()}
    assert got == {"eng": 80, "prod": 60, "dev": 20, "research": 40}


def test_capability_caps_and_what_is_left_goes_to_the_others() -> None:
    # eng is capped at 30: research takes the remaining 90 (it wants 500); inside eng, the cap
    # is divided 3:1 (22.5 / 7.5 -> whole GPUs by largest remainder, the tie to the first name
    # in order: dev 8, prod 22).
    queues = tree(
        QueueNode("eng", weight=2, capability=30),
        QueueNode("prod", parent="eng", weight=3, pending=500),
        QueueNode("dev", parent="eng", weight=1, pending=500),
        QueueNode("research", weight=1, pending=500),
    )
    shares = fair_shares(120, queues)
    assert {n: s.deserved for n, s in shares.items()} == {
        "eng": 30,
        "prod": 22,
        "dev": 8,
        "research": 90,
    }
    assert shares["dev"].cap == 30  # the parent's capability caps its subtree


def test_guarantee_is_a_floor_even_unused_and_deserved_a_floor_up_to_demand() -> None:
    # 100 GPUs. ops wants nothing but is guaranteed 20; batch (weight 1) deserves 50 and wants
    # 60; web (weight 9) wants everything. Floors: ops 20, batch 50; web would take 9/10 of
    # the water but batch keeps its deserved 50: web gets 30.
    queues = tree(
        QueueNode("ops", guarantee=20),
        QueueNode("batch", weight=1, deserved=50, pending=60),
        QueueNode("web", weight=9, pending=1000),
    )
    got = {n: s.deserved for n, s in fair_shares(100, queues).items()}
    assert got == {"ops": 20, "batch": 50, "web": 30}


def test_a_queue_never_deserves_more_than_it_wants() -> None:
    queues = tree(QueueNode("a", weight=5, held=8, pending=2), QueueNode("b", pending=200))
    got = fair_shares(64, queues)
    assert (got["a"].deserved, got["b"].deserved) == (10, 54)
    assert got["a"].allocated == 8 and got["a"].share == 0.8


def test_floors_beyond_capacity_are_scaled() -> None:
    queues = tree(QueueNode("a", guarantee=60), QueueNode("b", guarantee=40, pending=100))
    got = {n: s.deserved for n, s in fair_shares(50, queues).items()}
    assert got == {"a": 30, "b": 20}


def test_a_capped_parent_splits_its_room_among_waiting_leaves() -> None:
    # eng capped at 40 holds 16 (prod 16): 24 left, split 3:1 between prod and dev, which both
    # wait; research is uncapped.
    queues = tree(
        QueueNode("eng", capability=40),
        QueueNode("prod", parent="eng", weight=3, held=16, pending=64),
        QueueNode("dev", parent="eng", weight=1, pending=64),
        QueueNode("research", pending=8),
    )
    states = {q.name: q for q in quota_states(queues, {"prod", "dev", "research"})}
    assert (states["prod"].quota_gpus, states["prod"].used_gpus) == (16 + 18, 16)
    assert states["dev"].quota_gpus == 6
    assert states["research"].quota_gpus is None
    # Only dev waiting: it may take all 24.
    assert {q.name: q.quota_gpus for q in quota_states(queues, {"dev"})}["dev"] == 24


def test_order_compares_queues_by_their_ancestors_first() -> None:
    # eng (weight 1) holds 30 through prod; research (weight 1) holds 10. Every job of
    # research goes before dev's, though dev itself holds nothing: its parent is further in.
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    queues = tree(
        QueueNode("eng"),
        QueueNode("prod", parent="eng"),
        QueueNode("dev", parent="eng"),
        QueueNode("research"),
    )
    jobs = [
        Candidate("d1", "dev", 0, 8, t0),
        Candidate("r1", "research", 0, 8, t0 + timedelta(seconds=1)),
        Candidate("r2", "research", 0, 8, t0 + timedelta(seconds=2)),
    ]
    flat = fair_order(jobs, held={"prod": 30, "research": 10}, weights={})
    assert flat[0].key == "d1"  # without the tree, dev alone holds nothing
    ordered = fair_order(jobs, held={"prod": 30, "research": 10}, weights={}, tree=queues)
    assert [c.key for c in ordered] == ["r1", "r2", "d1"]


def test_a_queue_under_its_floor_goes_first() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    queues = tree(QueueNode("small", weight=1, guarantee=16), QueueNode("big", weight=10))
    jobs = [Candidate("b", "big", 0, 8, t0), Candidate("s", "small", 0, 8, t0 + timedelta(1))]
    ordered = fair_order(jobs, held={"small": 8, "big": 0}, weights={}, tree=queues)
    assert [c.key for c in ordered] == ["s", "b"]


def test_a_queue_named_root_and_a_cycle_of_parents_still_get_shares() -> None:
    # A queue called "root" (the older REST shape allowed the name) is a top-level queue, not
    # its own child; a cycle of parents (two replicas each accepting one edge) hangs from the
    # top. Before, both recursed without end and every scheduling round failed.
    queues = tree(
        QueueNode("root", held=8, pending=100),
        QueueNode("a", parent="b", pending=100),
        QueueNode("b", parent="a", pending=100),
    )
    got = {n: s.deserved for n, s in fair_shares(90, queues).items()}
    assert got == {"root": 30, "a": 30, "b": 30}
    assert {q.name for q in quota_states(queues, {"root", "a"})} == {"root", "a", "b"}
    jobs = [Candidate("r", "root", 0, 8, datetime(2026, 1, 1, tzinfo=UTC))]
    assert [c.key for c in fair_order(jobs, held={}, weights={}, tree=queues)] == ["r"]
