"""`solver.timesharing` by hand: who yields to waiting work of its class, who never does, how
many per round, and how a round (`plan_round`) orders and demotes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from volcano_global.solver import ClusterCapacity, Leaf, Policy, Snapshot
from volcano_global.solver.fair_share import QueueNode
from volcano_global.solver.model import JobRequest, RunningJob
from volcano_global.solver.preemption import Standing
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Waiting, order, plan_round
from volcano_global.solver.timesharing import TIMESHARE, TimeSharing, demote

HOUR = 3600.0
QUANTA = {"q": HOUR, "r": HOUR}
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def full(name: str, nodes: int = 8) -> ClusterCapacity:
    """A cluster of `nodes` 8-GPU H100 nodes, every GPU taken."""
    return ClusterCapacity(name, (Leaf("H100", (nodes,) + (0,) * 8, node_gpus=8),))


def gang(
    job_id: str,
    gpus: int = 64,
    *,
    cluster: str = "a",
    served_h: float = 2.0,
    ran_h: float = 2.0,
    lost_h: float = 0.05,
    priority: int = 0,
    queue: str = "q",
    preemptable: bool = True,
) -> RunningJob:
    """A running gang that received `served_h` hours of its GPUs over its runs, ran `ran_h`
    hours since its last start, and would lose `lost_h` hours since its last checkpoint;
    expected to run 4 h more (waiting for it costs more than it loses)."""
    return RunningJob(
        job_id,
        ((cluster, "H100", gpus),),
        ends_in_s=4 * HOUR,
        priority=priority,
        queue=queue,
        preemptable=preemptable,
        run_s=ran_h * HOUR,
        lost_s=lost_h * HOUR,
        pods=((cluster, cluster, "", gpus // 8, 8),),
        attained_gpu_s=served_h * gpus * HOUR,
    )


def job(gpus: int = 64, *, priority: int = 0, queue: str = "q", served_h: float = 0.0):  # type: ignore[no-untyped-def]
    return JobRequest(
        "w",
        pods=gpus // 8,
        gpus_per_pod=8,
        gpu_model="H100",
        priority=priority,
        queue=queue,
        served_gpu_s=served_h * gpus * HOUR,
    )


def yields(waiting: JobRequest, run: list[RunningJob], clusters=("a",), **kw) -> list[list[str]]:  # type: ignore[no-untyped-def]
    left = Snapshot(tuple(full(c) for c in clusters), running=tuple(run), jobs=(waiting,))
    kw.setdefault("quanta", QUANTA)
    kw.setdefault("queues", {})
    return [[v.id for v in e.victims] for e in demote(left, [waiting], **kw)]


def test_the_most_served_gang_past_its_quantum_yields() -> None:
    run = [gang("less", served_h=2.0), gang("most", served_h=5.0)]
    (e,) = demote(Snapshot((full("a"),), running=tuple(run)), [job()], quanta=QUANTA, queues={})
    assert [v.id for v in e.victims] == ["most"] and e.kind == TIMESHARE
    assert e.placement.shares[0].cluster == "a" and e.placement.shares[0].gpus == 64
    told = e.victim_reasons["most"]
    assert "320.0 GPU-hours over its runs" in told and "quantum 1 h" in told
    assert "3.2 GPU-hours of work lost" in told  # 64 GPUs x 0.05 h
    assert "320.0 GPU-hours received" in e.reason


def test_only_a_gang_that_received_more_than_the_waiting_job_yields() -> None:
    # The waiting job was demoted before, after 3 hours: the 2-hour gang does not yield to it.
    assert yields(job(served_h=3.0), [gang("g", served_h=2.0)]) == []
    assert yields(job(served_h=1.0), [gang("g", served_h=2.0)]) == [["g"]]


def test_never_across_priorities() -> None:
    assert yields(job(priority=10), [gang("low", priority=0)]) == []
    assert yields(job(priority=0), [gang("high", priority=10)]) == []
    assert yields(job(priority=10), [gang("same", priority=10)]) == [["same"]]


def test_never_a_job_annotated_preemptable_false() -> None:
    assert yields(job(), [gang("kept", preemptable=False)]) == []


def test_not_before_its_quantum_since_its_last_start() -> None:
    # 3 hours received over its runs, but restarted 30 minutes ago: the quantum is 1 h.
    assert yields(job(), [gang("g", served_h=3.0, ran_h=0.5)]) == []
    # The rules' minimum run is a floor under a queue's quantum.
    assert yields(job(), [gang("g", ran_h=1.5)], rules=TimeSharing(min_run_s=2 * HOUR)) == []
    assert yields(job(), [gang("g", ran_h=1.5)]) == [["g"]]


def test_only_queues_that_time_share() -> None:
    assert yields(job(queue="other"), [gang("g", queue="other")], quanta={"q": HOUR}) == []


def test_never_takes_a_queue_below_its_fair_share() -> None:
    run = [gang("r1", queue="r")]
    # Queue r holds 64 GPUs and deserves 64: it does not yield to queue q's job ...
    at_share = {"r": Standing(held=64, deserved=64), "q": Standing(held=0, deserved=64)}
    assert yields(job(queue="q"), run, queues=at_share) == []
    # ... unless it holds more than it deserves without the gang; its own jobs it yields to.
    above = {"r": Standing(held=192, deserved=64), "q": Standing(held=0, deserved=64)}
    assert yields(job(queue="q"), run, queues=above) == [["r1"]]
    assert yields(job(queue="r"), run, queues=at_share) == [["r1"]]


def test_several_gangs_of_one_queue_never_take_it_below_its_share_together() -> None:
    """Review: each of r's two gangs alone left r at its share, both together did not."""
    run = [gang("r1", 32, queue="r", served_h=5.0), gang("r2", 32, queue="r", served_h=4.0)]
    queues = {"r": Standing(held=128, deserved=96), "q": Standing(held=0, deserved=96)}
    assert yields(job(64, queue="q"), run, queues=queues) == []
    assert yields(job(32, queue="q"), run, queues=queues) == [["r1"]]


def test_a_queue_that_may_not_be_reclaimed_from_yields_only_to_its_own_jobs() -> None:
    run = [gang("r1", queue="r")]
    closed = {"r": Standing(192, 64, reclaimable=False), "q": Standing(held=0, deserved=64)}
    assert yields(job(queue="q"), run, queues=closed) == []
    assert yields(job(queue="r"), run, queues=closed) == [["r1"]]


def test_caps_per_round() -> None:
    run = [gang("g1", cluster="a"), gang("g2", cluster="b")]
    waiting = [replace(job(), id="w1"), replace(job(), id="w2")]
    left = Snapshot((full("a"), full("b")), running=tuple(run), jobs=tuple(waiting))
    both = demote(left, waiting, quanta=QUANTA, queues={})
    assert [e.preemptor for e in both] == ["w1", "w2"]
    one = demote(left, waiting, quanta=QUANTA, queues={}, rules=TimeSharing(max_jobs=1))
    assert [e.preemptor for e in one] == ["w1"]
    gpus = demote(left, waiting, quanta=QUANTA, queues={}, rules=TimeSharing(max_gpus=64))
    assert len(gpus) == 1


def test_only_when_the_waiting_job_fits_once_it_is_gone() -> None:
    # 128 GPUs wanted in a 128-GPU cluster: the gang that may yield frees 64 of them, the
    # other 64 are a gang that received less than the job has: nobody yields.
    run = [gang("most", served_h=5.0), gang("new", served_h=0.0)]
    left = Snapshot((full("a", 16),), running=tuple(run))
    assert demote(left, [job(128)], quanta=QUANTA, queues={}) == []
    assert [
        [v.id for v in e.victims] for e in demote(left, [job(64)], quanta=QUANTA, queues={})
    ] == [["most"]]


def test_not_while_it_would_lose_more_than_the_limit_since_its_checkpoint() -> None:
    # 300 s by default: 30 minutes since its checkpoint is too much, 3 minutes is not.
    assert yields(job(), [gang("g", lost_h=0.5)]) == []
    assert yields(job(), [gang("g", lost_h=0.05)]) == [["g"]]
    assert yields(job(), [gang("g", lost_h=0.5)], rules=TimeSharing(max_lost_s=None)) == [["g"]]


def test_not_when_running_work_makes_room_sooner_than_the_loss_is_worth() -> None:
    # It would lose an hour of 64 GPUs; room comes in 6 minutes without it (64 x 0.1 h).
    soon = replace(gang("g", lost_h=1.0), ends_in_s=0.1 * HOUR)
    any_loss = TimeSharing(max_lost_s=None)
    assert yields(job(), [soon], rules=any_loss) == []
    assert yields(job(), [soon], rules=replace(any_loss, wait_weight=None)) == [["g"]]


def test_a_round_demotes_and_orders_the_demoted_after_less_served_work() -> None:
    def waiting(job_id: str, served_h: float, minute: int) -> Waiting:
        request = replace(job(served_h=served_h), id=job_id)
        return Waiting(request, NOW.replace(minute=minute))

    data = RoundInput(
        NOW,
        (full("a"),),
        # The demoted job came first, and received 1 h; the new one arrived later.
        waiting=(waiting("demoted", 1.0, 0), waiting("new", 0.0, 30)),
        tree={"q": QueueNode("q", held=64)},
        running=(gang("g", served_h=3.0),),
        fleet_gpus=64,
        time_sharing=QUANTA,
    )
    plan = plan_round(data, Policy.GREEDY)
    (e,) = plan.evictions
    assert e.preemptor == "new" and e.kind == TIMESHARE and [v.id for v in e.victims] == ["g"]
    assert plan.outcomes["new"].victims == ("g",)
    assert [j.id for j in order(data, Policy.GREEDY, RoundOptions())] == ["new", "demoted"]
    # Without time-sharing the queue is served first come, first served, and nobody yields.
    off = replace(data, time_sharing={})
    assert plan_round(off, Policy.GREEDY).evictions == ()
    assert [j.id for j in order(off, Policy.GREEDY, RoundOptions())] == ["demoted", "new"]
