"""Queue order: priority, then weighted fair share between queues, then submission time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from volcano_global.solver.fair_share import QueueNode, fair_shares
from volcano_global.solver.queue_order import Candidate, fair_order

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(key: str, queue: str, *, priority: int = 0, gpus: int = 8, minute: int = 0) -> Candidate:
    return Candidate(key, queue, priority, gpus, T0 + timedelta(minutes=minute))


def test_weights_share_the_order() -> None:
    jobs = [job(f"a{i}", "a", minute=i) for i in range(4)] + [
        job(f"b{i}", "b", minute=10 + i) for i in range(6)
    ]
    order = [c.key for c in fair_order(jobs, held={}, weights={"a": 1, "b": 3})]
    # b (weight 3) gets three jobs for every one of a's, though a's were submitted first.
    assert order[:8] == ["a0", "b0", "b1", "b2", "a1", "b3", "b4", "b5"]


def test_held_gpus_count_against_a_queue() -> None:
    jobs = [job("a0", "a"), job("b0", "b", minute=5)]
    assert [c.key for c in fair_order(jobs, held={"a": 64}, weights={"a": 1, "b": 1})] == [
        "b0",
        "a0",
    ]


def test_priority_comes_before_fair_share() -> None:
    jobs = [job("low", "a"), job("high", "b", priority=1000, minute=9)]
    assert [c.key for c in fair_order(jobs, held={"b": 10_000}, weights={"a": 1, "b": 1})] == [
        "high",
        "low",
    ]


def deserved(capacity: int, queues: dict[str, tuple[int, int, int | None]]) -> dict[str, int]:
    """Flat queues: name -> (weight, wanted GPUs, capability)."""
    nodes = {n: QueueNode(n, weight=w, pending=p, capability=c) for n, (w, p, c) in queues.items()}
    return {n: s.deserved for n, s in fair_shares(capacity, nodes).items()}


def test_deserved_divides_by_weight_among_queues_that_want_gpus() -> None:
    assert deserved(64, {"a": (3, 1000, None), "b": (1, 1000, None), "idle": (5, 0, None)}) == {
        "a": 48,
        "b": 16,
        "idle": 0,
    }


def test_what_a_capped_queue_leaves_is_divided_again() -> None:
    # b wants 8 only; a's quota caps it at 40; c takes the rest.
    shares = deserved(100, {"a": (1, 1000, 40), "b": (1, 8, None), "c": (1, 1000, None)})
    assert shares == {"a": 40, "b": 8, "c": 52}


def test_a_demoted_job_goes_after_less_served_work_of_its_queue_not_of_every_queue() -> None:
    """Time-sharing orders by attained service inside a queue; fair share still picks the
    queue (review: queue a, holding nothing, waited behind every new job of queue b)."""
    t = datetime(2026, 1, 1, tzinfo=UTC)
    jobs = [
        Candidate("a-demoted", "a", 0, 64, t, level=3600.0 * 64),
        Candidate("a-new", "a", 0, 64, t + timedelta(seconds=5)),
        Candidate("b-new1", "b", 0, 64, t + timedelta(seconds=1)),
        Candidate("b-new2", "b", 0, 64, t + timedelta(seconds=2)),
    ]
    order = [c.key for c in fair_order(jobs, held={"b": 512}, weights={"a": 1, "b": 1})]
    assert order.index("a-new") < order.index("a-demoted") < order.index("b-new1")
