"""`solver.round_plan.plan_round` by hand: one round from a hand-built input, and the typed
outcome it gives every waiting job (started, waiting with when room comes and whose end
that is, preempting, will preempt once the victims have run the minimum, set aside), growth
and shrinks as typed fields, and a shrink that suffices before an eviction."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from volcano_global.solver import (
    ClusterCapacity,
    JobDecision,
    JobRequest,
    Leaf,
    LinkBandwidth,
    LinkState,
    Policy,
    RunningJob,
    planning,
)
from volcano_global.solver.fair_share import QueueNode
from volcano_global.solver.preemption import PREEMPT, RECLAIM, Rules
from volcano_global.solver.round_data import _after
from volcano_global.solver.round_plan import (
    RoundInput,
    RoundOptions,
    Status,
    Waiting,
    order,
    plan_round,
    window,
)

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
HOUR = 3600.0
EVICTS = frozenset({PREEMPT, RECLAIM})


def cluster(name: str, free_nodes: int, used_nodes: int) -> ClusterCapacity:
    """8-GPU H100 nodes under one leaf domain named after the cluster."""
    hist = (used_nodes,) + (0,) * 7 + (free_nodes,)
    return ClusterCapacity(name, (Leaf("H100", hist, (name,), node_gpus=8),))


def gang(job_id: str, gpus: int, *, priority: int = 0, evicts: bool = False) -> Waiting:
    request = JobRequest(
        job_id,
        pods=gpus // 8,
        gpus_per_pod=8,
        gpu_model="H100",
        priority=priority,
        may_evict_for=EVICTS if evicts else frozenset(),
    )
    return Waiting(request, NOW - timedelta(minutes=5))


def running(job_id: str, gpus: int, *, ends_in_s: float, run_s: float = HOUR) -> RunningJob:
    return RunningJob(
        job_id,
        (("a", "H100", gpus),),
        ends_in_s=ends_in_s,
        run_s=run_s,
        lost_s=run_s,
        pods=(("a", "a", "", gpus // 8, 8),),
        name=f"ml/{job_id}",
    )


def test_a_job_that_fits_starts_and_one_that_does_not_is_told_when_and_for_whom() -> None:
    data = RoundInput(
        NOW,
        (cluster("a", 2, 6),),
        waiting=(gang("small", 16), gang("big", 32)),
        running=(running("r1", 16, ends_in_s=600.0), running("r2", 32, ends_in_s=1800.0)),
    )
    plan = plan_round(data, Policy.BACKFILL)
    assert [d.job_id for d in plan.starts] == ["small"]
    started, big = plan.outcomes["small"], plan.outcomes["big"]
    assert started.status is Status.STARTED and started.reason == "placed: 2 pods in a"
    assert big.status in (Status.WAITING, Status.RESERVED)
    # 16 GPUs free after r1 ends; 32 only when r2 ends too, in 1,800 s.
    assert big.at == NOW + timedelta(seconds=1800)
    assert "room expected in about 1,800 s, when ml/r2 is expected to end" in big.reason


def test_a_job_held_back_by_the_minimum_run_says_whom_it_will_preempt_and_when() -> None:
    """The issue's symptom: a high-priority job that will preempt as soon as its victim has
    run `min_run_s` was told only that no cluster had room."""
    data = RoundInput(
        NOW,
        (cluster("a", 0, 4),),
        waiting=(gang("vip", 32, priority=10, evicts=True),),
        running=(running("low", 32, ends_in_s=10 * HOUR, run_s=100.0),),
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(preemption=Rules(min_run_s=600.0)))
    assert plan.evictions == ()
    vip = plan.outcomes["vip"]
    assert vip.status is Status.WILL_PREEMPT and vip.victims == ("ml/low",)
    assert vip.at == NOW + timedelta(seconds=500)
    assert "will preempt ml/low once it has run 600 s: in about 500 s" in vip.reason
    # Once it has run the minimum, the same round evicts it.
    older = replace(data, running=(running("low", 32, ends_in_s=10 * HOUR, run_s=700.0),))
    plan = plan_round(older, Policy.CPSAT, RoundOptions(preemption=Rules(min_run_s=600.0)))
    (eviction,) = plan.evictions
    assert eviction.preemptor == "vip" and [v.id for v in eviction.victims] == ["low"]
    assert plan.outcomes["vip"].status is Status.PREEMPTING


def elastic(width: int, *, since_s: float) -> planning.ElasticRun:
    """A running elastic job of 4 replicas of one 8-GPU pod, at least 2, in cluster a."""
    request = JobRequest(
        "elastic", pods=4, gpus_per_pod=8, gpu_model="H100", unit_pods=1, min_units=2
    )
    return planning.ElasticRun(
        request,
        (("a", width),),
        estimate_s=HOUR,
        since_s=since_s,
        domains=(("a", (("a", width),)),),
    )


def test_a_shrink_that_suffices_comes_before_an_eviction() -> None:
    """The issue's second symptom: an elastic job grown to its full width just now, and a
    16-GPU job of a higher priority with no minimum run time: it gives back two replicas
    (it is not evicted whole, which spends a retry and its place in the queue)."""
    run = elastic(4, since_s=10.0)
    grown = RunningJob(
        "elastic",
        (("a", "H100", 32),),
        ends_in_s=HOUR,
        run_s=10.0,
        lost_s=10.0,
        pods=(("a", "a", "", 4, 8),),
    )
    data = RoundInput(
        NOW,
        (cluster("a", 0, 4),),
        waiting=(gang("vip", 16, priority=10, evicts=True),),
        running=(grown,),
        elastic=(run,),
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(preemption=Rules(min_run_s=0.0)))
    assert plan.evictions == ()
    assert plan.shrinks == (planning.Shrink("elastic", "a", 2, "vip"),)
    assert [d.job_id for d in plan.starts] == ["vip"]


def test_growth_is_a_typed_field_not_a_waiting_job() -> None:
    data = RoundInput(NOW, (cluster("a", 2, 2),), elastic=(elastic(2, since_s=HOUR),))
    plan = plan_round(data, Policy.CPSAT)
    (grow,) = plan.grows
    assert grow.job_id == "elastic" and sum(s.units for s in grow.decision.shares) == 2
    assert plan.starts == () and plan.outcomes == {} and plan.waiting == 0
    # Not a planned policy: no growth.
    assert plan_round(data, Policy.FIRST_FIT).grows == ()


def test_a_job_set_aside_is_told_why() -> None:
    data = RoundInput(NOW, (cluster("a", 2, 2),), set_aside={"odd": "cannot be placed yet: x"})
    plan = plan_round(data, Policy.GREEDY)
    assert plan.outcomes["odd"].status is Status.SET_ASIDE
    assert plan.outcomes["odd"].reason == "cannot be placed yet: x"


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.FIRST_FIT])
def test_the_window_is_the_prefix_of_the_order(policy: Policy) -> None:
    """The server reads only the window's jobs in full; the order of a window is the first
    part of the order of all (fair share is prefix-stable)."""
    tree = {q: QueueNode(q, weight=w, held=h) for q, w, h in (("x", 1, 64), ("y", 2, 0))}
    jobs = tuple(
        Waiting(
            replace(gang(f"{q}{i}", 8 * (1 + i % 3)).request, queue=q),
            NOW - timedelta(seconds=100 - i),
        )
        for q in ("x", "y")
        for i in range(12)
    )
    data = RoundInput(NOW, (cluster("a", 2, 2),), waiting=jobs, tree=tree)
    every = [r.id for r in order(data, policy, RoundOptions())]
    first = window(data, policy, RoundOptions(), 7)
    assert first == every[:7]
    part = replace(data, waiting=tuple(w for w in jobs if w.request.id in first))
    assert [r.id for r in order(part, policy, RoundOptions())] == first


def test_growth_is_checked_against_the_links_the_rounds_starts_reserve() -> None:
    """Step 6 sees the links as the round's starts leave them: a split started this round
    holds its bandwidth before an elastic job may grow into a new cluster over the same link."""
    links = (LinkState("a", "b", 100.0, 10.0),)
    split = JobDecision("split", True, reservations=(LinkBandwidth("b", "a", 60.0),))
    (after,) = _after(links, (split, JobDecision("whole", True)))
    assert after.reserved_gbps == 70.0 and after.free_gbps == 30.0
