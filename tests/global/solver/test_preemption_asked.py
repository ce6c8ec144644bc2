"""Step 7 answers a question once between two evictions (`free_pools.Asked`): a trial placement
or an expected wait is given again to a preemptor of the same shape only when the answer read
no link, and never after an eviction changed the pools. Each test fails if that is not so."""

from __future__ import annotations

from dataclasses import replace

from tests.preemption_rounds import round_of
from volcano_global.solver import ClusterCapacity, Decision, JobDecision, Leaf, Policy, Snapshot
from volcano_global.solver.baselines import place_greedily, placed_reading_links
from volcano_global.solver.free_pools import Asked, FreePools, with_links_of
from volcano_global.solver.model import JobRequest, LinkState, RunningJob
from volcano_global.solver.packing import pools_of
from volcano_global.solver.preemption import PREEMPT, Rules, expected_wait, preempt

ANY_WAIT = Rules(min_run_s=0.0, wait_weight=None)


def leaf(name: str, free: int, busy: int) -> Leaf:
    """A leaf of 8-GPU H100 nodes, `free` of them idle and `busy` fully taken."""
    hist = [0] * 9
    hist[0], hist[8] = busy, free
    return Leaf("H100", tuple(hist), (name, f"{name}-spine"), node_gpus=8)


def on(job_id: str, *where: tuple[str, int], lost_s: float, ends_s: float = 3600.0) -> RunningJob:
    """A running job with `pods` 8-GPU pods on each (cluster, pods), its cluster's leaf `-t0`."""
    return RunningJob(
        job_id,
        tuple((c, "H100", 8 * n) for c, n in where),
        ends_in_s=ends_s,
        run_s=lost_s,
        lost_s=lost_s,
        pods=tuple((c, f"{c}-t0", "", n, 8) for c, n in where),
    )


def gang(job_id: str, *, allreduce: float = 0.0, splittable: bool = False) -> JobRequest:
    """Two 8-GPU pods: one unit whole in a cluster, or (splittable) one pod per cluster."""
    return JobRequest(
        job_id,
        pods=2,
        gpus_per_pod=8,
        gpu_model="H100",
        unit_pods=1 if splittable else 2,
        priority=10,
        splittable=splittable,
        max_clusters=2 if splittable else 1,
        allreduce_gbps=allreduce,
        may_evict_for=frozenset({PREEMPT}),
    )


def round_with(
    clusters: tuple[ClusterCapacity, ...],
    links: tuple[LinkState, ...],
    jobs: tuple[JobRequest, ...],
    running: tuple[RunningJob, ...],
) -> tuple[Snapshot, Decision]:
    decision = Decision(Policy.GREEDY, "FEASIBLE", tuple(JobDecision(j.id, False) for j in jobs))
    return Snapshot(clusters, links, jobs, (), running), decision


def evicted(snapshot: Snapshot, decision: Decision) -> list[tuple[str, list[str], list[str]]]:
    return [
        (e.preemptor, [v.id for v in e.victims], [s.cluster for s in e.placement.shares])
        for e in preempt(snapshot, decision, rules=ANY_WAIT)
    ]


def test_a_split_that_read_the_links_is_weighed_again_for_the_next_preemptor() -> None:
    """`heavy` and `light` have one shape; only a split over c0 and c1 with both victims holds
    them, and the link carries `light`'s all-reduce, not `heavy`'s. `heavy` finds no set;
    `light` must still find r0 and r1 (had `heavy`'s answer been kept, it would find none)."""
    clusters = (
        ClusterCapacity("c0", (leaf("c0-t0", 0, 1),)),
        ClusterCapacity("c1", (leaf("c1-t0", 0, 1),)),
    )
    links = (LinkState("c0", "c1", 100.0),)
    running = (on("r0", ("c0", 1), lost_s=600.0), on("r1", ("c1", 1), lost_s=900.0))
    heavy = gang("heavy", allreduce=1000.0, splittable=True)
    light = gang("light", allreduce=10.0, splittable=True)
    both = evicted(*round_with(clusters, links, (heavy, light), running))
    alone = evicted(*round_with(clusters, links, (light,), running))
    assert both == alone == [("light", ["r0", "r1"], ["c0", "c1"])]


def test_an_eviction_forgets_what_was_asked_before_it() -> None:
    """`first` evicts r2 and takes c0's idle node with r2's. Before that it had asked where it
    would go with r0 gone (c0: the idle node and r0's there); `second`, of the same shape,
    asks the same after the eviction: c0 no longer holds it, so it evicts r1 in c1 (had the
    answer been kept, it would evict r0 onto GPUs `first` took)."""
    clusters = (
        ClusterCapacity("c0", (leaf("c0-t0", 1, 2),)),
        ClusterCapacity("c1", (leaf("c1-t0", 0, 2),)),
        ClusterCapacity("c2", (leaf("c2-t0", 0, 1),)),
    )
    running = (
        on("r0", ("c0", 1), ("c2", 1), lost_s=1000.0),
        on("r1", ("c1", 2), lost_s=5000.0),
        on("r2", ("c0", 1), lost_s=100.0),
    )
    first, second = gang("first"), gang("second")
    got = evicted(*round_with(clusters, (), (first, second), running))
    assert got == [("first", ["r2"], ["c0"]), ("second", ["r1"], ["c1"])]


def test_a_wait_that_read_the_links_is_worked_out_again() -> None:
    """Once r0 and r1 end, `light` fits split over c0 and c1 (200 s) and `heavy` not before
    r2 ends in c2 (1,000 s): `light`'s wait asked after `heavy`'s is its own."""
    clusters = (
        ClusterCapacity("c0", (leaf("c0-t0", 0, 1),)),
        ClusterCapacity("c1", (leaf("c1-t0", 0, 1),)),
        ClusterCapacity("c2", (leaf("c2-t0", 0, 2),)),
    )
    links = {("c0", "c1"): 100.0}
    running = [
        on("r0", ("c0", 1), lost_s=600.0, ends_s=100.0),
        on("r1", ("c1", 1), lost_s=600.0, ends_s=200.0),
        on("r2", ("c2", 2), lost_s=600.0, ends_s=1000.0),
    ]
    heavy = gang("heavy", allreduce=1000.0, splittable=True)
    light = gang("light", allreduce=10.0, splittable=True)
    free, asked = FreePools(clusters), Asked()
    assert expected_wait(heavy, running, free, links, asked) == 1000.0
    assert expected_wait(light, running, free, links, asked) == 200.0
    assert expected_wait(light, running, FreePools(clusters), links) == 200.0


def test_an_answer_that_read_no_link_is_the_same_for_any_all_reduce_and_links() -> None:
    """The premise of answering once: on random rounds, with each running job gone in turn,
    `placed_reading_links` answers what `place_greedily` does, and an answer that read no link
    is the same with the job's all-reduce and the links changed (a split not ruled out by
    the clusters' units alone, `splitting.may_split`, always counts as read)."""
    kept = 0
    for seed in range(300):
        snapshot, _, _, _ = round_of(seed)
        links = {x.key: x.free_gbps for x in snapshot.links}
        for job in snapshot.jobs:
            for victims in ((), *((r,) for r in snapshot.running)):
                free = FreePools(snapshot.clusters, pools_of(snapshot.clusters))
                free.give_back(victims, free.usable(job))
                more = with_links_of(links, victims)
                mark = free.mark()
                placed, reads = placed_reading_links(job, free.pools, more)
                free.rollback(mark)
                assert placed == place_greedily(job, free.pools, more), seed
                free.rollback(mark)
                if reads:
                    continue
                kept += 1
                other = replace(job, allreduce_gbps=1e6)
                again, _ = placed_reading_links(other, free.pools, {})
                free.rollback(mark)
                assert (again is None) == (placed is None), seed
                if placed is not None and again is not None:
                    assert again.shares == placed.shares and not again.reservations, seed
    assert kept > 1000
