"""Every waiting job considered (`solver.whole_queue`, steps 1d and 5b of `plan_round`), by
hand: a window of one job, one cluster of eight 8-GPU nodes, and jobs beyond the window that
fit, fit only by delaying the reservation ahead of them, or do not fit at all."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from volcano_global.solver import (
    ClusterCapacity,
    JobRequest,
    Leaf,
    Policy,
    RunningJob,
    SolveOptions,
)
from volcano_global.solver.fair_share import QueueNode
from volcano_global.solver.preemption import PREEMPT, RECLAIM, Rules
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Status, Waiting, plan_round
from volcano_global.solver.whole_queue import assign

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
HOUR = 3600.0
WINDOW_OF_ONE = RoundOptions(solve=SolveOptions(window=1))


def cluster(name: str, free_nodes: int, used_nodes: int) -> ClusterCapacity:
    hist = (used_nodes,) + (0,) * 7 + (free_nodes,)
    return ClusterCapacity(name, (Leaf("H100", hist, (name,), node_gpus=8),))


def job(
    job_id: str, gpus: int, *, waited_s: float = 300.0, estimate_s: float | None = None
) -> Waiting:
    request = JobRequest(job_id, pods=gpus // 8, gpus_per_pod=8, gpu_model="H100")
    return Waiting(request, NOW - timedelta(seconds=waited_s), estimate_s)


def running(job_id: str, gpus: int, *, ends_in_s: float) -> RunningJob:
    return RunningJob(
        job_id, (("a", "H100", gpus),), ends_in_s=ends_in_s, run_s=HOUR, name=f"ml/{job_id}"
    )


def gang_ahead(*beyond: Waiting) -> RoundInput:
    """A 48-GPU gang that has waited 2 h (owed a reservation) heads the line; 32 GPUs are
    free in cluster a and 16 more when ml/r1 ends in an hour: the gang's hold."""
    return RoundInput(
        NOW,
        (cluster("a", 4, 4),),
        waiting=(job("gang", 48, waited_s=2 * HOUR), *beyond),
        running=(running("r1", 16, ends_in_s=HOUR), running("r2", 16, ends_in_s=10 * HOUR)),
    )


def test_a_short_job_beyond_the_window_backfills_and_the_reservation_ahead_stays() -> None:
    data = gang_ahead(job("short", 16, estimate_s=600.0), job("long", 16, estimate_s=5 * HOUR))
    plan = plan_round(data, Policy.CPSAT, WINDOW_OF_ONE)
    alone = plan_round(replace(data, waiting=data.waiting[:1]), Policy.CPSAT, WINDOW_OF_ONE)
    # The gang keeps the same reservation as in a round that saw only it.
    assert plan.outcomes["gang"] == alone.outcomes["gang"]
    assert plan.outcomes["gang"].status is Status.RESERVED
    assert plan.decision.reserved == alone.decision.reserved
    # The short job ends before the hold starts: it starts now, whole, beyond the window.
    assert [d.job_id for d in plan.starts] == ["short"]
    assert plan.outcomes["short"].status is Status.STARTED
    # The long one would still run when the gang's GPUs are due: it waits, and says so.
    long = plan.outcomes["long"]
    assert long.status is Status.WAITING
    assert long.reason == (
        "waits for the reservation ahead of it: the GPUs free in a are held for gang, and it "
        "may still run when they are due"
    )
    # Before step 5b neither was considered.
    before = plan_round(data, Policy.CPSAT, replace(WINDOW_OF_ONE, whole_queue=False))
    assert before.starts == ()
    assert "outside this round's window" in before.outcomes["short"].reason


def test_a_job_beyond_the_window_that_does_not_fit_waits_with_the_reason() -> None:
    data = gang_ahead(job("huge", 128), job("short", 16, estimate_s=600.0))
    plan = plan_round(data, Policy.CPSAT, WINDOW_OF_ONE)
    huge = plan.outcomes["huge"]
    assert huge.status is Status.WAITING
    assert huge.reason == (
        "no room now: no cluster it may use has 16 pods of 8 GPUs of H100 free for it whole, "
        "after the jobs ahead of it in line"
    )
    # The short job went first (least expected service first) and still backfills.
    assert plan.outcomes["short"].status is Status.STARTED
    assert len(plan.outcomes) == 3  # every waiting job has an outcome


def test_the_windows_decisions_are_unchanged_when_nothing_fits_beyond_it() -> None:
    data = RoundInput(
        NOW,
        (cluster("a", 4, 4), cluster("b", 2, 6)),
        waiting=(job("first", 24), job("too-big", 64), job("also", 32)),
    )
    window = replace(data, waiting=data.waiting[:1])
    plan = plan_round(data, Policy.CPSAT, WINDOW_OF_ONE)
    alone = plan_round(window, Policy.CPSAT, WINDOW_OF_ONE)
    assert plan.starts == alone.starts and [d.job_id for d in plan.starts] == ["first"]
    assert plan.decision.objective == alone.decision.objective
    assert plan.decision.bound == alone.decision.bound
    assert {k: o.status for k, o in plan.outcomes.items()} == {
        "first": Status.STARTED,
        "too-big": Status.WAITING,
        "also": Status.WAITING,
    }
    # 64 GPUs fit no cluster even before the round; 32 fit in a (32 free) before "first"
    # took 24 of them, and then nowhere (8 left in a, 16 in b).
    assert plan.outcomes["too-big"].reason.startswith("no room now: ")
    assert plan.outcomes["also"].reason == (
        "no room after the round's starts: no cluster it may use holds its 32 GPUs whole "
        "(at the round's start a had room for it)"
    )


def test_a_round_backfills_at_most_its_limit_and_tells_the_rest() -> None:
    data = RoundInput(NOW, (cluster("a", 8, 0),), waiting=tuple(job(f"j{i}", 8) for i in range(4)))
    options = RoundOptions(solve=SolveOptions(window=1), backfill_limit=2)
    plan = plan_round(data, Policy.CPSAT, options)
    assert [d.job_id for d in plan.starts] == ["j0", "j1", "j2"]
    assert plan.outcomes["j3"].status is Status.WAITING
    assert "at most 2 jobs beyond its window" in plan.outcomes["j3"].reason


def test_a_queue_at_its_cap_holds_its_jobs_beyond_the_window() -> None:
    tree = {
        "capped": QueueNode("capped", capability=16),
        "free": QueueNode("free"),
    }
    first = job("first", 8)
    capped = Waiting(replace(job("capped-2", 16).request, queue="capped"), NOW)
    other = Waiting(replace(job("other", 16).request, queue="free"), NOW)
    data = RoundInput(NOW, (cluster("a", 8, 0),), waiting=(first, capped, other), tree=tree)
    plan = plan_round(data, Policy.CPSAT, WINDOW_OF_ONE)
    assert {d.job_id for d in plan.starts} == {"first", "capped-2", "other"}
    over = Waiting(replace(job("capped-3", 24).request, queue="capped"), NOW)
    plan = plan_round(replace(data, waiting=(first, over)), Policy.CPSAT, WINDOW_OF_ONE)
    assert plan.outcomes["capped-3"].status is Status.WAITING
    assert "queue capped may take 16 more GPUs" in plan.outcomes["capped-3"].reason


def test_the_fast_pass_gives_each_job_a_cluster_or_why_not_in_queue_order() -> None:
    jobs = [
        JobRequest("a16", pods=2, gpus_per_pod=8, gpu_model="H100"),
        JobRequest("b16", pods=2, gpus_per_pod=8, gpu_model="H100"),
        JobRequest("c8", pods=1, gpus_per_pod=8, gpu_model="H100"),
        JobRequest("a100", pods=1, gpus_per_pod=8, gpu_model="A100"),
    ]
    found = assign(jobs, (cluster("small", 2, 0), cluster("big", 3, 0)), {}, limit=10)
    # Fewest free GPUs first: a16 fills "small", b16 takes "big", c8 the rest of "big".
    assert {k: a.cluster for k, a in found.items()} == {
        "a16": "small",
        "b16": "big",
        "c8": "big",
        "a100": None,
    }
    assert "of A100" in found["a100"].reason


def test_jobs_the_server_did_not_read_in_full_are_told_why_they_wait() -> None:
    data = RoundInput(
        NOW, (cluster("a", 1, 0),), waiting=(job("first", 8),), beyond={"x": "no room now"}
    )
    plan = plan_round(data, Policy.CPSAT)
    assert plan.outcomes["x"].status is Status.WAITING
    assert plan.outcomes["x"].reason == "no room now"


def test_a_capped_parent_queue_is_not_passed_by_jobs_beyond_the_window() -> None:
    """team may hold 16 GPUs over its leaves a and b: the window's job takes them all in a,
    so b's job beyond the window waits (it would fit the cluster)."""
    tree = {
        "team": QueueNode("team", capability=16),
        "a": QueueNode("a", parent="team"),
        "b": QueueNode("b", parent="team"),
    }
    wide = Waiting(replace(job("a-wide", 16).request, queue="a"), NOW)
    small = Waiting(replace(job("b-small", 8).request, queue="b"), NOW)
    data = RoundInput(NOW, (cluster("a", 8, 0),), waiting=(wide, small), tree=tree)
    plan = plan_round(data, Policy.CPSAT, WINDOW_OF_ONE)
    assert [d.job_id for d in plan.starts] == ["a-wide"]
    assert plan.outcomes["b-small"].reason == (
        "queue b may take 0 more GPUs, after the jobs ahead of it in line; it needs 8"
    )


def test_a_job_beyond_the_window_does_not_take_the_room_a_preemptor_waits_to_make() -> None:
    # 16 GPUs free; ml/low runs on 16 more. vip (32 GPUs, priority 10) may evict low; small
    # (16 GPUs, priority 0) beyond the window would fit in the free 16: it must not take them.
    low = RunningJob(
        "low", (("a", "H100", 16),), ends_in_s=10 * HOUR, run_s=HOUR, priority=0,
        pods=(("a", "a", "", 2, 8),), name="ml/low",
    )  # fmt: skip
    vip = JobRequest(
        "vip", pods=4, gpus_per_pod=8, gpu_model="H100", priority=10,
        may_evict_for=frozenset({PREEMPT, RECLAIM}),
    )  # fmt: skip
    data = RoundInput(
        NOW,
        (cluster("a", 2, 2),),
        waiting=(Waiting(vip, NOW - timedelta(minutes=5)), job("small", 16)),
        running=(low,),
    )
    options = replace(WINDOW_OF_ONE, preemption=Rules(min_run_s=0.0))
    plan = plan_round(data, Policy.CPSAT, options)
    assert [d.job_id for d in plan.starts] == []
    assert [(e.preemptor, [v.id for v in e.victims]) for e in plan.evictions] == [("vip", ["low"])]
    assert "waits behind a job of priority 10" in plan.outcomes["small"].reason


def test_when_the_round_fails_nothing_starts_behind_the_window(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from volcano_global.solver import round_plan

    def fails(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("engine bug")

    monkeypatch.setattr(round_plan, "solve_with_pools", fails)
    plan = plan_round(gang_ahead(job("long", 16, estimate_s=5 * HOUR)), Policy.CPSAT, WINDOW_OF_ONE)
    assert plan.starts == ()
    assert "engine bug" in plan.outcomes["long"].reason


def test_a_job_beyond_the_window_the_model_cannot_mean_is_set_aside_as_in_it() -> None:
    a = ClusterCapacity("a", (Leaf("H100", (0,) * 8 + (8,), ("a",), node_gpus=8),))
    first = JobRequest("first", pods=1, gpus_per_pod=8, gpu_model="H100")
    bad = JobRequest("bad", pods=10, gpus_per_pod=1, gpu_model="H100", unit_pods=4)
    waiting = (Waiting(first, NOW - timedelta(minutes=5)), Waiting(bad, NOW))
    plan = plan_round(RoundInput(NOW, (a,), waiting=waiting), Policy.CPSAT, WINDOW_OF_ONE)
    decision = plan.decision.job("bad")
    assert not decision.admitted
    assert "unit of 4 pods does not divide 10 pods" in decision.reason


def test_the_baselines_keep_their_window() -> None:
    data = gang_ahead(job("short", 16, estimate_s=600.0))
    plan = plan_round(data, Policy.FIRST_FIT, WINDOW_OF_ONE)
    assert "short" not in {d.job_id for d in plan.starts}
