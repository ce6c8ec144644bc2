"""`solver.preemption` by hand: who may evict whom, which victims, how many per round."""

from __future__ import annotations

from dataclasses import replace

from volcano_global.solver import ClusterCapacity, Decision, JobDecision, Leaf, Policy, Snapshot
from volcano_global.solver.free_pools import FreePools
from volcano_global.solver.model import JobRequest, LinkBandwidth, LinkState, RunningJob
from volcano_global.solver.packing import pools_of
from volcano_global.solver.preemption import (
    PREEMPT,
    RECLAIM,
    Rules,
    Standing,
    expected_wait,
    preempt,
)

HOUR = 3600.0


def full(name: str, nodes: int = 8) -> ClusterCapacity:
    """A cluster of `nodes` 8-GPU H100 nodes, every GPU taken."""
    return ClusterCapacity(name, (Leaf("H100", (nodes,) + (0,) * 8, node_gpus=8),))


def running(
    job_id: str,
    cluster: str,
    gpus: int,
    *,
    priority: int = 0,
    ran_h: float = 1.0,
    ends_h: float = 4.0,
    queue: str = "default",
    preemptable: bool = True,
) -> RunningJob:
    """Expected to end in `ends_h` hours: by default late enough that waiting for it costs
    a preemptor more than any victim here loses (step 5 of the rule holds)."""
    return RunningJob(
        job_id,
        ((cluster, "H100", gpus),),
        ends_in_s=ends_h * HOUR,
        priority=priority,
        queue=queue,
        preemptable=preemptable,
        run_s=ran_h * HOUR,
        lost_s=ran_h * HOUR,
        pods=((cluster, cluster, "", gpus // 8, 8),),
    )


def waiting(gpus: int, *, priority: int = 10, **kw: object) -> JobRequest:
    fields = {"may_evict_for": frozenset({PREEMPT, RECLAIM}), "gpu_model": "H100", **kw}
    return JobRequest("p", pods=gpus // 8, gpus_per_pod=8, priority=priority, **fields)  # type: ignore[arg-type]


def evict(job: JobRequest, run: list[RunningJob], clusters=("a",), links=(), **kw):  # type: ignore[no-untyped-def]
    snap = Snapshot(
        clusters=tuple(full(c) for c in clusters), links=links, jobs=(job,), running=tuple(run)
    )
    pending = Decision(Policy.GREEDY, "FEASIBLE", (JobDecision(job.id, False),))
    return preempt(snap, pending, **kw)


def ids(evictions) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [[v.id for v in e.victims] for e in evictions]


def test_the_lowest_priority_then_the_least_work_lost_is_evicted() -> None:
    run = [
        running("old", "a", 32, ran_h=2.0),  # 64 GPU-hours lost
        running("young", "a", 32, ran_h=1.0),  # 32 GPU-hours lost
    ]
    (e,) = evict(waiting(32), run)
    assert [v.id for v in e.victims] == ["young"]
    assert e.kind == PREEMPT and e.placement.shares[0].cluster == "a"
    assert "32 GPUs, 32.0 GPU-hours lost" in e.reason and "young (priority 0" in e.reason
    assert "4.0 h expected, 128.0 GPU-hours" in e.reason  # 32 GPUs x 4 h
    # A 64-GPU preemptor needs both.
    assert ids(evict(waiting(64), run)) == [["young", "old"]]
    # Priority before work: a priority-1 job that lost less is taken after the priority-0 one.
    run = [running("p1", "a", 32, priority=1, ran_h=0.2), running("p0", "a", 32, ran_h=3.0)]
    assert ids(evict(waiting(32), run)) == [["p0"]]


def test_the_restore_of_a_checkpoint_counts_in_what_an_eviction_loses() -> None:
    # "young" lost less work, but its 2-hour checkpoint restore makes it the costlier victim.
    run = [
        running("old", "a", 32, ran_h=2.0),  # 64 GPU-hours lost
        replace(running("young", "a", 32, ran_h=1.0), restore_s=2 * HOUR),  # 32 + 64
    ]
    (e,) = evict(waiting(32), run)
    assert [v.id for v in e.victims] == ["old"]


def test_a_victim_not_needed_is_spared() -> None:
    # x (priority 0, 8 GPUs in a) comes first but a 64-GPU gang fits only once y (priority 1,
    # all of b) is gone; then x is not needed.
    run = [running("x", "a", 8), running("y", "b", 64, priority=1)]
    (e,) = evict(waiting(64), run, clusters=("a", "b"))
    assert [v.id for v in e.victims] == ["y"]
    assert e.placement.shares[0].cluster == "b"


def test_never_the_unpreemptable_nor_the_same_or_higher_priority_nor_for_never() -> None:
    assert evict(waiting(32), [running("x", "a", 64, preemptable=False)]) == []
    assert evict(waiting(32, priority=0), [running("x", "a", 64)]) == []
    assert evict(waiting(32, may_evict_for=frozenset()), [running("x", "a", 64)]) == []


def test_a_job_runs_its_minimum_time_before_it_may_be_evicted() -> None:
    young = running("x", "a", 64, ran_h=0.1)
    assert evict(waiting(32), [young], rules=Rules(min_run_s=600)) == []
    assert ids(evict(waiting(32), [young], rules=Rules(min_run_s=300))) == [["x"]]


def test_the_cap_per_round() -> None:
    run = [running("x", "a", 32), running("y", "a", 32)]
    assert evict(waiting(64), run, rules=Rules(max_jobs=1)) == []
    assert evict(waiting(64), run, rules=Rules(max_gpus=32)) == []
    assert ids(evict(waiting(64), run, rules=Rules(max_jobs=2, max_gpus=64))) == [["x", "y"]]


def test_a_split_preemptor_evicts_in_two_clusters_when_the_link_carries_it() -> None:
    job = waiting(128, splittable=True, max_clusters=2, unit_pods=1)
    run = [running("x", "a", 64), running("y", "b", 64, ran_h=2.0)]
    link = (LinkState("a", "b", 800.0),)
    (e,) = evict(job, run, clusters=("a", "b"), links=link)
    assert [v.id for v in e.victims] == ["x", "y"]
    assert sorted(s.cluster for s in e.placement.shares) == ["a", "b"]
    # No link between them: no link-safe split, nobody evicted.
    heavy = replace(job, allreduce_gbps=400.0)
    assert evict(heavy, run, clusters=("a", "b"), links=()) == []


def test_a_victims_link_bandwidth_is_freed_with_it() -> None:
    job = waiting(128, splittable=True, max_clusters=2, unit_pods=1, allreduce_gbps=400.0)
    hog = replace(
        running("x", "a", 64),
        gpus=(("a", "H100", 32), ("b", "H100", 32)),
        links=(LinkBandwidth("a", "b", 700.0),),
        pods=(("a", "a", "", 4, 8), ("b", "b", "", 4, 8)),
    )
    other = [running("y", "a", 32, ran_h=2.0), running("z", "b", 32, ran_h=2.0)]
    link = (LinkState("a", "b", 800.0, reserved_gbps=700.0),)
    (e,) = evict(job, [hog, *other], clusters=("a", "b"), links=link)
    assert {v.id for v in e.victims} == {"x", "y", "z"}


def test_not_pending_for_capacity_no_eviction() -> None:
    roomy = ClusterCapacity("a", (Leaf("H100", (0,) * 8 + (8,), node_gpus=8),))
    job = waiting(32)
    snap = Snapshot(clusters=(roomy,), jobs=(job,), running=(running("x", "a", 64),))
    pending = Decision(Policy.GREEDY, "FEASIBLE", (JobDecision(job.id, False),))
    assert preempt(snap, pending) == []


def test_reclaim_from_a_queue_above_its_deserved_share() -> None:
    job = waiting(64, priority=0, queue="q1")
    snap_run = [running("x", "a", 64, queue="q2"), running("y", "b", 64, queue="q2", ran_h=2.0)]
    clusters = ("a", "b")
    standing = {"q1": Standing(0, 64), "q2": Standing(128, 64)}
    (e,) = evict(job, snap_run, clusters=clusters, queues=standing)
    assert e.kind == RECLAIM and [v.id for v in e.victims] == ["x"]
    # Not reclaimable, or the victim's queue would drop below its deserved share: none.
    closed = {**standing, "q2": Standing(128, 64, reclaimable=False)}
    assert evict(job, snap_run, clusters=clusters, queues=closed) == []
    tight = {**standing, "q2": Standing(128, 96)}
    assert evict(job, snap_run, clusters=clusters, queues=tight) == []
    # The reclaiming queue already has what it deserves: none.
    assert (
        evict(job, snap_run, clusters=clusters, queues={**standing, "q1": Standing(32, 64)}) == []
    )


def test_two_preemptors_of_a_round_do_not_count_on_the_same_gpus() -> None:
    first, second = waiting(32), replace(waiting(32, priority=9), id="q")
    run = [running("x", "a", 32), running("y", "a", 32, ran_h=2.0)]
    snap = Snapshot(clusters=(full("a"),), jobs=(first, second), running=tuple(run))
    pending = Decision(
        Policy.GREEDY, "FEASIBLE", (JobDecision("p", False), JobDecision("q", False))
    )
    done = preempt(snap, pending)
    assert [(e.preemptor, [v.id for v in e.victims]) for e in done] == [
        ("p", ["x"]),
        ("q", ["y"]),
    ]
    # With a cap of one job a round, only the first.
    assert [e.preemptor for e in preempt(snap, pending, rules=Rules(max_jobs=1))] == ["p"]


def test_a_clusters_own_victims_when_the_fleet_wide_order_scatters() -> None:
    # In fleet-wide order x1 (32 GPU-h, in a), y1 (35.2, in b), y2 (38.4, b), x2 (96, a). With
    # a cap of two victims the fleet-wide order stops at x1 + y1, which free 32 GPUs in each
    # cluster: no fit. b's own candidates, y1 + y2, free all of b (73.6 GPU-hours lost); a's,
    # x1 + x2, would lose 128.
    run = [
        running("x1", "a", 32, ran_h=1.0),
        running("y1", "b", 32, ran_h=1.1),
        running("y2", "b", 32, ran_h=1.2),
        running("x2", "a", 32, ran_h=3.0),
    ]
    (e,) = evict(waiting(64), run, clusters=("a", "b"), rules=Rules(max_jobs=2))
    assert [v.id for v in e.victims] == ["y1", "y2"]
    assert "73.6 GPU-hours lost" in e.reason


def test_the_cap_on_work_lost_per_round() -> None:
    run = [running("x", "a", 64, ran_h=2.0)]  # 128 GPU-hours lost
    assert evict(waiting(64), run, rules=Rules(max_lost_gpu_hours=100)) == []
    assert ids(evict(waiting(64), run, rules=Rules(max_lost_gpu_hours=128))) == [["x"]]


def test_no_eviction_when_waiting_costs_less_than_the_work_lost() -> None:
    # x (64 GPUs) ran 2 h: evicting it loses 128 GPU-hours. Expected to end in 0.5 h, waiting
    # costs the 64-GPU preemptor 32 GPU-hours: it waits. Ending in 3 h (192): it evicts.
    soon = running("x", "a", 64, ran_h=2.0, ends_h=0.5)
    assert evict(waiting(64), [soon]) == []
    assert ids(evict(waiting(64), [replace(soon, ends_in_s=3 * HOUR)])) == [["x"]]
    # Exactly even (2 h: 128 against 128) evicts; a weight of 0.5 halves what waiting costs.
    even = replace(soon, ends_in_s=2 * HOUR)
    assert ids(evict(waiting(64), [even])) == [["x"]]
    assert evict(waiting(64), [even], rules=Rules(wait_weight=0.5)) == []
    # Without the test (None), the old rule: evict whenever a set is found.
    assert ids(evict(waiting(64), [soon], rules=Rules(wait_weight=None))) == [["x"]]


def test_the_wait_is_until_running_work_makes_room_not_until_the_victims_end() -> None:
    # y is the cheaper victim (0.5 h run: 16 GPU-hours) but x, which will not be evicted
    # (2 h run: 64), ends in 0.25 h and frees 32 GPUs: a 32-GPU preemptor would wait 0.25 h,
    # 8 GPU-hours < 16: it waits. Were x to end in 1 h (32 GPU-hours), y would be evicted.
    x = running("x", "a", 32, ran_h=2.0, ends_h=0.25)
    y = running("y", "a", 32, ran_h=0.5, ends_h=3.0)
    assert evict(waiting(32), [x, y]) == []
    assert ids(evict(waiting(32), [replace(x, ends_in_s=HOUR), y])) == [["y"]]
    # A 64-GPU preemptor needs both gone: 3 h x 64 = 192 GPU-hours against 80 lost.
    assert ids(evict(waiting(64), [x, y])) == [["y", "x"]]
    # Work of any priority counts towards the room, unevictable work too: z (priority 20,
    # above the preemptor's) ends in 0.1 h, so the 32-GPU preemptor waits rather than evict y.
    z = running("z", "a", 32, priority=20, ends_h=0.1)
    assert evict(waiting(32), [z, replace(y, ends_in_s=3 * HOUR)]) == []


def test_the_expected_wait_is_the_end_after_which_the_job_fits() -> None:
    # Eight one-node jobs fill a; r7 ends first (1 h), r0 last (8 h). A 4-node gang fits once
    # the four earliest (r7, r6, r5, r4) ended: 4 h; an 8-node gang at 8 h; a 9-node never.
    run = [running(f"r{i}", "a", 8, ends_h=8.0 - i) for i in range(8)]
    state = FreePools((full("a"),))
    assert expected_wait(waiting(32), run, state, {}) == 4 * HOUR
    assert expected_wait(waiting(64), run, state, {}) == 8 * HOUR
    assert expected_wait(waiting(72), run, state, {}) == float("inf")
    # A job ending sooner in another cluster frees nothing the gang can use.
    other = [running("b0", "b", 8, ends_h=0.1)]
    assert expected_wait(waiting(32), other + run, state, {}) == 4 * HOUR


def test_the_round_s_own_pools_are_used_and_carry_the_preemptors_placement() -> None:
    # plan_round hands step 7 the pools step 5b left (no second build of a fleet's pools):
    # the same evictions as on pools built from the snapshot, and the preemptor's GPUs taken
    # from the pools handed.
    run = [running("old", "a", 32, ran_h=2.0), running("young", "a", 32, ran_h=1.0)]
    built = evict(waiting(32), run)
    pools = pools_of((full("a"),))
    handed = evict(waiting(32), run, pools=pools)
    assert ids(handed) == ids(built) == [["young"]]
    assert handed[0].placement == built[0].placement
    assert pools["a"].free_gpus("H100") == 0  # young's 32 GPUs given back, then taken by p
    assert pools["a"].mark() > 0
