"""What `solver.preemption` starts from, by hand: the capacity and links a round's decision
leaves (`remaining`), a preemptor's quota room, what a class may evict for, and growth that
never evicts."""

from __future__ import annotations

from dataclasses import replace

from tests.solver_support import instances
from volcano_global.solver import (
    ClusterCapacity,
    Decision,
    JobDecision,
    Leaf,
    Policy,
    Snapshot,
)
from volcano_global.solver.free_pools import remaining
from volcano_global.solver.model import (
    JobRequest,
    LinkBandwidth,
    LinkState,
    QueueState,
    RunningJob,
    Share,
)
from volcano_global.solver.preemption import PREEMPT, RECLAIM, may_evict_for, preempt

HOUR = 3600.0


def cluster(name: str, free_nodes: int, used_nodes: int) -> ClusterCapacity:
    """8-GPU H100 nodes under one leaf domain named after the cluster."""
    return ClusterCapacity(
        name,
        (Leaf("H100", (used_nodes,) + (0,) * 7 + (free_nodes,), (name,), node_gpus=8),),
    )


def job(job_id: str, gpus: int, *, queue: str = "default", priority: int = 10) -> JobRequest:
    evicts = frozenset({PREEMPT, RECLAIM})
    return instances.job(job_id, gpus // 8, priority=priority, queue=queue, may_evict_for=evicts)


def victim(job_id: str, clu: str, gpus: int) -> RunningJob:
    return RunningJob(
        job_id,
        ((clu, "H100", gpus),),
        ends_in_s=10 * HOUR,  # waiting for it would cost more than evicting it
        priority=0,
        run_s=2 * HOUR,
        lost_s=2 * HOUR,
        pods=((clu, clu, "", gpus // 8, 8),),
    )


def test_remaining_takes_the_admitted_shares_pods_and_reservations() -> None:
    snap = Snapshot(
        clusters=(cluster("a", 4, 4), cluster("b", 2, 6)),
        links=(LinkState("a", "b", 100.0, 10.0),),
        jobs=(job("x", 48), job("y", 8)),
    )
    admitted = JobDecision(
        "x",
        True,
        shares=(Share("a", 4, 4, 32, (("a", 4),)), Share("b", 2, 2, 16, (("b", 2),))),
        reservations=(LinkBandwidth("b", "a", 30.0),),
    )
    decision = Decision(Policy.GREEDY, "FEASIBLE", (admitted, JobDecision("y", False)))
    left = remaining(snap, decision)
    # a: 4 free nodes, all taken; b: 2 free, both taken; 10 + 30 Gbps of 100 reserved.
    assert [c.leaves[0].free_nodes[8] for c in left.clusters] == [0, 0]
    assert [c.leaves[0].free_nodes[0] for c in left.clusters] == [8, 8]
    assert left.links[0].reserved_gbps == 40.0 and left.links[0].free_gbps == 60.0


def test_a_preemptor_without_quota_room_evicts_no_one() -> None:
    full = (cluster("a", 0, 8),)
    running = (victim("low", "a", 64),)
    quota = (QueueState("team", quota_gpus=64, used_gpus=32),)  # 32 GPUs of room
    pending = Decision(Policy.GREEDY, "FEASIBLE", (JobDecision("p", False),))
    snap = Snapshot(clusters=full, jobs=(job("p", 64, queue="team"),), running=running)
    assert preempt(snap, pending) != []  # no quota: it evicts
    assert preempt(replace(snap, queues=quota), pending) == []
    # Room for 32: a 32-GPU job of the queue may evict.
    small = Snapshot(clusters=full, jobs=(job("p", 32, queue="team"),), running=running)
    assert len(preempt(replace(small, queues=quota), pending)) == 1


def test_never_evicts_nothing_and_growth_never_evicts() -> None:
    assert may_evict_for("Never") == frozenset()
    assert may_evict_for("PreemptLowerPriority") == frozenset({PREEMPT, RECLAIM})
    full = (cluster("a", 0, 8),)
    grow = replace(job("elastic", 32), grows=True)  # what a running elastic job could add
    snap = Snapshot(clusters=full, jobs=(grow,), running=(victim("low", "a", 64),))
    pending = Decision(Policy.GREEDY, "FEASIBLE", (JobDecision(grow.id, False),))
    assert preempt(snap, pending) == []
    waiting = replace(grow, id="waiting", grows=False)  # the same, from a waiting job, evicts
    assert (
        preempt(
            replace(snap, jobs=(waiting,)), replace(pending, jobs=(JobDecision("waiting", False),))
        )
        != []
    )
