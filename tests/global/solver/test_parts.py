"""Step 5c of a round (`solver.parts`): a HyperJob whose children differ (Volcano's
heterogeneous HyperJob) is placed child by child by `plan_round`, all children or none, each
child whole in a cluster with its GPU model, one share per run of adjacent children."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, LinkState, Policy
from volcano_global.solver.free_pools import after
from volcano_global.solver.model import Part, Snapshot
from volcano_global.solver.packing import pools_of
from volcano_global.solver.parts import MAX_TRIES, Room, place_parted
from volcano_global.solver.reservations import Hold, HoldBook
from volcano_global.solver.round_plan import RoundInput, Status, Waiting, plan_round

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def cluster(name: str, model: str, free_nodes: int, used_nodes: int = 0) -> ClusterCapacity:
    """8-GPU nodes of one model under one leaf domain named after the cluster."""
    hist = (used_nodes,) + (0,) * 7 + (free_nodes,)
    return ClusterCapacity(name, (Leaf(model, hist, (f"{name}-tor",), node_gpus=8),))


def child(name: str, model: str, pods: int = 8, per_pod: int = 8, **more: object) -> Part:
    return Part(name, pods=pods, gpus_per_pod=per_pod, gpu_model=model, **more)  # type: ignore[arg-type]


def parted(job_id: str, *parts: Part, max_clusters: int = 4, gbps: float = 0.0) -> Waiting:
    request = JobRequest(
        job_id,
        pods=1,
        gpus_per_pod=sum(p.gpus for p in parts),
        splittable=True,
        max_clusters=max_clusters,
        allreduce_gbps=gbps,
        parts=parts,
    )
    return Waiting(request, NOW - timedelta(minutes=5))


def gang(job_id: str, gpus: int, model: str) -> Waiting:
    request = JobRequest(job_id, pods=gpus // 8, gpus_per_pod=8, gpu_model=model)
    return Waiting(request, NOW - timedelta(minutes=1))


EAST_WEST = (cluster("east", "H100", 10), cluster("west", "A100", 10))


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL, Policy.FIRST_FIT])
def test_each_child_goes_to_a_cluster_with_its_model(policy: Policy) -> None:
    job = parted(
        "hetero",
        child("trainer-h100-0", "H100", allowed_clusters=("east",)),
        child("trainer-a100-0", "A100", allowed_clusters=("west",)),
    )
    plan = plan_round(RoundInput(NOW, EAST_WEST, waiting=(job,)), policy)
    (start,) = plan.starts
    # Document order is rank order: the H100 child's share first.
    assert [(s.cluster, s.pods, s.gpus, s.units) for s in start.shares] == [
        ("east", 8, 64, 1),
        ("west", 8, 64, 1),
    ]
    assert plan.outcomes["hetero"].status is Status.STARTED


def test_nothing_starts_when_one_child_has_no_room_and_the_reason_names_it() -> None:
    full_west = (cluster("east", "H100", 10), cluster("west", "A100", 4, used_nodes=6))
    job = parted("hetero", child("trainer-h100-0", "H100"), child("trainer-a100-0", "A100"))
    plan = plan_round(RoundInput(NOW, full_west, waiting=(job,)), Policy.CPSAT)
    assert plan.starts == ()
    reason = plan.outcomes["hetero"].reason
    assert "child trainer-a100-0" in reason and "8 pods of 8 GPUs of A100" in reason
    assert "no child starts until all can" in reason


def test_a_child_goes_to_a_cluster_of_several_gpu_models_and_its_share_names_its_model() -> None:
    # A cluster of H100 and A100 nodes outside any HyperNode: both models' leaves are named
    # after the cluster. A parted job names no model of its own, so its share carries its
    # child's: replayed by the job's (none), the H100 share came off the A100 leaf of the same
    # name and left the H100s free (the guard before this kept such a child out of the cluster).
    mixed = ClusterCapacity(
        "mixed",
        (
            Leaf("A100", (0,) * 8 + (10,), ("mixed",), node_gpus=8),
            Leaf("H100", (0,) * 8 + (10,), ("mixed",), node_gpus=8),
        ),
    )
    fleet = (mixed, cluster("west", "A100", 10))
    job = parted("hetero", child("trainer-h100-0", "H100"), child("trainer-a100-0", "A100"))
    plan = plan_round(RoundInput(NOW, fleet, waiting=(job,)), Policy.CPSAT)
    (start,) = plan.starts
    assert [(s.cluster, s.gpu_model) for s in start.shares] == [("mixed", "H100"), ("west", "A100")]
    # What the start leaves, as the round replays it (`free_pools.after`): the H100s taken.
    pools, _ = after(Snapshot(fleet, jobs=(job.request,)), plan.decision)
    left = {leaf.gpu_model: leaf.free_gpus for leaf in pools["mixed"].state().leaves}
    assert left == {"A100": 80, "H100": 16}


def test_a_child_that_names_no_model_goes_only_to_a_cluster_of_one_model() -> None:
    # Its member Job pins no model (a Kubernetes agent adds no node selector for its share's):
    # in a cluster of H100 and A100 nodes its pods could run on the GPUs its share does not hold.
    mixed = ClusterCapacity(
        "mixed",
        (
            Leaf("A100", (0,) * 8 + (10,), ("mixed",), node_gpus=8),
            Leaf("H100", (0,) * 8 + (10,), ("mixed",), node_gpus=8),
        ),
    )
    job = parted("hetero", child("any", None), child("trainer-a100-0", "A100"))  # type: ignore[arg-type]
    fleet = (mixed, cluster("west", "A100", 10))
    plan = plan_round(RoundInput(NOW, fleet, waiting=(job,)), Policy.CPSAT)
    (start,) = plan.starts
    assert [(s.cluster, s.gpu_model) for s in start.shares] == [("west", None), ("mixed", "A100")]

    plan = plan_round(RoundInput(NOW, (mixed,), waiting=(job,)), Policy.CPSAT)
    assert plan.starts == ()
    assert (
        "naming no GPU model, not in clusters of several (mixed)" in plan.outcomes["hetero"].reason
    )


def test_a_child_goes_only_where_its_cluster_names_allow() -> None:
    fleet = (*EAST_WEST, cluster("north", "A100", 10, used_nodes=0))
    job = parted(
        "hetero",
        child("h", "H100"),
        child("a", "A100", allowed_clusters=("north",)),
    )
    plan = plan_round(RoundInput(NOW, fleet, waiting=(job,)), Policy.CPSAT)
    (start,) = plan.starts
    assert [s.cluster for s in start.shares] == ["east", "north"]


def test_where_the_job_may_run_bounds_every_child() -> None:
    # Step 1b (data gravity) may narrow the job's clusters: an unpinned child keeps to them.
    fleet = (*EAST_WEST, cluster("north", "A100", 10))
    job = parted("hetero", child("h", "H100"), child("a", "A100"))
    narrowed = Waiting(replace(job.request, allowed_clusters=("east", "north")), job.submitted_at)
    (start,) = plan_round(RoundInput(NOW, fleet, waiting=(narrowed,)), Policy.CPSAT).starts
    assert [s.cluster for s in start.shares] == ["east", "north"]
    only_east = Waiting(replace(job.request, allowed_clusters=("east",)), job.submitted_at)
    plan = plan_round(RoundInput(NOW, fleet, waiting=(only_east,)), Policy.CPSAT)
    assert "child a: 8 pods of 8 GPUs of A100 whole in one cluster it may use (east)" in (
        plan.outcomes["hetero"].reason
    )


def test_adjacent_children_of_one_shape_share_a_cluster() -> None:
    # Two A100 children of 4 pods, then an H100 child of 2 pods x 4 GPUs: the A100 pair in one
    # share (adjacent, one shape), the H100 child in its own.
    fleet = (cluster("east", "H100", 2), cluster("west", "A100", 8))
    job = parted(
        "hetero",
        child("a-0", "A100", pods=4),
        child("a-1", "A100", pods=4),
        child("h-0", "H100", pods=2, per_pod=4),
    )
    plan = plan_round(RoundInput(NOW, fleet, waiting=(job,)), Policy.CPSAT)
    (start,) = plan.starts
    assert [(s.cluster, s.pods, s.gpus, s.units) for s in start.shares] == [
        ("west", 8, 64, 2),
        ("east", 2, 8, 1),
    ]


def test_a_cluster_once_left_is_not_returned_to() -> None:
    # H100, A100, H100: the two H100 children are not adjacent, and one cluster's share holds
    # a contiguous range of ranks: with only one H100 cluster the job cannot start.
    job = parted("hetero", child("h-0", "H100"), child("a-0", "A100"), child("h-1", "H100"))
    plan = plan_round(RoundInput(NOW, EAST_WEST, waiting=(job,)), Policy.CPSAT)
    assert plan.starts == ()
    assert "fit one by one but not together" in plan.outcomes["hetero"].reason
    more = (*EAST_WEST, cluster("south", "H100", 10))
    plan = plan_round(RoundInput(NOW, more, waiting=(job,)), Policy.CPSAT)
    (start,) = plan.starts
    assert [s.cluster for s in start.shares] == ["east", "west", "south"]


def test_communication_reserves_the_links_between_the_clusters_it_spans() -> None:
    job = parted("hetero", child("h", "H100"), child("a", "A100"), gbps=100.0)
    linked = RoundInput(NOW, EAST_WEST, links=(LinkState("east", "west", 400.0),), waiting=(job,))
    (start,) = plan_round(linked, Policy.CPSAT).starts
    assert [(r.a, r.b, r.gbps) for r in start.reservations] == [("east", "west", 100.0)]
    thin = RoundInput(NOW, EAST_WEST, links=(LinkState("east", "west", 50.0),), waiting=(job,))
    plan = plan_round(thin, Policy.CPSAT)
    assert plan.starts == ()
    assert "linked with 100 Gbps" in plan.outcomes["hetero"].reason
    unlinked = RoundInput(NOW, EAST_WEST, waiting=(job,))
    assert plan_round(unlinked, Policy.CPSAT).starts == ()


def test_window_jobs_are_placed_first_and_leave_the_rest() -> None:
    job = parted("hetero", child("h", "H100"), child("a", "A100"))
    # The gang takes 64 of west's 80 A100 GPUs; the A100 child then has no room.
    data = RoundInput(NOW, EAST_WEST, waiting=(job, gang("first", 64, "A100")))
    plan = plan_round(data, Policy.CPSAT)
    assert [d.job_id for d in plan.starts] == ["first"]
    assert "child a" in plan.outcomes["hetero"].reason


def test_a_search_that_runs_out_of_tries_says_so() -> None:
    # 40 children of one 8-GPU pod, 30 nodes in three H100 clusters: each fits alone, not all,
    # and the ways to cut 40 children in three runs are more than the tries.
    fleet = tuple(cluster(name, "H100", 10) for name in ("east", "south", "north"))
    job = parted("hetero", *(child(f"h-{i}", "H100", pods=1) for i in range(40)))
    plan = plan_round(RoundInput(NOW, fleet, waiting=(job,)), Policy.CPSAT)
    assert plan.starts == ()
    assert f"within {MAX_TRIES} tries" in plan.outcomes["hetero"].reason
    # A child that fits nowhere is named at once, however many come before it.
    job = parted("hetero", *(child(f"h-{i}", "H100", pods=1) for i in range(5)), child("x", "B200"))
    plan = plan_round(RoundInput(NOW, fleet, waiting=(job,)), Policy.CPSAT)
    assert "child x" in plan.outcomes["hetero"].reason


def test_a_child_leaves_a_reservation_its_room_and_the_queue_its_quota() -> None:
    # A hold on west's A100 GPUs from 600 s on: a job that may still run then (no estimate)
    # takes only the hold's spare; one expected to end before it may use them.
    held = Hold("big", 600.0, gpus={("west", "A100"): 80}, spare={("west", "A100"): 0})
    job = parted("hetero", child("h", "H100"), child("a", "A100")).request

    def room(quota: dict[str, int] | None = None) -> Room:
        return Room(pools_of(EAST_WEST), {}, HoldBook([held]), dict(quota or {}))

    (waits,) = place_parted([job], room())
    assert not waits.admitted and "child a" in waits.reason
    (starts,) = place_parted([replace(job, estimate_s=300.0)], room())
    assert starts.admitted
    (capped,) = place_parted([replace(job, estimate_s=300.0)], room({"default": 100}))
    assert not capped.admitted
    assert capped.reason == "queue default may take 100 more GPUs now; it needs 128"
