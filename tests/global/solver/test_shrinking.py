"""`solver.shrinking` by hand: which running elastic jobs give back replicas, how many and
where, to a waiting job - under the preemption rules (`solver.preemption.may_take`)."""

from __future__ import annotations

from dataclasses import replace

from tests.solver_support import instances
from volcano_global.solver import JobRequest, planning
from volcano_global.solver.preemption import Rules, Standing, may_evict_for
from volcano_global.solver.shrinking import shrinks

# An elastic job of 8 replicas of 2 pods x 8 GPUs (16 GPUs a replica), at least 2.
ELASTIC = JobRequest("e", pods=16, gpus_per_pod=8, unit_pods=2, min_units=2, gpu_model="H100")
RULES = Rules(min_run_s=600.0)
HOUR = 3600.0
MODELS = {"a": ("H100",), "b": ("H100",)}


def run(
    *units_in: tuple[str, int], request: JobRequest = ELASTIC, since_s: float = HOUR
) -> planning.ElasticRun:
    return planning.ElasticRun(request, units_in, estimate_s=600.0, since_s=since_s)


def gang(
    job_id: str, gpus: int, *, priority: int = 1, due: bool = False, policy: str = ""
) -> JobRequest:
    evicts = may_evict_for(policy)
    return instances.job(job_id, gpus // 8, due=due, priority=priority, may_evict_for=evicts)


def cuts(
    waiting: list[JobRequest],
    runs: list[planning.ElasticRun],
    free: dict[tuple[str, str | None], int],
    queues: dict[str, Standing] | None = None,
) -> list[planning.Shrink]:
    models = {c: MODELS[c] for c, _ in free}
    return shrinks(waiting, runs, free_gpus=free, cluster_models=models, rules=RULES, queues=queues)


def test_a_higher_priority_job_gets_the_replicas_above_the_minimum_in_one_cluster() -> None:
    # 32 free GPUs in a; the 64-GPU gang needs 32 more: two replicas of e (6 running in a).
    got = cuts([gang("vip", 64)], [run(("a", 6))], {("a", "H100"): 32, ("b", "H100"): 0})
    assert got == [planning.Shrink("e", "a", 2, "vip")]


def test_never_below_the_minimum_nor_a_splits_last_replica_in_a_cluster() -> None:
    # e runs 3 replicas (1 above its minimum of 2): a 48-GPU gang would need 3 back: none.
    assert cuts([gang("vip", 48)], [run(("a", 3))], {("a", "H100"): 0}) == []
    # Split 1 + 4: the replica in a stays (its split and bandwidth), b gives up to 2 back.
    got = cuts([gang("vip", 32)], [run(("a", 1), ("b", 4))], {("a", "H100"): 16, ("b", "H100"): 0})
    assert got == [planning.Shrink("e", "b", 2, "vip")]


def test_a_due_job_of_the_same_priority_gets_nothing_and_the_lowest_priority_gives_first() -> None:
    # Owed a reservation, but not of a higher priority (and no reclaim): a shrink is a
    # preemption, and waiting long is no reason to preempt.
    assert cuts([gang("due", 32, priority=0, due=True)], [run(("a", 6))], {("a", "H100"): 0}) == []
    low = run(("a", 4), request=JobRequest("low", 16, 8, "H100", unit_pods=2, min_units=2))
    high = run(
        ("a", 4), request=JobRequest("high", 16, 8, "H100", unit_pods=2, min_units=2, priority=1)
    )
    got = cuts([gang("vip", 32, priority=2)], [high, low], {("a", "H100"): 0})
    assert got == [planning.Shrink("low", "a", 2, "vip")]
    # A job that fits where it is needs nothing back.
    assert cuts([gang("vip", 32, priority=2)], [low], {("a", "H100"): 32}) == []


def test_the_preemption_rules_hold_for_a_shrink() -> None:
    free = {("a", "H100"): 0}
    # volcano.sh/preemptable: "false".
    kept = replace(run(("a", 6)), preemptable=False)
    assert cuts([gang("vip", 32)], [kept], free) == []
    # The waiting job's class says preemptionPolicy: Never.
    assert cuts([gang("vip", 32, policy="Never")], [run(("a", 6))], free) == []
    # Started or resized less than the minimum run time ago.
    assert cuts([gang("vip", 32)], [run(("a", 6), since_s=599.0)], free) == []
    # The resize interval does not hold a shrink back: with no minimum run time the job
    # could be evicted whole, and giving back two replicas costs less.
    young = run(("a", 6), since_s=1.0)
    got = shrinks(
        [gang("vip", 32)],
        [young],
        free_gpus=free,
        cluster_models={"a": ("H100",)},
        rules=Rules(min_run_s=0.0),
    )
    assert got == [planning.Shrink("e", "a", 2, "vip")]
    assert cuts([gang("vip", 32)], [run(("a", 6), since_s=600.0)], free) == [
        planning.Shrink("e", "a", 2, "vip")
    ]


def test_reclaim_takes_no_more_than_the_givers_queue_holds_above_its_share() -> None:
    # Same priority: only reclaim. The waiting job's queue "mine" is below its share; e's
    # queue "theirs" holds 96 GPUs and deserves 64: 32 GPUs (2 replicas) may go.
    e = run(("a", 6), request=replace(ELASTIC, queue="theirs"))
    waiting = replace(gang("small", 32, priority=0), queue="mine")
    queues = {"mine": Standing(0, 128), "theirs": Standing(96, 64)}
    free = {("a", "H100"): 0}
    assert cuts([waiting], [e], free, queues=queues) == [planning.Shrink("e", "a", 2, "small")]
    # A 64-GPU job would need 4 replicas: more than reclaim may take, so none.
    bigger = replace(gang("big", 64, priority=0), queue="mine")
    assert cuts([bigger], [e], free, queues=queues) == []
    # Not reclaimable, or no standing known: nothing.
    closed = {**queues, "theirs": Standing(96, 64, reclaimable=False)}
    assert cuts([waiting], [e], free, queues=closed) == []
    assert cuts([waiting], [e], free) == []
    # What a first shrink took counts for the next job: the queue is at its share after it.
    again = replace(waiting, id="small2")
    got = cuts([waiting, again], [e], free, queues=queues)
    assert got == [planning.Shrink("e", "a", 2, "small")]
